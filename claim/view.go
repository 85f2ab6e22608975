package claim

import (
	"slices"
	"sort"
	"time"

	"tally/instant"
)

// View is one claim as `tally claim show --json` prints it. Every list is in
// a fixed order (declaration, then log order), so a view is a pure function
// of the records folded: the same log gives byte-identical JSON.
type View struct {
	Claim        string          `json:"claim"`
	State        Status          `json:"state"`
	Terminal     *Terminal       `json:"terminal,omitempty"` // how and why it ended
	Why          []Reason        `json:"why"`                // why it is not Satisfied (yet); empty when it is
	Claimant     string          `json:"claimant"`
	Respondent   string          `json:"respondent"`         // a pool claim's: the seat whose receipt came first ("" until then)
	Pool         []string        `json:"pool,omitempty"`     // the seats a pool claim was posted to
	Pooled       bool            `json:"pooled,omitempty"`   // posted to a pool: no respondent named at create
	Priority     *int            `json:"priority,omitempty"` // as recorded (absent: DefaultPriority)
	Work         string          `json:"work"`
	Scope        string          `json:"scope,omitempty"`
	MaxResponses int             `json:"max_responses"`
	Deadline     string          `json:"deadline,omitempty"`
	Overdue      bool            `json:"overdue"` // open, has a deadline, now past it, no fact committed yet
	Predecessor  string          `json:"predecessor,omitempty"`
	Successors   []string        `json:"successors"`
	CreatedSeq   uint64          `json:"created_seq"`
	Created      string          `json:"created"`
	Receipt      *ReceiptView    `json:"receipt"`
	Adoptions    []adoptionRec   `json:"adoptions"`
	Cycles       uint64          `json:"cycles"` // response testaments closed
	LocalSuccess bool            `json:"local_success"`
	Delivery     DeliveryView    `json:"delivery"`
	Slots        []SlotView      `json:"slots"`
	Testaments   []TestamentView `json:"testaments"`
	Artifacts    []ArtifactView  `json:"artifacts"`
	Relations    []EdgeView      `json:"relations"`
	// ScopeReleased: the claim is terminal, its waits are settled and every
	// child released its scope (see ScopeView); ScopeRelease says why or why not.
	ScopeReleased bool          `json:"scope_released"`
	ScopeRelease  ScopeView     `json:"scope_release"`
	Progress      []progressRec `json:"progress"`
	Late          []lateRec     `json:"late"` // records kept for audit after the claim ended
}

// ReceiptView is the current execution receipt.
type ReceiptView struct {
	Holder     string `json:"holder"`
	Generation uint64 `json:"generation"`
	Seq        uint64 `json:"seq"`
}

// DeliveryView is the implicit Required check: the claimant received a
// closing testament.
type DeliveryView struct {
	Check     string `json:"check"`
	Mode      Mode   `json:"mode"`
	State     string `json:"state"` // pending | passed
	Testament string `json:"testament,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`
}

// SlotView is one declared slot: its witness if any, and every check.
type SlotView struct {
	Name    string       `json:"name"`
	Mode    Mode         `json:"mode"`
	Status  string       `json:"status"` // covered | evaluating | blocked | waiting
	Witness *WitnessView `json:"witness"`
	Causes  []CauseView  `json:"causes"`
	Checks  []CheckView  `json:"checks"`
}

// WitnessView is the one artifact on which every gating check of the slot
// passed, with the results that made it.
type WitnessView struct {
	Artifact  string      `json:"artifact"`
	Digest    string      `json:"digest"`
	Testament string      `json:"testament"`
	Results   []resultRec `json:"results"`
}

// CauseView is a committed reason a target cannot cover a slot.
type CauseView struct {
	State     Status `json:"state"`
	Seq       uint64 `json:"seq"`
	Check     string `json:"check,omitempty"`
	Artifact  string `json:"artifact,omitempty"`
	Digest    string `json:"digest,omitempty"`
	Testament string `json:"testament,omitempty"`
}

// CheckView is one declared check and its evaluation of each target.
type CheckView struct {
	ID        string        `json:"id"`
	Mode      Mode          `json:"mode"`
	Gating    bool          `json:"gating"` // Required in a Required slot
	Evaluator string        `json:"evaluator"`
	Validator Validator     `json:"validator"`
	Phases    []Phase       `json:"phases"`
	Attempts  int           `json:"attempts"`
	Fallbacks []Validator   `json:"fallbacks"`
	Targets   []AttemptView `json:"targets"`
}

