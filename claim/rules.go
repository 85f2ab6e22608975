package claim

import (
	"fmt"
	"slices"
	"strconv"

	"tally/digest"
	"tally/instant"
	"tally/refuse"
)

// validate is the one place for every rule that depends on the state and the
// acting identity. Decide refuses what it rejects; Apply skips it.
func (s *State) validate(m Meta, e *Event) *refuse.Refusal {
	if !Known(e.Type) {
		return refuse.Invalidf("type", "is not a claim record type")
	}
	if e.Type == TypeCreate {
		return s.validateCreate(m, e)
	}
	c := s.claim(e.Claim)
	if c == nil {
		return refuse.NotFoundf("claim", "no claim "+strconv.Quote(e.Claim))
	}
	if c.end != nil && !s.auditAllowed(m, c, e) {
		return refuse.Conflictf("claim", "claim "+c.id+" is "+string(c.end.State)+": terminal states absorb")
	}
	claimant := func() *refuse.Refusal {
		if m.Actor != c.terms.Claimant {
			return refuse.Forbiddenf("actor", "only the claimant "+c.terms.Claimant+" may "+verb(e.Type))
		}
		return nil
	}
	timekeeper := func() *refuse.Refusal {
		if m.Actor != s.cfg.Timekeeper {
			return refuse.Forbiddenf("actor", "only the timekeeper commits "+e.Type+" facts")
		}
		return nil
	}
	switch e.Type {
	case TypePost, TypePostFailed:
		if r := claimant(); r != nil {
			return r
		}
		if c.stage != Generated {
			return refuse.Conflictf("claim", "already posted")
		}
	case TypeReceipt, TypeReceiptFailed:
		if c.pooled() {
			return c.validatePoolReceipt(m, e)
		}
		if m.Actor != c.terms.Respondent {
			return refuse.Forbiddenf("actor", "only the respondent "+c.terms.Respondent+" acquires the receipt")
		}
		switch {
		case c.stage == Generated:
			return refuse.Conflictf("claim", "not posted yet")
		case c.stage != Posted:
			return refuse.Conflictf("claim", "receipt already acquired (generation "+u(c.receipt.generation)+")")
		}
		if e.Type == TypeReceipt && (e.Holder != m.Actor || e.Generation != 1) {
			return refuse.Invalidf("holder", "the first receipt is held by the respondent at generation 1")
		}
	case TypeAdopt:
		if r := claimant(); r != nil {
			return r
		}
		if c.receipt.generation == 0 {
			return refuse.Conflictf("claim", "no receipt to adopt")
		}
		if e.Generation != c.receipt.generation+1 {
			return refuse.Conflictf("generation", "must be "+u(c.receipt.generation+1))
		}
	case TypeProgress, TypeTestamentFailed:
		return s.holder(m, c, e.Generation)
	case TypeArtifact:
		return s.validateArtifact(m, c, e)
	case TypeArtifactReceive:
		if r := claimant(); r != nil {
			return r
		}
		a := c.artifacts[e.Artifact]
		if a == nil {
			return refuse.NotFoundf("artifact", "no artifact "+strconv.Quote(e.Artifact)+" in claim "+c.id)
		}
		if a.digest != e.Digest {
			return refuse.Conflictf("digest", "does not match artifact "+a.id)
		}
		if a.role == string(RoleResult) {
			return refuse.Conflictf("artifact", "a result artifact ends at Generated")
		}
		if a.received != 0 {
			return refuse.Conflictf("artifact", "already received")
		}
	case TypeTestament:
		return s.validateTestament(m, c, e)
	case TypeTestamentPost:
		t := c.testaments[e.Testament]
		if t == nil {
			return refuse.NotFoundf("testament", "no testament "+strconv.Quote(e.Testament)+" in claim "+c.id)
		}
		if t.posted != 0 {
			return refuse.Conflictf("testament", "already posted")
		}
		if t.role == TestamentResult {
			return claimant()
		}
		if r := s.holder(m, c, t.generation); r != nil {
			return r
		}
	case TypeTestamentReceive:
		if r := claimant(); r != nil {
			return r
		}
		t := c.testaments[e.Testament]
		switch {
		case t == nil:
			return refuse.NotFoundf("testament", "no testament "+strconv.Quote(e.Testament)+" in claim "+c.id)
		case t.role == TestamentResult:
			return refuse.Conflictf("testament", "a result testament ends at Posted")
		case t.posted == 0:
			return refuse.Conflictf("testament", "not posted yet")
		case t.recvd != 0:
			return refuse.Conflictf("testament", "already received")
		}
	case TypeCheckBegin, TypeCheckVerdict:
		return s.validateCheck(m, c, e)
	case TypeCancel, TypeSupersede:
		if r := claimant(); r != nil {
			return r
		}
		if e.Type == TypeSupersede {
			succ := s.claim(e.Successor)
			if succ == nil {
				return refuse.NotFoundf("successor", "no claim "+strconv.Quote(e.Successor))
			}
			if succ.terms.Predecessor != c.id {
				return refuse.Conflictf("successor", "claim "+succ.id+" does not name "+c.id+" as its predecessor")
			}
		}
	case TypeRevoke:
		if r := claimant(); r != nil {
			return r
		}
		if c.receipt.generation == 0 {
			return refuse.Conflictf("claim", "no receipt to revoke; cancel instead")
		}
	case TypeDeadline:
		if r := timekeeper(); r != nil {
			return r
		}
		if c.terms.Deadline.IsZero() {
			return refuse.Conflictf("claim", "has no deadline")
		}
		if !e.Deadline.Equal(c.terms.Deadline) {
			return refuse.Conflictf("deadline", "must be the claim's deadline "+instant.Format(c.terms.Deadline))
		}
		if m.TS.Before(c.terms.Deadline) {
			return refuse.Conflictf("deadline", "has not passed")
		}
	case TypeDependency:
		if !slices.Contains(c.terms.DependsOn, e.On) {
			return refuse.Conflictf("on", "claim "+c.id+" does not depend on "+strconv.Quote(e.On))
		}
		origin, failed := s.failedOrigin(e.On)
		if !failed {
			return refuse.Conflictf("on", "claim "+e.On+" has not ended unsatisfied")
		}
		if e.Origin != origin {
			return refuse.Conflictf("origin", "must be "+origin)
		}
	case TypeDeadlock:
		if r := timekeeper(); r != nil {
			return r
		}
		members := s.awaitCycle(c.id)
		if members == nil || !slices.Equal(members, e.Members) {
			return refuse.Conflictf("members", "must be the wait-cycle through "+c.id)
		}
		if v := s.victim(members); v != c.id {
			return refuse.Conflictf("claim", "the canonical victim of this wait-cycle is "+v)
		}
		due := false
		for _, id := range members {
			if d := s.claim(id).terms.Deadline; !d.IsZero() && !m.TS.Before(d) {
				due = true
			}
		}
		if !due {
			return refuse.Conflictf("members", "no deadline in the wait-cycle has passed")
		}
	}
	return nil
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }

