package claim

import (
	"slices"
	"time"

	"tally/duequeue"
	"tally/instant"
)

// Config holds the identities the fold trusts by role.
type Config struct {
	// Timekeeper is the only identity that may commit deadline and deadlock
	// facts (the watcher).
	Timekeeper string
}

// Terminal says how and why a claim ended.
type Terminal struct {
	State     Status   `json:"state"`
	Seq       uint64   `json:"seq"` // the record that ended the claim
	TS        string   `json:"ts"`
	Actor     string   `json:"actor,omitempty"`
	Reason    string   `json:"reason"`
	Slot      string   `json:"slot,omitempty"`      // the uncovered Required slot that decided
	Check     string   `json:"check,omitempty"`     // the check whose result decided
	Artifact  string   `json:"artifact,omitempty"`  // the target of that check
	Digest    string   `json:"digest,omitempty"`    //
	Testament string   `json:"testament,omitempty"` // the response missing the slot
	On        string   `json:"on,omitempty"`        // DependencyFailed: the failed DependsOn target
	Origin    string   `json:"origin,omitempty"`    // DependencyFailed: where the failure started
	Successor string   `json:"successor,omitempty"` // Superseded
	Members   []string `json:"members,omitempty"`   // Deadlocked: the wait-cycle
}

// Ignored is a record the fold did not apply: semantically invalid against
// the state it met (a verdict from the wrong evaluator, a stale generation).
// The record stays in the log; the fold reports it here.
type Ignored struct {
	Seq    uint64 `json:"seq"`
	Type   string `json:"type"`
	Claim  string `json:"claim"`
	Actor  string `json:"actor"`
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// MaxIgnoredKept bounds the ignored-record list a State keeps; the count
// keeps growing past it.
const MaxIgnoredKept = 10000

// State is the folded claim family of one session.
//
// Invariant: claims only grow; a claim's terms never change after create; a
// claim's end, once set, never changes.
type State struct {
	cfg        Config
	claims     map[string]*claimRec
	order      []*claimRec         // creation order
	dependents map[string][]string // target id → claims naming it in depends_on or awaits, creation order
	seq        uint64              // last applied sequence
	ignored    []Ignored
	ignoredN   int
	deadlines  *duequeue.Index[*claimRec] // open claims with a deadline (made on first use)

	// Lookups go through claim(), which answers the Decide preview first,
	// then the claim last looked up by Decide or Apply, then the map. A
	// command and its records touch one claim a dozen times; in a ledger of
	// a million claims each map lookup is a cache miss (issue 3's figure).
	// Only Decide and Apply (writing) fill hot, so reads never write.
	hot, preview *claimRec
	writing      bool
}

// claim returns the claim id, or nil. See State.hot.
func (s *State) claim(id string) *claimRec {
	if p := s.preview; p != nil && p.id == id {
		return p
	}
	if h := s.hot; h != nil && h.id == id {
		return h
	}
	c := s.claims[id]
	if c != nil && s.writing {
		s.hot = c
	}
	return c
}

// NewStateConfig returns an empty state.
func NewStateConfig(cfg Config) *State {
	return &State{cfg: cfg, claims: map[string]*claimRec{}, dependents: map[string][]string{}}
}

// Len is the number of claims.
func (s *State) Len() int { return len(s.order) }

// Seq is the sequence of the last record applied.
func (s *State) Seq() uint64 { return s.seq }

// Ignored returns the records the fold did not apply (the first
// MaxIgnoredKept of them) and how many there were in all.
func (s *State) Ignored() ([]Ignored, int) { return s.ignored, s.ignoredN }

type receiptRec struct {
	holder     string
	generation uint64
	seq        uint64
}

type artifactRec struct {
	id, role, slot, kind, schema, name string
	cycle, generation                  uint64
	content, digest                    string
	size                               int64
	producer                           string
	seq                                uint64
	ts                                 time.Time
	received                           uint64 // seq of the claimant's artifact receipt
}

type testamentRec struct {
	id, role, author   string
	generation, cycle  uint64
	outcome, summary   string
	confidence         *float64
	bindings           []Binding
	diagnostics        []Ref
	results            []Ref
	seq, posted, recvd uint64
	ts                 time.Time
}

func (t *testamentRec) binding(slot string) (Binding, bool) {
	for _, b := range t.bindings {
		if b.Slot == slot {
			return b, true
		}
	}
	return Binding{}, false
}

type attemptKey struct{ check, artifact, digest string }

// Attempt states. Stored in views: do not rename.
const (
	attemptPending    = "pending"
	attemptRunning    = "running"
	attemptPassed     = "passed"
	attemptFailed     = "failed"
	attemptIncomplete = "incomplete"
	attemptErrored    = "errored"
)

type resultRec struct {
	Seq            uint64    `json:"seq"`
	TS             time.Time `json:"ts"`
	Check          string    `json:"check"`
	Phase          Phase     `json:"phase"`
	Handler        int       `json:"handler"`
	Validator      Validator `json:"validator"`
	Attempt        int       `json:"attempt"`
	Result         Result    `json:"result"`
	Evidence       string    `json:"evidence"`
	EvidenceDigest string    `json:"evidence_digest"`
	Note           string    `json:"note,omitempty"`
	Late           bool      `json:"late,omitempty"` // recorded after the claim ended: audit only
}

// attemptRec is one check's evaluation of one pinned target.
//
// Invariant: phase < len(phases); handler ≤ len(fallbacks); used < attempts
// while not concluded; state moves only pending ⇄ running → concluded.
type attemptRec struct {
	phase, handler, used int
	state                string
	runningAttempt       int
	concluded            uint64 // seq of the concluding verdict
	results              []resultRec
}

func (a *attemptRec) concludedState() bool {
	switch a.state {
	case attemptPassed, attemptFailed, attemptIncomplete, attemptErrored:
		return true
	}
	return false
}

type lateRec struct {
	Seq   uint64    `json:"seq"`
	TS    time.Time `json:"ts"`
	Type  string    `json:"type"`
	Actor string    `json:"actor"`
}

type progressRec struct {
	Seq        uint64    `json:"seq"`
	TS         time.Time `json:"ts"`
	Generation uint64    `json:"generation"`
	Note       string    `json:"note"`
}

type adoptionRec struct {
	Seq        uint64    `json:"seq"`
	TS         time.Time `json:"ts"`
	Holder     string    `json:"holder"`
	Generation uint64    `json:"generation"`
	Reason     string    `json:"reason,omitempty"`
}

// claimRec is the folded record of one claim.
type claimRec struct {
	id      string
	terms   *Event // the claim.create record: immutable terms
	seq     uint64
	created time.Time
	stage   Status
	end     *Terminal

	slotIdx  map[string]int    // slot name → index; nil for small claims (see indexedTerms)
	checkIdx map[string][2]int // check id → (slot index, check index); nil likewise

	receipt    receiptRec
	adoptions  []adoptionRec
	artifacts  map[string]*artifactRec
	artOrder   []string
	testaments map[string]*testamentRec
	tOrder     []string
	cycles     uint64 // response testaments closed
	attempts   map[attemptKey]*attemptRec
	attOrder   []attemptKey

	delivery          uint64 // seq of the first testament receipt (the implicit delivery check)
	deliveryTestament string
	covered           []bool // per slot: a witness exists (monotone)
	uncovered         int    // Required slots not covered
	localOK           bool   // every Required slot covered and delivery passed (monotone)

	progress   []progressRec
	late       []lateRec
	successors []string
	taker      string // a pool claim's respondent: the seat whose receipt was first

	dlSlot int32 // position in State.deadlines (+1; 0 when absent), written by the index alone
}

func newClaimRec(m Meta, e *Event) *claimRec {
	// Maps are made on first use: a ledger of a million claims mostly holds
	// claims that have no artifacts yet, and the GC scans what we allocate.
	c := &claimRec{id: e.Claim, terms: e, seq: m.Seq, created: m.TS, stage: Generated}
	checks := 0
	for _, sl := range e.Slots {
		checks += len(sl.Checks)
	}
	if len(e.Slots) > 0 {
		c.covered = make([]bool, len(e.Slots))
	}
	if checks > indexedTerms {
		c.slotIdx, c.checkIdx = map[string]int{}, map[string][2]int{}
	}
	for i, sl := range e.Slots {
		if c.slotIdx != nil {
			c.slotIdx[sl.Name] = i
			for j, ch := range sl.Checks {
				c.checkIdx[ch.ID] = [2]int{i, j}
			}
		}
		if sl.Mode == Required {
			c.uncovered++
		}
	}
	return c
}

// indexedTerms is the number of declared checks above which a claim indexes
// its slots and checks in maps. Below it a linear scan of the terms is as
// fast, and two maps per claim were most of the heap of a ledger of small
// claims (≈ 1.9 KB a claim at 1,000,000 one-slot claims).
const indexedTerms = 16

// slotIndex returns the declaration index of the slot named name, or -1.
func (c *claimRec) slotIndex(name string) int {
	if c.slotIdx != nil {
		if i, ok := c.slotIdx[name]; ok {
			return i
		}
		return -1
	}
	for i := range c.terms.Slots {
		if c.terms.Slots[i].Name == name {
			return i
		}
	}
	return -1
}

// clone copies everything apply may change, so Decide can preview a record.
func (c *claimRec) clone() *claimRec {
	d := *c
	if c.end != nil {
		t := *c.end
		d.end = &t
	}
	d.artifacts = make(map[string]*artifactRec, len(c.artifacts))
	for k, v := range c.artifacts {
		a := *v
		d.artifacts[k] = &a
	}
	d.testaments = make(map[string]*testamentRec, len(c.testaments))
	for k, v := range c.testaments {
		t := *v
		d.testaments[k] = &t
	}
	d.attempts = make(map[attemptKey]*attemptRec, len(c.attempts))
	for k, v := range c.attempts {
		a := *v
		a.results = append([]resultRec(nil), v.results...)
		d.attempts[k] = &a
	}
	d.covered = append([]bool(nil), c.covered...)
	d.artOrder = append([]string(nil), c.artOrder...)
	d.tOrder = append([]string(nil), c.tOrder...)
	d.attOrder = append([]attemptKey(nil), c.attOrder...)
	return &d
}

func (c *claimRec) check(id string) (*SlotSpec, *CheckSpec, bool) {
	var ij [2]int
	if c.checkIdx != nil {
		var ok bool
		if ij, ok = c.checkIdx[id]; !ok {
			return nil, nil, false
		}
	} else {
		found := false
		for i := range c.terms.Slots {
			for j := range c.terms.Slots[i].Checks {
				if c.terms.Slots[i].Checks[j].ID == id {
					ij, found = [2]int{i, j}, true
					break
				}
			}
			if found {
				break
			}
		}
		if !found {
			return nil, nil, false
		}
	}
	sl := &c.terms.Slots[ij[0]]
	return sl, &sl.Checks[ij[1]], true
}

// gates reports whether a check gates acceptance: Required in a Required slot.
func gates(sl *SlotSpec, ch *CheckSpec) bool { return sl.Mode == Required && ch.Mode == Required }

// status is the claim's state: its end if terminal, else its stage.
func (c *claimRec) status() Status {
	if c.end != nil {
		return c.end.State
	}
	return c.stage
}

func (c *claimRec) advance(to Status) {
	if stageRank[to] > stageRank[c.stage] {
		c.stage = to
	}
}

// isEvaluator reports whether id is the designated evaluator of any check.
func (c *claimRec) isEvaluator(id string) bool {
	for _, sl := range c.terms.Slots {
		for _, ch := range sl.Checks {
			if ch.Evaluator == id {
				return true
			}
		}
	}
	return false
}

// boundInReceived reports whether (artifact, digest) is bound to slot in a
// response testament the claimant has received.
func (c *claimRec) boundInReceived(slot, art, digest string) bool {
	for _, tid := range c.tOrder {
		t := c.testaments[tid]
		if t.role != TestamentResponse || t.recvd == 0 {
			continue
		}
		if b, ok := t.binding(slot); ok && b.Artifact == art && b.Digest == digest {
			return true
		}
	}
	return false
}

// cause is a committed reason a Required slot cannot be covered by a target.
type cause struct {
	state     Status // ValidationIncomplete, ValidationFailed or ValidationErrored
	seq       uint64
	check     string
	artifact  string
	digest    string
	testament string
}

// slotEval is a slot's evaluation from scratch.
type slotEval struct {
	witness    *witness
	causes     []cause
	candidates int // targets under evaluation (neither witness nor dead)
	testaments int // received responses considered
}

type witness struct {
	artifact, digest, testament string
	seq                         uint64 // when its last gating check passed
}

// evalSlot evaluates slot i over every received response: a witness is one
// target (artifact id + digest) on which every gating check of the slot
// passed; a cause is a received response missing the slot, or a gating check
// concluded Fail, Incomplete or Errored on a target.
func (c *claimRec) evalSlot(i int) slotEval { return c.evalSlotAt(i, 0) }

// evalSlotAt is evalSlot as of sequence asOf (0: everything folded): a check
// that concluded after asOf counts as still running. A terminal claim's view
// is evaluated as of its end, so a verdict kept for the audit afterwards (a
// check that was running when the claim ended) never shows as a witness or a
// cause.
func (c *claimRec) evalSlotAt(i int, asOf uint64) slotEval {
	sl := &c.terms.Slots[i]
	var ev slotEval
	var seenBuf [4][2]string // targets already considered; a claim has few responses
	seen := seenBuf[:0]
	for _, tid := range c.tOrder {
		t := c.testaments[tid]
		if t.role != TestamentResponse || t.recvd == 0 {
			continue
		}
		ev.testaments++
		b, ok := t.binding(sl.Name)
		if !ok {
			ev.causes = append(ev.causes, cause{state: ValidationIncomplete, seq: t.recvd, testament: t.id})
			continue
		}
		key := [2]string{b.Artifact, b.Digest}
		if slices.Contains(seen, key) {
			continue
		}
		seen = append(seen, key)
		passed, dead := true, false
		var last uint64
		for _, ch := range sl.Checks {
			if ch.Mode != Required {
				continue
			}
			a := c.attempts[attemptKey{ch.ID, b.Artifact, b.Digest}]
			if a == nil || (asOf > 0 && a.concluded > asOf) {
				passed = false
				continue
			}
			switch a.state {
			case attemptPassed:
				if a.concluded > last {
					last = a.concluded
				}
			case attemptFailed, attemptIncomplete, attemptErrored:
				dead, passed = true, false
				st := map[string]Status{attemptFailed: ValidationFailed, attemptIncomplete: ValidationIncomplete, attemptErrored: ValidationErrored}[a.state]
				ev.causes = append(ev.causes, cause{state: st, seq: a.concluded, check: ch.ID, artifact: b.Artifact, digest: b.Digest, testament: t.id})
			default:
				passed = false
			}
		}
		switch {
		case dead:
		case passed:
			if last == 0 {
				last = t.recvd
			}
			if ev.witness == nil || last < ev.witness.seq {
				ev.witness = &witness{artifact: b.Artifact, digest: b.Digest, testament: t.id, seq: last}
			}
		default:
			ev.candidates++
		}
	}
	return ev
}

// firstCause is the earliest committed cause (lowest seq; ties by check
// declaration order, which evalSlot already follows).
func (ev *slotEval) firstCause() *cause {
	var best *cause
	for i := range ev.causes {
		if best == nil || ev.causes[i].seq < best.seq {
			best = &ev.causes[i]
		}
	}
	return best
}

// settleSlots re-evaluates the given Required slots (declaration order),
// marking newly covered ones. It returns the terminal failure when an
// uncovered Required slot has a committed cause: the first such slot by
// declaration index decides.
func (c *claimRec) settleSlots(slots []int) *Terminal {
	var fail *Terminal
	for _, i := range slots {
		sl := &c.terms.Slots[i]
		if sl.Mode != Required || c.covered[i] {
			continue
		}
		ev := c.evalSlot(i)
		if ev.witness != nil {
			c.covered[i] = true
			c.uncovered--
			continue
		}
		if fail != nil {
			continue
		}
		if k := ev.firstCause(); k != nil {
			fail = &Terminal{State: k.state, Slot: sl.Name, Check: k.check, Artifact: k.artifact, Digest: k.digest, Testament: k.testament}
			switch k.state {
			case ValidationIncomplete:
				if k.check == "" {
					fail.Reason = "required slot " + sl.Name + " is missing from response " + k.testament
				} else {
					fail.Reason = "check " + k.check + " found nothing to evaluate in " + k.artifact
				}
			case ValidationFailed:
				fail.Reason = "check " + k.check + " failed on " + k.artifact
			case ValidationErrored:
				fail.Reason = "check " + k.check + " errored on " + k.artifact + " after every attempt and fallback"
			}
		}
	}
	return fail
}

func allSlots(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// effect is what applying one record did to its claim, for the graph.
type effect struct {
	ended   bool // the claim became terminal
	localOK bool // local success became true
}

// apply changes one claim for a record validate accepted. It touches no other
// claim; the State runs the graph afterwards.
func (c *claimRec) apply(m Meta, e *Event) effect {
	ts := m.TS.UTC() // times in views are recorded data, always UTC
	var eff effect
	end := func(t *Terminal) {
		t.Seq, t.TS, t.Actor = m.Seq, instant.Format(ts), m.Actor
		c.end = t
		eff.ended = true
	}
	if c.end != nil {
		// Only audit records reach a terminal claim (late verdicts of running
		// checks, Observe checks, result artifacts and result testaments).
		c.late = append(c.late, lateRec{Seq: m.Seq, TS: ts, Type: e.Type, Actor: m.Actor})
	}
	switch e.Type {
	case TypePost:
		c.advance(Posted)
	case TypePostFailed:
		end(&Terminal{State: PostFailed, Reason: e.Reason})
	case TypeReceipt:
		c.receipt = receiptRec{holder: e.Holder, generation: e.Generation, seq: m.Seq}
		c.taker = e.Holder
		c.advance(Received)
	case TypeReceiptFailed:
		end(&Terminal{State: ReceiptFailed, Reason: e.Reason})
	case TypeAdopt:
		c.receipt = receiptRec{holder: e.Holder, generation: e.Generation, seq: m.Seq}
		c.adoptions = append(c.adoptions, adoptionRec{Seq: m.Seq, TS: ts, Holder: e.Holder, Generation: e.Generation, Reason: e.Reason})
	case TypeProgress:
		c.progress = append(c.progress, progressRec{Seq: m.Seq, TS: ts, Generation: e.Generation, Note: e.Note})
		c.advance(Progressed)
	case TypeArtifact:
		if c.artifacts == nil {
			c.artifacts = map[string]*artifactRec{}
		}
		c.artifacts[e.Artifact] = &artifactRec{id: e.Artifact, role: e.Role, slot: e.Slot, kind: e.Kind,
			schema: e.Schema, name: e.Name, cycle: e.Cycle, generation: e.Generation, content: e.Content,
			digest: e.Digest, size: e.Size, producer: m.Actor, seq: m.Seq, ts: m.TS}
		c.artOrder = append(c.artOrder, e.Artifact)
	case TypeArtifactReceive:
		c.artifacts[e.Artifact].received = m.Seq
	case TypeTestament:
		if c.testaments == nil {
			c.testaments = map[string]*testamentRec{}
		}
		c.testaments[e.Testament] = &testamentRec{id: e.Testament, role: e.Role, author: m.Actor,
			generation: e.Generation, cycle: e.Cycle, outcome: e.Outcome, summary: e.Summary,
			confidence: e.Confidence, bindings: e.Bindings, diagnostics: e.Diagnostics, results: e.Results,
			seq: m.Seq, ts: m.TS}
		c.tOrder = append(c.tOrder, e.Testament)
		if e.Role == TestamentResponse {
			c.cycles++
			c.advance(TestamentGenerated)
		}
	case TypeTestamentFailed:
		end(&Terminal{State: TestamentGenerationFailed, Reason: e.Reason})
	case TypeTestamentPost:
		c.testaments[e.Testament].posted = m.Seq
	case TypeTestamentReceive:
		c.testaments[e.Testament].recvd = m.Seq
		if c.delivery == 0 {
			c.delivery, c.deliveryTestament = m.Seq, e.Testament
		}
		c.advance(TestamentAcknowledged)
		if t := c.settleSlots(allSlots(len(c.terms.Slots))); t != nil {
			end(t)
		}
	case TypeCheckBegin:
		key := attemptKey{e.Check, e.Artifact, e.Digest}
		a := c.attempts[key]
		if a == nil {
			if c.attempts == nil {
				c.attempts = map[attemptKey]*attemptRec{}
			}
			a = &attemptRec{state: attemptPending}
			c.attempts[key] = a
			c.attOrder = append(c.attOrder, key)
		}
		a.state, a.runningAttempt = attemptRunning, e.Attempt
		if c.end == nil {
			c.advance(Validating)
		}
	case TypeCheckVerdict:
		sl, ch, _ := c.check(e.Check)
		a := c.attempts[attemptKey{e.Check, e.Artifact, e.Digest}]
		a.results = append(a.results, resultRec{Seq: m.Seq, TS: ts, Check: e.Check, Phase: Phase(e.Phase),
			Handler: e.Handler, Validator: e.Validator, Attempt: e.Attempt, Result: Result(e.Result),
			Evidence: e.Evidence, EvidenceDigest: e.EvidenceHash, Note: e.Note, Late: c.end != nil})
		a.state = attemptPending
		switch Result(e.Result) {
		case Pass:
			if a.phase+1 < len(ch.Phases) {
				a.phase, a.handler, a.used = a.phase+1, 0, 0
			} else {
				a.state, a.concluded = attemptPassed, m.Seq
			}
		case Fail:
			a.state, a.concluded = attemptFailed, m.Seq
		case Incomplete:
			a.state, a.concluded = attemptIncomplete, m.Seq
		case Error:
			a.used++
			if a.used >= ch.Attempts {
				if a.handler < len(ch.Fallbacks) {
					a.handler, a.used = a.handler+1, 0
				} else {
					a.state, a.concluded = attemptErrored, m.Seq
				}
			}
		}
		if c.end == nil && gates(sl, ch) && a.concludedState() {
			if t := c.settleSlots([]int{c.slotIndex(sl.Name)}); t != nil {
				end(t)
			}
		}
	case TypeCancel:
		end(&Terminal{State: Cancelled, Reason: e.Reason})
	case TypeRevoke:
		end(&Terminal{State: Revoked, Reason: e.Reason})
	case TypeSupersede:
		reason := e.Reason
		if reason == "" {
			reason = "superseded by " + e.Successor
		}
		end(&Terminal{State: Superseded, Reason: reason, Successor: e.Successor})
	case TypeDeadline:
		end(&Terminal{State: Expired, Reason: "deadline " + instant.Format(e.Deadline) + " passed"})
	case TypeDependency:
		end(&Terminal{State: DependencyFailed, On: e.On, Origin: e.Origin,
			Reason: "depends on " + e.On + ", which cannot be satisfied (origin " + e.Origin + ")"})
	case TypeDeadlock:
		end(&Terminal{State: Deadlocked, Members: e.Members,
			Reason: "victim of the wait-cycle " + joinIDs(e.Members)})
	}
	if c.end == nil && !c.localOK && c.delivery > 0 && c.uncovered == 0 {
		c.localOK = true
		eff.localOK = true
	}
	return eff
}

func joinIDs(ids []string) string {
	out := ""
	for i, id := range ids {
		if i > 0 {
			out += " → "
		}
		out += id
	}
	return out
}

// Apply folds one committed record into the state. It never fails: a record
// that is semantically invalid against the state (wrong evaluator, stale
// generation, unknown claim) is skipped and reported by Ignored; the log
// keeps it. Records of a terminal claim change nothing but its audit trail.
func (s *State) Apply(m Meta, e Event) {
	s.writing = true
	defer func() { s.writing = false }()
	if m.Seq > s.seq {
		s.seq = m.Seq
	}
	if r := s.validate(m, &e); r != nil {
		s.ignoredN++
		if len(s.ignored) < MaxIgnoredKept {
			s.ignored = append(s.ignored, Ignored{Seq: m.Seq, Type: e.Type, Claim: e.Claim, Actor: m.Actor, Code: string(r.Code), Reason: r.Error()})
		}
		return
	}
	if e.Type == TypeCreate {
		s.create(m, &e)
		return
	}
	c := s.claim(e.Claim)
	eff := c.apply(m, &e)
	if eff.ended {
		s.untrackDeadline(c)
	}
	switch {
	case eff.ended:
		s.settle(m, s.dependents[c.id])
	case eff.localOK:
		s.settle(m, []string{c.id})
	}
}

func (s *State) create(m Meta, e *Event) {
	terms := *e
	terms.raw = nil
	c := newClaimRec(m, &terms)
	s.claims[c.id] = c
	s.order = append(s.order, c)
	s.trackDeadline(c)
	seen := map[string]bool{}
	for _, list := range [][]string{terms.DependsOn, terms.Awaits} {
		for _, t := range list {
			if !seen[t] {
				seen[t] = true
				s.dependents[t] = append(s.dependents[t], c.id)
			}
		}
	}
	if p := s.claim(terms.Predecessor); p != nil {
		p.successors = append(p.successors, c.id)
	}
}

// depsOK reports whether every DependsOn target is Satisfied and every
// Awaits target is terminal. An unknown target holds the claim back.
func (s *State) depsOK(c *claimRec) bool {
	for _, id := range c.terms.DependsOn {
		d := s.claim(id)
		if d == nil || d.end == nil || d.end.State != Satisfied {
			return false
		}
	}
	for _, id := range c.terms.Awaits {
		d := s.claim(id)
		if d == nil || d.end == nil {
			return false
		}
	}
	return true
}

// settle grows the satisfied set from the given claims: a claim becomes
// Satisfied when it succeeded locally and its dependencies hold; its
// dependents are then examined in turn. Starting from false and only ever
// setting true when the premises already hold, this computes the least
// fixpoint over the affected part of the graph; a cycle never satisfies
// itself. Cost: proportional to the claims reached, not to the ledger.
func (s *State) settle(m Meta, start []string) {
	var buf [8]string // the usual work list fits: no allocation per verdict
	work := append(buf[:0], start...)
	for steps := 0; len(work) > 0; steps++ {
		id := work[0]
		work = work[1:]
		c := s.claim(id)
		if c == nil || c.end != nil || !c.localOK || !s.depsOK(c) {
			continue
		}
		c.end = &Terminal{State: Satisfied, Seq: m.Seq, TS: instant.Format(m.TS), Reason: satisfiedReason(c)}
		s.untrackDeadline(c)
		work = append(work, s.dependents[id]...)
	}
}

func satisfiedReason(c *claimRec) string {
	n := 0
	for _, sl := range c.terms.Slots {
		if sl.Mode == Required {
			n++
		}
	}
	if len(c.terms.DependsOn)+len(c.terms.Awaits) > 0 {
		return "every required slot has a witness, the testament was received, and every dependency holds"
	}
	if n == 0 {
		return "the claimant received the closing testament"
	}
	return "every required slot has a witness and the claimant received the closing testament"
}