// AttemptView is one check's evaluation of one pinned target.
type AttemptView struct {
	Artifact     string      `json:"artifact"`
	Digest       string      `json:"digest"`
	State        string      `json:"state"` // pending | running | passed | failed | incomplete | errored
	Phase        Phase       `json:"phase"`
	Handler      int         `json:"handler"`
	Validator    Validator   `json:"validator"`
	AttemptsUsed int         `json:"attempts_used"` // on the current handler
	Results      []resultRec `json:"results"`
}

// TestamentView is one testament and its lifecycle.
type TestamentView struct {
	Testament   string    `json:"testament"`
	Role        string    `json:"role"`
	State       string    `json:"state"` // Generated | Posted | Received
	Author      string    `json:"author"`
	Generation  uint64    `json:"generation,omitempty"`
	Cycle       uint64    `json:"cycle,omitempty"`
	Outcome     string    `json:"outcome,omitempty"`
	Summary     string    `json:"summary"`
	Confidence  *float64  `json:"confidence,omitempty"`
	Bindings    []Binding `json:"bindings"`
	Diagnostics []Ref     `json:"diagnostics"`
	Results     []Ref     `json:"results"`
	Seq         uint64    `json:"seq"`
	PostedSeq   uint64    `json:"posted_seq,omitempty"`
	ReceivedSeq uint64    `json:"received_seq,omitempty"`
}

// ArtifactView is one artifact's identity and state.
type ArtifactView struct {
	Artifact    string `json:"artifact"`
	Role        string `json:"role"`
	State       string `json:"state"` // Generated | Received
	Slot        string `json:"slot,omitempty"`
	Kind        string `json:"kind"`
	Schema      string `json:"schema,omitempty"`
	Name        string `json:"name,omitempty"`
	Producer    string `json:"producer"`
	Cycle       uint64 `json:"cycle,omitempty"`
	Generation  uint64 `json:"generation,omitempty"`
	Content     string `json:"content"`
	Size        int64  `json:"size"`
	Digest      string `json:"digest"`
	Seq         uint64 `json:"seq"`
	ReceivedSeq uint64 `json:"received_seq,omitempty"`
}

// EdgeView is one relation and its target's state.
type EdgeView struct {
	Relation string `json:"relation"` // depends_on | awaits | reviews | derived_from | predecessor
	Claim    string `json:"claim"`
	State    Status `json:"state"`    // "" when the ledger holds no such claim
	Blocking bool   `json:"blocking"` // depends_on and awaits gate satisfaction
	Holds    bool   `json:"holds"`    // depends_on: Satisfied; awaits: terminal; others: true
}

// Claim returns the view of one claim at time now (now only decides Overdue).
func (s *State) Claim(id string, now time.Time) (View, bool) {
	c := s.claim(id)
	if c == nil {
		return View{}, false
	}
	return s.view(c, now), true
}