func verb(typ string) string {
	switch typ {
	case TypePost, TypePostFailed:
		return "post the claim"
	case TypeAdopt:
		return "adopt the receipt"
	case TypeArtifactReceive:
		return "receive artifacts"
	case TypeTestamentReceive:
		return "receive testaments"
	case TypeCancel:
		return "cancel the claim"
	case TypeRevoke:
		return "revoke the claim"
	case TypeSupersede:
		return "supersede the claim"
	case TypeTestamentPost:
		return "post a result testament"
	}
	return "write " + typ
}

// holder checks a write that needs the current execution receipt: the
// generation must be current (an adopted receipt fences its old holder) and
// the actor must hold it.
func (s *State) holder(m Meta, c *claimRec, generation uint64) *refuse.Refusal {
	if c.receipt.generation == 0 {
		return refuse.Conflictf("claim", "no execution receipt acquired")
	}
	if generation != c.receipt.generation {
		return refuse.Conflictf("generation", "stale receipt generation "+u(generation)+"; current is "+u(c.receipt.generation))
	}
	if m.Actor != c.receipt.holder {
		return refuse.Forbiddenf("actor", "only the receipt holder "+c.receipt.holder+" may publish work")
	}
	return nil
}

// auditAllowed lists what a terminal claim still records, for the audit:
// the claimant's result testament, evaluators' result artifacts, Observe
// checks, and the verdict of a check already running, unless an authorized
// stop (cancel, revoke, supersede) fenced the evaluators.
func (s *State) auditAllowed(m Meta, c *claimRec, e *Event) bool {
	switch e.Type {
	case TypeTestament:
		return e.Role == TestamentResult
	case TypeTestamentPost:
		t := c.testaments[e.Testament]
		return t != nil && t.role == TestamentResult
	case TypeArtifact:
		return e.Role == string(RoleResult) && !c.end.State.fenced()
	case TypeCheckBegin:
		sl, ch, ok := c.check(e.Check)
		return ok && !gates(sl, ch) && !c.end.State.fenced()
	case TypeCheckVerdict:
		a := c.attempts[attemptKey{e.Check, e.Artifact, e.Digest}]
		return a != nil && a.state == attemptRunning && !c.end.State.fenced()
	}
	return false
}

