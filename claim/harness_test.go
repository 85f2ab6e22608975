package claim

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"tally/digest"
	"tally/refuse"
)

var t0 = time.Date(2026, 9, 1, 17, 0, 0, 0, time.UTC)

// ledger is a tiny log for tests: every record Decide returns is encoded,
// decoded again (so the wire path is always exercised) and applied.
type ledger struct {
	t   testing.TB
	s   *State
	seq uint64
	now time.Time
	log []loggedLine
}

type loggedLine struct {
	meta Meta
	line []byte
}

func newLedger(t testing.TB) *ledger {
	return &ledger{t: t, s: NewState(), now: t0}
}

// do runs a command that must succeed and applies its records.
func (l *ledger) do(actor string, cmd Command) []Event {
	l.t.Helper()
	evs, err := l.s.Decide(actor, l.now, cmd)
	if err != nil {
		l.t.Fatalf("%s %T: %v", actor, cmd, err)
	}
	for _, e := range evs {
		l.append(actor, e)
	}
	return evs
}

// append writes one record to the log as another tool might, bypassing Decide.
func (l *ledger) append(actor string, e Event) {
	l.t.Helper()
	line := e.Encode()
	d, err := Decode(line)
	if err != nil {
		l.t.Fatalf("decode of encoded %s: %v\n%s", e.Type, err, line)
	}
	if string(d.Encode()) != string(line) {
		l.t.Fatalf("re-encode differs:\n%s\n%s", line, d.Encode())
	}
	l.seq++
	m := Meta{Seq: l.seq, Actor: actor, TS: l.now}
	l.log = append(l.log, loggedLine{meta: m, line: line})
	l.s.Apply(m, d)
}

// refuse runs a command that must be refused with code on field.
func (l *ledger) refuse(actor string, cmd Command, code refuse.Code, field string) *refuse.Refusal {
	l.t.Helper()
	evs, err := l.s.Decide(actor, l.now, cmd)
	if err == nil {
		l.t.Fatalf("%s %T accepted: %d records (%s)", actor, cmd, len(evs), evs[0].Encode())
	}
	r, ok := refuse.As(err)
	if !ok {
		l.t.Fatalf("%s %T: not a refusal: %v", actor, cmd, err)
	}
	if r.Code != code || (field != "" && r.Field != field) {
		l.t.Fatalf("%s %T: refusal %s %q (%v), want %s %q", actor, cmd, r.Code, r.Field, r, code, field)
	}
	return r
}

func (l *ledger) state(id string) Status {
	l.t.Helper()
	v, ok := l.s.Claim(id, l.now)
	if !ok {
		l.t.Fatalf("no claim %s", id)
	}
	return v.State
}

func (l *ledger) view(id string) View {
	l.t.Helper()
	v, ok := l.s.Claim(id, l.now)
	if !ok {
		l.t.Fatalf("no claim %s", id)
	}
	return v
}

func (l *ledger) expect(id string, want Status) {
	l.t.Helper()
	if got := l.state(id); got != want {
		v := l.view(id)
		b, _ := json.MarshalIndent(v, "", "  ")
		l.t.Fatalf("claim %s is %s, want %s\n%s", id, got, want, b)
	}
}

// Participants of the parser story.
const (
	maintainer = "maintainer"
	parser     = "parser"
	reviewer   = "reviewer"
)

func check(id, evaluator string, mode Mode, phases ...Phase) CheckSpec {
	if len(phases) == 0 {
		phases = []Phase{Programmatic}
	}
	return CheckSpec{ID: id, Validator: Validator{Name: id + "-validator", Version: "1"}, Evaluator: evaluator, Mode: mode, Phases: phases, Attempts: 1}
}

func slot(name string, mode Mode, checks ...CheckSpec) SlotSpec {
	return SlotSpec{Name: name, Mode: mode, Checks: checks}
}

// parserSlots is C17's requirement: Behavior and Review on the same change.
func parserSlots() []SlotSpec {
	return []SlotSpec{slot("change", Required,
		check("behavior", maintainer, Required, Programmatic),
		check("review", maintainer, Required, Quality))}
}

// open creates, posts and takes the receipt of a claim.
func (l *ledger) open(id string, slots []SlotSpec, mut ...func(*Create)) {
	l.t.Helper()
	c := Create{Claim: id, Respondent: parser, Work: "reject incomplete Unicode escapes", Scope: "string parser", Slots: slots}
	for _, m := range mut {
		m(&c)
	}
	l.do(maintainer, c)
	l.do(maintainer, Post{Claim: id})
	l.do(parser, AcquireReceipt{Claim: id})
}