func (s *State) view(c *claimRec, now time.Time) View {
	t := c.terms
	v := View{
		Claim: c.id, State: c.status(), Terminal: c.end, Claimant: t.Claimant, Respondent: c.respondent(),
		Work: t.Work, Scope: t.Scope, MaxResponses: t.MaxResponses, Predecessor: t.Predecessor,
		Successors: append([]string{}, c.successors...), CreatedSeq: c.seq, Created: instant.Format(c.created),
		Adoptions: append([]adoptionRec{}, c.adoptions...), Cycles: c.cycles, LocalSuccess: c.localOK,
		Progress: append([]progressRec{}, c.progress...), Late: append([]lateRec{}, c.late...),
		Slots: []SlotView{}, Testaments: []TestamentView{}, Artifacts: []ArtifactView{}, Relations: []EdgeView{},
	}
	if c.pooled() {
		v.Pooled, v.Pool = true, slices.Clone(t.Pool)
	}
	if t.Priority != nil {
		p := *t.Priority
		v.Priority = &p
	}
	if !t.Deadline.IsZero() {
		v.Deadline = instant.Format(t.Deadline)
		v.Overdue = c.end == nil && !now.IsZero() && now.After(t.Deadline)
	}
	if c.receipt.generation > 0 {
		v.Receipt = &ReceiptView{Holder: c.receipt.holder, Generation: c.receipt.generation, Seq: c.receipt.seq}
	}
	v.Delivery = DeliveryView{Check: DeliveryCheck, Mode: Required, State: "pending"}
	if c.delivery > 0 {
		v.Delivery.State, v.Delivery.Testament, v.Delivery.Seq = "passed", c.deliveryTestament, c.delivery
	}
	for i := range t.Slots {
		v.Slots = append(v.Slots, c.slotView(i))
	}
	for _, id := range c.tOrder {
		tr := c.testaments[id]
		state := "Generated"
		if tr.posted > 0 {
			state = "Posted"
		}
		if tr.recvd > 0 {
			state = "Received"
		}
		v.Testaments = append(v.Testaments, TestamentView{Testament: tr.id, Role: tr.role, State: state,
			Author: tr.author, Generation: tr.generation, Cycle: tr.cycle, Outcome: tr.outcome, Summary: tr.summary,
			Confidence: tr.confidence, Bindings: orEmpty(tr.bindings), Diagnostics: orEmpty(tr.diagnostics),
			Results: orEmpty(tr.results), Seq: tr.seq, PostedSeq: tr.posted, ReceivedSeq: tr.recvd})
	}
	for _, id := range c.artOrder {
		v.Artifacts = append(v.Artifacts, c.artifacts[id].view())
	}
	v.Relations = s.relations(c)
	v.Why = s.why(c)
	v.ScopeRelease = s.scope(c, map[*claimRec]bool{})
	v.ScopeReleased = v.ScopeRelease.Released
	return v
}