func (s *State) validateCreate(m Meta, e *Event) *refuse.Refusal {
	if s.claim(e.Claim) != nil {
		return refuse.Conflictf("claim", "claim "+strconv.Quote(e.Claim)+" already exists")
	}
	if m.Actor != e.Claimant {
		return refuse.Forbiddenf("claimant", "must be the acting identity")
	}
	if !e.Deadline.IsZero() {
		if p := instant.Problem(e.Deadline); p != "" {
			return refuse.Invalidf("deadline", p+", got "+instant.Format(e.Deadline))
		}
	}
	if e.Predecessor != "" {
		p := s.claim(e.Predecessor)
		if p == nil {
			return refuse.NotFoundf("predecessor", "no claim "+strconv.Quote(e.Predecessor))
		}
		if p.terms.Claimant != m.Actor {
			return refuse.Forbiddenf("predecessor", "only its claimant "+p.terms.Claimant+" may issue a successor")
		}
	}
	return nil
}

func (s *State) validateArtifact(m Meta, c *claimRec, e *Event) *refuse.Refusal {
	if _, dup := c.artifacts[e.Artifact]; dup {
		return refuse.Conflictf("artifact", "artifact "+strconv.Quote(e.Artifact)+" already exists in claim "+c.id)
	}
	content, _ := digest.ParseContentDigest(e.Content)
	want := digest.ArtifactDigest(digest.Description{Kind: e.Kind, Schema: e.Schema, Producer: m.Actor,
		Claim: c.id, Cycle: e.Cycle, Role: e.Role, Slot: e.Slot, Size: e.Size, Content: content})
	if want.String() != e.Digest {
		return refuse.Invalidf("digest", "does not match the artifact's description and content (want "+want.String()+")")
	}
	if e.Role == string(RoleResult) {
		if m.Actor != c.terms.Claimant && !c.isEvaluator(m.Actor) {
			return refuse.Forbiddenf("actor", "only the claimant or a designated evaluator publishes result artifacts")
		}
		return nil
	}
	if r := s.holder(m, c, e.Generation); r != nil {
		return r
	}
	if r := c.openCycle(e.Cycle); r != nil {
		return r
	}
	if e.Role == string(RoleOutput) {
		if c.slotIndex(e.Slot) < 0 {
			return refuse.NotFoundf("slot", "claim "+c.id+" declares no slot "+strconv.Quote(e.Slot))
		}
	}
	return nil
}