// publish stores an output artifact for slot under the holder's generation.
func (l *ledger) publish(id, art, slotName string, gen uint64) {
	l.t.Helper()
	l.publishAs(parser, id, art, slotName, gen)
}

func (l *ledger) publishAs(actor, id, art, slotName string, gen uint64) {
	l.t.Helper()
	role := RoleOutput
	if slotName == "" {
		role = RoleDiagnostic
	}
	l.do(actor, PublishArtifact{Claim: id, Artifact: art, Role: role, Slot: slotName, Kind: "patch", Schema: "text/x-diff",
		Generation: gen, Content: digest.HashContent([]byte(id + "/" + art)), Size: int64(len(art))})
}

// respond closes, posts and (as the claimant) receives a complete testament.
func (l *ledger) respond(id, testament string, gen uint64, bindings map[string]string) {
	l.t.Helper()
	l.respondAs(parser, id, testament, gen, bindings)
}

func (l *ledger) respondAs(actor, id, testament string, gen uint64, bindings map[string]string) {
	l.t.Helper()
	var bs []Binding
	for _, sl := range l.s.claims[id].terms.Slots {
		if a, ok := bindings[sl.Name]; ok {
			bs = append(bs, Binding{Slot: sl.Name, Artifact: a})
		}
	}
	cmd := CloseTestament{Claim: id, Testament: testament, Generation: gen, Outcome: Complete, Summary: "done", Bindings: bs}
	if len(bs) < len(l.s.claims[id].terms.Slots) {
		diag := testament + "-diag"
		l.publishAs(actor, id, diag, "", gen)
		cmd.Outcome = Partial
		cmd.Diagnostics = []Ref{{Artifact: diag}}
	}
	l.do(actor, cmd)
	l.do(actor, PostTestament{Claim: id, Testament: testament})
	l.do(maintainer, ReceiveTestament{Claim: id, Testament: testament})
}

// twoCandidates opens a claim with C17's terms and has the claimant receive
// two responses: T1 binding patch A to the change slot, T2 binding patch B.
func (l *ledger) twoCandidates(id string) {
	l.t.Helper()
	l.open(id, parserSlots())
	l.publish(id, "A", "change", 1)
	l.publish(id, "B", "change", 1)
	l.respond(id, "T1", 1, map[string]string{"change": "A"})
	l.respond(id, "T2", 1, map[string]string{"change": "B"})
}

var evidenceN int

// verdict publishes the evaluator's evidence and reports a result.
func (l *ledger) verdict(evaluator, id, chk, art string, res Result) []Event {
	l.t.Helper()
	evidenceN++
	ev := fmt.Sprintf("E%d", evidenceN)
	l.do(evaluator, PublishArtifact{Claim: id, Artifact: ev, Role: RoleResult, Kind: "log", Content: digest.HashContent([]byte(ev)), Size: 1})
	return l.do(evaluator, ReportVerdict{Claim: id, Check: chk, Artifact: art, Result: res, Evidence: ev})
}

func (l *ledger) evidence(evaluator, id string) string {
	l.t.Helper()
	evidenceN++
	ev := fmt.Sprintf("E%d", evidenceN)
	l.do(evaluator, PublishArtifact{Claim: id, Artifact: ev, Role: RoleResult, Kind: "log", Content: digest.HashContent([]byte(ev)), Size: 1})
	return ev
}

// allViews is the JSON of every claim's view, in creation order.
func allViews(s *State, now time.Time) string {
	var out []View
	for _, c := range s.order {
		v, _ := s.Claim(c.id, now)
		out = append(out, v)
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic(err)
	}
	ig, n := s.Ignored()
	b2, _ := json.Marshal(struct {
		Ignored []Ignored
		N       int
	}{ig, n})
	return string(b) + string(b2)
}

// replay folds a ledger's log into a fresh state from its bytes.
func (l *ledger) replay() *State {
	s := NewState()
	for _, ll := range l.log {
		e, err := Decode(ll.line)
		if err != nil {
			l.t.Fatalf("replay decode: %v", err)
		}
		s.Apply(ll.meta, e)
	}
	return s
}