func (a *artifactRec) view() ArtifactView {
	state := "Generated"
	if a.received > 0 {
		state = "Received"
	}
	return ArtifactView{Artifact: a.id, Role: a.role, State: state, Slot: a.slot,
		Kind: a.kind, Schema: a.schema, Name: a.name, Producer: a.producer, Cycle: a.cycle,
		Generation: a.generation, Content: a.content, Size: a.size, Digest: a.digest, Seq: a.seq, ReceivedSeq: a.received}
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// asOf is the sequence a view of the claim's acceptance is evaluated at: its
// end when terminal (later records are audit only), else everything (0).
func (c *claimRec) asOf() uint64 {
	if c.end != nil {
		return c.end.Seq
	}
	return 0
}

func (c *claimRec) slotView(i int) SlotView {
	sl := &c.terms.Slots[i]
	asOf := c.asOf()
	ev := c.evalSlotAt(i, asOf)
	sv := SlotView{Name: sl.Name, Mode: sl.Mode, Causes: []CauseView{}, Checks: []CheckView{}}
	switch {
	case ev.witness != nil:
		sv.Status = "covered"
	case len(ev.causes) > 0:
		sv.Status = "blocked"
	case ev.candidates > 0:
		sv.Status = "evaluating"
	default:
		sv.Status = "waiting"
	}
	for _, k := range ev.causes {
		sv.Causes = append(sv.Causes, CauseView{State: k.state, Seq: k.seq, Check: k.check, Artifact: k.artifact, Digest: k.digest, Testament: k.testament})
	}
	if w := ev.witness; w != nil {
		wv := &WitnessView{Artifact: w.artifact, Digest: w.digest, Testament: w.testament, Results: []resultRec{}}
		for _, ch := range sl.Checks {
			if ch.Mode != Required {
				continue
			}
			if a := c.attempts[attemptKey{ch.ID, w.artifact, w.digest}]; a != nil {
				for _, r := range a.results {
					if r.Result == Pass && (asOf == 0 || r.Seq <= asOf) {
						wv.Results = append(wv.Results, r)
					}
				}
			}
		}
		sv.Witness = wv
	}
	for j := range sl.Checks {
		ch := &sl.Checks[j]
		cv := CheckView{ID: ch.ID, Mode: ch.Mode, Gating: gates(sl, ch), Evaluator: ch.Evaluator, Validator: ch.Validator,
			Phases: ch.Phases, Attempts: ch.Attempts, Fallbacks: orEmpty(ch.Fallbacks), Targets: []AttemptView{}}
		for _, key := range c.attOrder {
			if key.check != ch.ID {
				continue
			}
			a := c.attempts[key]
			cv.Targets = append(cv.Targets, AttemptView{Artifact: key.artifact, Digest: key.digest, State: a.state,
				Phase: ch.Phases[a.phase], Handler: a.handler, Validator: ch.handler(a.handler), AttemptsUsed: a.used,
				Results: orEmpty(a.results)})
		}
		sv.Checks = append(sv.Checks, cv)
	}
	return sv
}

// Filter selects claims for List. Zero fields select everything.
type Filter struct {
	States      []Status // any of these states
	Open        bool     // only claims not yet terminal
	Claimant    string
	Respondent  string
	Participant string // claimant, respondent, receipt holder or an evaluator
	Overdue     bool   // only open claims whose deadline has passed at now
}

// Summary is one row of `tally claim ls --json`.
type Summary struct {
	Claim      string `json:"claim"`
	State      Status `json:"state"`
	Claimant   string `json:"claimant"`
	Respondent string `json:"respondent"`
	Holder     string `json:"holder,omitempty"`
	Work       string `json:"work"`
	Deadline   string `json:"deadline,omitempty"`
	Overdue    bool   `json:"overdue"`
	CreatedSeq uint64 `json:"created_seq"`
	Reason     string `json:"reason,omitempty"`
}

// List returns the claims matching f at time now, in creation order.
func (s *State) List(f Filter, now time.Time) []Summary {
	out := []Summary{}
	for _, c := range s.order {
		st := c.status()
		overdue := c.end == nil && !c.terms.Deadline.IsZero() && !now.IsZero() && now.After(c.terms.Deadline)
		switch {
		case len(f.States) > 0 && !containsStatus(f.States, st),
			f.Open && c.end != nil,
			f.Claimant != "" && c.terms.Claimant != f.Claimant,
			f.Respondent != "" && c.respondent() != f.Respondent,
			f.Participant != "" && !c.involves(f.Participant),
			f.Overdue && !overdue:
			continue
		}
		sm := Summary{Claim: c.id, State: st, Claimant: c.terms.Claimant, Respondent: c.respondent(),
			Holder: c.receipt.holder, Work: c.terms.Work, Overdue: overdue, CreatedSeq: c.seq}
		if !c.terms.Deadline.IsZero() {
			sm.Deadline = instant.Format(c.terms.Deadline)
		}
		if c.end != nil {
			sm.Reason = c.end.Reason
		}
		out = append(out, sm)
	}
	return out
}

func containsStatus(list []Status, s Status) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (c *claimRec) involves(id string) bool {
	return c.terms.Claimant == id || c.respondent() == id || c.receipt.holder == id || c.isEvaluator(id)
}

// Edge is one blocking relation in the graph view.
type Edge struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Relation string `json:"relation"`
	Holds    bool   `json:"holds"`
}

// relations lists a claim's relations with their targets' states.
func (s *State) relations(c *claimRec) []EdgeView {
	t := c.terms
	out := []EdgeView{}
	edge := func(rel string, ids []string, blocking bool) {
		for _, id := range ids {
			e := EdgeView{Relation: rel, Claim: id, Blocking: blocking, Holds: !blocking}
			if d := s.claim(id); d != nil {
				e.State = d.status()
				switch rel {
				case "depends_on":
					e.Holds = d.end != nil && d.end.State == Satisfied
				case "awaits":
					e.Holds = d.end != nil
				}
			}
			out = append(out, e)
		}
	}
	edge("depends_on", t.DependsOn, true)
	edge("awaits", t.Awaits, true)
	edge("reviews", t.Reviews, false)
	edge("derived_from", t.DerivedFrom, false)
	if t.Predecessor != "" {
		edge("predecessor", []string{t.Predecessor}, false)
	}
	return out
}

// Graph returns every relation of every claim (for `tally claim graph`),
// sorted by (from, relation, to).
func (s *State) Graph() []Edge {
	out := []Edge{}
	for _, c := range s.order {
		for _, e := range s.relations(c) {
			out = append(out, Edge{From: c.id, To: e.Claim, Relation: e.Relation, Holds: e.Holds})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.From != b.From {
			return a.From < b.From
		}
		if a.Relation != b.Relation {
			return a.Relation < b.Relation
		}
		return a.To < b.To
	})
	return out
}