// openCycle checks that cycle is the claim's open work cycle.
func (c *claimRec) openCycle(cycle uint64) *refuse.Refusal {
	if c.cycles >= uint64(c.terms.MaxResponses) {
		return refuse.Conflictf("cycle", "all "+strconv.Itoa(c.terms.MaxResponses)+" work cycles are closed")
	}
	if cycle != c.cycles+1 {
		return refuse.Conflictf("cycle", "the open work cycle is "+u(c.cycles+1))
	}
	return nil
}

func (s *State) validateTestament(m Meta, c *claimRec, e *Event) *refuse.Refusal {
	if _, dup := c.testaments[e.Testament]; dup {
		return refuse.Conflictf("testament", "testament "+strconv.Quote(e.Testament)+" already exists in claim "+c.id)
	}
	if e.Role == TestamentResult {
		if m.Actor != c.terms.Claimant {
			return refuse.Forbiddenf("actor", "only the claimant authors a result testament")
		}
		for _, r := range e.Results {
			a := c.artifacts[r.Artifact]
			if a == nil || a.role != string(RoleResult) || a.digest != r.Digest {
				return refuse.Conflictf("results", "must name result artifacts of claim "+c.id+" by id and digest")
			}
		}
		return nil
	}
	if r := s.holder(m, c, e.Generation); r != nil {
		return r
	}
	if r := c.openCycle(e.Cycle); r != nil {
		return r
	}
	for _, b := range e.Bindings {
		if c.slotIndex(b.Slot) < 0 {
			return refuse.NotFoundf("bindings.slot", "claim "+c.id+" declares no slot "+strconv.Quote(b.Slot))
		}
		a := c.artifacts[b.Artifact]
		switch {
		case a == nil:
			return refuse.NotFoundf("bindings.artifact", "no artifact "+strconv.Quote(b.Artifact)+" in claim "+c.id)
		case a.role != string(RoleOutput) || a.slot != b.Slot:
			return refuse.Conflictf("bindings.artifact", "artifact "+a.id+" is not an output for slot "+b.Slot)
		case a.digest != b.Digest:
			return refuse.Conflictf("bindings.digest", "does not match artifact "+a.id)
		}
	}
	for _, d := range e.Diagnostics {
		a := c.artifacts[d.Artifact]
		switch {
		case a == nil:
			return refuse.NotFoundf("diagnostics", "no artifact "+strconv.Quote(d.Artifact)+" in claim "+c.id)
		case a.role != string(RoleDiagnostic):
			return refuse.Conflictf("diagnostics", "artifact "+a.id+" is not a diagnostic")
		case a.digest != d.Digest:
			return refuse.Conflictf("diagnostics", "digest does not match artifact "+a.id)
		}
	}
	return nil
}

// validateCheck holds the evaluator rules: only the designated evaluator;
// only a target bound to the check's slot in a received response, pinned by
// id and digest; phases in order; attempts and fallbacks as declared.
func (s *State) validateCheck(m Meta, c *claimRec, e *Event) *refuse.Refusal {
	sl, ch, ok := c.check(e.Check)
	if !ok {
		return refuse.NotFoundf("check", "claim "+c.id+" declares no check "+strconv.Quote(e.Check))
	}
	if m.Actor != ch.Evaluator {
		return refuse.Forbiddenf("actor", "only the designated evaluator "+ch.Evaluator+" may run check "+ch.ID)
	}
	a := c.attempts[attemptKey{e.Check, e.Artifact, e.Digest}]
	if e.Type == TypeCheckBegin {
		if !c.boundInReceived(sl.Name, e.Artifact, e.Digest) {
			return refuse.Conflictf("artifact", "artifact "+e.Artifact+" with that digest is not bound to slot "+sl.Name+" in a received testament")
		}
		if a != nil && a.concludedState() {
			return refuse.Conflictf("check", "check "+ch.ID+" already concluded "+a.state+" on "+e.Artifact)
		}
		if a != nil && a.state == attemptRunning {
			return refuse.Conflictf("check", "attempt "+strconv.Itoa(a.runningAttempt)+" is already running")
		}
		phase, handler, used := 0, 0, 0
		if a != nil {
			phase, handler, used = a.phase, a.handler, a.used
		}
		return expectAttempt(ch, e, phase, handler, used+1)
	}
	if a == nil || a.state != attemptRunning {
		return refuse.Conflictf("check", "check "+ch.ID+" has not begun on "+e.Artifact)
	}
	if r := expectAttempt(ch, e, a.phase, a.handler, a.runningAttempt); r != nil {
		return r
	}
	ev := c.artifacts[e.Evidence]
	switch {
	case ev == nil:
		return refuse.NotFoundf("evidence", "no artifact "+strconv.Quote(e.Evidence)+" in claim "+c.id)
	case ev.role != string(RoleResult):
		return refuse.Conflictf("evidence", "artifact "+ev.id+" is not a result artifact")
	case ev.producer != m.Actor:
		return refuse.Forbiddenf("evidence", "must be the evaluator's own result artifact")
	case ev.digest != e.EvidenceHash:
		return refuse.Conflictf("evidence_digest", "does not match artifact "+ev.id)
	}
	return nil
}

func expectAttempt(ch *CheckSpec, e *Event, phase, handler, attempt int) *refuse.Refusal {
	if want := ch.Phases[phase]; Phase(e.Phase) != want {
		return refuse.Conflictf("phase", fmt.Sprintf("check %s is in its %s phase", ch.ID, want))
	}
	if e.Handler != handler {
		return refuse.Conflictf("handler", fmt.Sprintf("check %s runs handler %d", ch.ID, handler))
	}
	if v := ch.handler(handler); e.Validator != v {
		return refuse.Conflictf("validator", fmt.Sprintf("handler %d of check %s is %s@%s", handler, ch.ID, v.Name, v.Version))
	}
	if e.Attempt != attempt {
		return refuse.Conflictf("attempt", fmt.Sprintf("must be %d", attempt))
	}
	return nil
}

// failedOrigin reports whether claim id ended unsatisfied, and the origin of
// that failure (the claim itself, or the origin it inherited).
func (s *State) failedOrigin(id string) (string, bool) {
	c := s.claim(id)
	if c == nil || c.end == nil || c.end.State == Satisfied {
		return "", false
	}
	if c.end.State == DependencyFailed {
		return c.end.Origin, true
	}
	return id, true
}

// awaitCycle returns the sorted members of the wait-cycle through id: the
// strongly connected component of id over Awaits edges between open claims,
// or nil when id waits on no cycle through itself.
func (s *State) awaitCycle(id string) []string {
	open := func(x string) bool { c := s.claim(x); return c != nil && c.end == nil }
	if !open(id) {
		return nil
	}
	fwd := map[string]bool{}
	stack := []string{id}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, y := range s.claim(x).terms.Awaits {
			if open(y) && !fwd[y] {
				fwd[y] = true
				stack = append(stack, y)
			}
		}
	}
	if !fwd[id] {
		return nil
	}
	back := map[string]bool{id: true}
	stack = []string{id}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, y := range s.dependents[x] {
			if open(y) && !back[y] && slices.Contains(s.claim(y).terms.Awaits, x) {
				back[y] = true
				stack = append(stack, y)
			}
		}
	}
	var out []string
	for x := range fwd {
		if back[x] {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}

// victim is the canonical victim of a wait-cycle: the member created first.
func (s *State) victim(members []string) string {
	best := ""
	for _, id := range members {
		if best == "" || s.claim(id).seq < s.claim(best).seq {
			best = id
		}
	}
	return best
}
