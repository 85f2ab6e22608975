package claim

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"time"

	"tally/digest"
	"tally/family"
	"tally/refuse"
)

// Decide validates cmd against the state and the acting identity at time now
// and returns the records to append, in order, as one atomic batch; or a
// *refuse.Refusal and nothing. It does not change the state: the caller
// appends the records and then Applies each of them. When a record ends a
// claim unsatisfied, the batch also carries the DependencyFailed facts of
// every claim that depends on it, transitively.
//
// A State is not safe for concurrent use: Decide and Apply must be serialized
// by the caller (the ledger's session lock).
func (s *State) Decide(actor string, now time.Time, cmd Command) ([]Event, error) {
	s.writing = true
	defer func() { s.writing = false }()
	now = now.UTC()
	events, r := s.build(actor, now, cmd)
	if r != nil {
		return nil, r
	}
	for i := range events {
		events[i].TS = now
		if err := events[i].wellFormed(true); err != nil {
			var de *family.DecodeError
			if errors.As(err, &de) {
				return nil, refuse.Invalidf(de.Field, de.Msg)
			}
			return nil, refuse.Invalidf("", err.Error())
		}
	}
	m := Meta{Seq: s.seq + 1, Actor: actor, TS: now}
	target := events[0].Claim
	if events[0].Type == TypeCreate {
		if r := s.validate(m, &events[0]); r != nil {
			return nil, r
		}
		if slices.ContainsFunc(events[0].DependsOn, func(id string) bool { _, f := s.failedOrigin(id); return f }) {
			for _, id := range events[0].DependsOn {
				if origin, failed := s.failedOrigin(id); failed {
					events = append(events, Event{TS: now, Type: TypeDependency, Claim: target, On: id, Origin: origin})
					return append(events, s.propagate(now, target, origin, map[string]bool{target: true})...), nil
				}
			}
		}
		return events, nil
	}
	// Preview: validate each record against the claim as the earlier records
	// of the batch leave it, by folding them into a clone swapped in place.
	orig := s.claim(target)
	if orig == nil {
		return nil, refuse.NotFoundf("claim", "no claim "+quote(target))
	}
	if len(events) == 1 && len(s.dependents[target]) == 0 {
		// One record on a claim nobody depends on: validating it against the
		// claim as it is decides everything; a preview would only feed
		// propagate, which has no dependent to reach. No clone per verdict.
		if r := s.validate(m, &events[0]); r != nil {
			return nil, r
		}
		return events, nil
	}
	preview := orig.clone()
	s.preview = preview // s.claim(target) answers the clone until Decide returns
	defer func() { s.preview = nil }()
	for i := range events {
		m.Seq = s.seq + 1 + uint64(i)
		if r := s.validate(m, &events[i]); r != nil {
			return nil, r
		}
		preview.apply(m, &events[i])
	}
	if orig.end == nil && preview.end != nil && preview.end.State != Satisfied {
		origin := target
		if preview.end.State == DependencyFailed {
			origin = preview.end.Origin
		}
		s.preview = nil
		events = append(events, s.propagate(now, target, origin, map[string]bool{target: true})...)
	}
	return events, nil
}

// propagate returns the DependencyFailed facts for every open claim that
// depends, directly or transitively, on failed, in breadth-first order so
// that each fact follows the failure it cites.
func (s *State) propagate(now time.Time, failed, origin string, done map[string]bool) []Event {
	var out []Event
	queue := []string{failed}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		for _, d := range s.dependents[f] {
			dc := s.claim(d)
			if done[d] || dc == nil || dc.end != nil || !slices.Contains(dc.terms.DependsOn, f) {
				continue
			}
			done[d] = true
			out = append(out, Event{TS: now, Type: TypeDependency, Claim: d, On: f, Origin: origin})
			queue = append(queue, d)
		}
	}
	return out
}

func quote(s string) string { return `"` + s + `"` }

// build turns a command into records, filling what the state determines.
func (s *State) build(actor string, now time.Time, cmd Command) ([]Event, *refuse.Refusal) {
	one := func(e Event) ([]Event, *refuse.Refusal) { return []Event{e}, nil }
	switch c := cmd.(type) {
	case Create:
		if c.Claimant != "" && c.Claimant != actor {
			return nil, refuse.Forbiddenf("claimant", "a claim's claimant is the identity that creates it, "+actor+", not "+c.Claimant)
		}
		max := c.MaxResponses
		if max == 0 {
			max = DefaultMaxResponses
		}
		slots, r := s.createSlots(actor, c)
		if r != nil {
			return nil, r
		}
		return one(Event{Type: TypeCreate, Claim: c.Claim, Claimant: actor, Respondent: c.Respondent,
			Work: c.Work, Scope: c.Scope, MaxResponses: max, Deadline: c.Deadline,
			DependsOn: c.DependsOn, Awaits: c.Awaits, Reviews: c.Reviews, DerivedFrom: c.DerivedFrom,
			Predecessor: c.Predecessor, Slots: slots, Pool: c.Pool, Priority: priority(c.Priority)})
	case Post:
		return one(Event{Type: TypePost, Claim: c.Claim})
	case ReportPostFailure:
		return one(Event{Type: TypePostFailed, Claim: c.Claim, Reason: c.Reason})
	case AcquireReceipt:
		return one(Event{Type: TypeReceipt, Claim: c.Claim, Holder: actor, Generation: 1})
	case DeclineReceipt:
		return one(Event{Type: TypeReceiptFailed, Claim: c.Claim, Reason: c.Reason})
	case Adopt:
		gen := uint64(1)
		if cr := s.claim(c.Claim); cr != nil {
			gen = cr.receipt.generation + 1
		}
		return one(Event{Type: TypeAdopt, Claim: c.Claim, Holder: c.Holder, Generation: gen, Reason: c.Reason})
	case Progress:
		if c.Generation == 0 {
			return nil, refuse.Invalidf("generation", "is required: the receipt generation the writer holds")
		}
		return one(Event{Type: TypeProgress, Claim: c.Claim, Generation: c.Generation, Note: c.Note})
	case PublishArtifact:
		c.Role, c.Kind = DefaultRole(c.Role, c.Slot, c.Generation), cmp.Or(c.Kind, "file")
		cr := s.claim(c.Claim)
		if cr == nil {
			return nil, refuse.NotFoundf("claim", "no claim "+quote(c.Claim))
		}
		var cycle uint64
		if c.Role != RoleResult {
			if c.Generation == 0 {
				return nil, refuse.Invalidf("generation", "is required: the receipt generation the writer holds")
			}
			cycle = cr.cycles + 1
		}
		if c.Content.IsZero() {
			return nil, refuse.Invalidf("content", "is required")
		}
		d := digest.ArtifactDigest(digest.Description{Kind: c.Kind, Schema: c.Schema, Producer: actor,
			Claim: c.Claim, Cycle: cycle, Role: string(c.Role), Slot: c.Slot, Size: c.Size, Content: c.Content})
		return one(Event{Type: TypeArtifact, Claim: c.Claim, Artifact: c.Artifact, Role: string(c.Role),
			Slot: c.Slot, Kind: c.Kind, Schema: c.Schema, Name: c.Name, Cycle: cycle, Generation: c.Generation,
			Content: c.Content.String(), Size: c.Size, Digest: d.String()})
	case ReceiveArtifact:
		digest, r := s.pinned("artifact", c.Claim, c.Artifact, c.Digest)
		if r != nil {
			return nil, r
		}
		return one(Event{Type: TypeArtifactReceive, Claim: c.Claim, Artifact: c.Artifact, Digest: digest})
	case CloseTestament:
		c.Outcome = cmp.Or(c.Outcome, Complete)
		cr := s.claim(c.Claim)
		if cr == nil {
			return nil, refuse.NotFoundf("claim", "no claim "+quote(c.Claim))
		}
		if c.Generation == 0 {
			return nil, refuse.Invalidf("generation", "is required: the receipt generation the writer holds")
		}
		bindings := make([]Binding, len(c.Bindings))
		for i, b := range c.Bindings {
			var r *refuse.Refusal
			if b.Digest, r = s.pinned("bindings.artifact", c.Claim, b.Artifact, b.Digest); r != nil {
				return nil, r
			}
			bindings[i] = b
		}
		diags, r := s.pinRefs("diagnostics", c.Claim, c.Diagnostics)
		if r != nil {
			return nil, r
		}
		return one(Event{Type: TypeTestament, Claim: c.Claim, Testament: c.Testament, Role: TestamentResponse,
			Generation: c.Generation, Cycle: cr.cycles + 1, Outcome: string(c.Outcome), Summary: c.Summary,
			Confidence: c.Confidence, Bindings: bindings, Diagnostics: diags})
	case ResultTestament:
		results, r := s.pinRefs("results", c.Claim, c.Results)
		if r != nil {
			return nil, r
		}
		return one(Event{Type: TypeTestament, Claim: c.Claim, Testament: c.Testament, Role: TestamentResult,
			Summary: c.Summary, Confidence: c.Confidence, Results: results})
	case FailTestament:
		if c.Generation == 0 {
			return nil, refuse.Invalidf("generation", "is required: the receipt generation the writer holds")
		}
		return one(Event{Type: TypeTestamentFailed, Claim: c.Claim, Generation: c.Generation, Reason: c.Reason})
	case PostTestament:
		return one(Event{Type: TypeTestamentPost, Claim: c.Claim, Testament: c.Testament})
	case ReceiveTestament:
		return one(Event{Type: TypeTestamentReceive, Claim: c.Claim, Testament: c.Testament})
	case BeginCheck:
		e, r := s.nextAttempt(c.Claim, c.Check, c.Artifact, c.Digest)
		if r != nil {
			return nil, r
		}
		return one(e)
	case ReportVerdict:
		if r := CheckResult(c.Result); r != nil {
			return nil, r // a malformed verdict before any lookup
		}
		digest, r := s.pinned("artifact", c.Claim, c.Artifact, c.Digest)
		if r != nil {
			return nil, r
		}
		cr := s.claim(c.Claim)
		var out []Event
		if c.Publish != nil {
			p := *c.Publish
			if p.Claim != "" && p.Claim != c.Claim {
				return nil, refuse.Invalidf("evidence_artifact.claim", "names "+quote(p.Claim)+" but the verdict is on "+quote(c.Claim))
			}
			if p.Role != RoleResult {
				return nil, refuse.Invalidf("evidence_artifact.role", "evidence is a result artifact")
			}
			if c.Evidence != "" && c.Evidence != p.Artifact {
				return nil, refuse.Invalidf("evidence", "names "+quote(c.Evidence)+" but the evidence published with it is "+quote(p.Artifact))
			}
			p.Claim = c.Claim
			pub, r := s.build(actor, now, p)
			if r != nil {
				return nil, r
			}
			out = append(out, pub...)
			c.Evidence, c.EvidenceDigest = p.Artifact, pub[0].Digest
		}
		evidence, r := s.pinned("evidence", c.Claim, c.Evidence, c.EvidenceDigest)
		if r != nil {
			return nil, r
		}
		v := Event{Type: TypeCheckVerdict, Claim: c.Claim, Check: c.Check, Artifact: c.Artifact, Digest: digest,
			Result: string(c.Result), Evidence: c.Evidence, EvidenceHash: evidence, Note: c.Note}
		if a := cr.attempts[attemptKey{c.Check, c.Artifact, digest}]; a != nil && a.state == attemptRunning {
			_, ch, _ := cr.check(c.Check)
			v.Phase, v.Handler, v.Validator, v.Attempt = string(ch.Phases[a.phase]), a.handler, ch.handler(a.handler), a.runningAttempt
		} else {
			b, r := s.nextAttempt(c.Claim, c.Check, c.Artifact, digest)
			if r != nil {
				return nil, r
			}
			out = append(out, b)
			v.Phase, v.Handler, v.Validator, v.Attempt = b.Phase, b.Handler, b.Validator, b.Attempt
		}
		return append(out, v), nil
	case Cancel:
		return one(Event{Type: TypeCancel, Claim: c.Claim, Reason: c.Reason})
	case Revoke:
		return one(Event{Type: TypeRevoke, Claim: c.Claim, Reason: c.Reason})
	case Supersede:
		return one(Event{Type: TypeSupersede, Claim: c.Claim, Successor: c.Successor, Reason: c.Reason})
	case CommitDeadline:
		cr := s.claim(c.Claim)
		if cr == nil {
			return nil, refuse.NotFoundf("claim", "no claim "+quote(c.Claim))
		}
		if cr.terms.Deadline.IsZero() {
			return nil, refuse.Conflictf("claim", "has no deadline")
		}
		if members := s.awaitCycle(c.Claim); members != nil && !now.Before(cr.terms.Deadline) {
			return one(Event{Type: TypeDeadlock, Claim: s.victim(members), Members: members})
		}
		return one(Event{Type: TypeDeadline, Claim: c.Claim, Deadline: cr.terms.Deadline})
	case CommitDependency:
		cr := s.claim(c.Claim)
		if cr == nil {
			return nil, refuse.NotFoundf("claim", "no claim "+quote(c.Claim))
		}
		for _, id := range cr.terms.DependsOn {
			if origin, failed := s.failedOrigin(id); failed {
				return one(Event{Type: TypeDependency, Claim: c.Claim, On: id, Origin: origin})
			}
		}
		return nil, refuse.Conflictf("depends_on", "no DependsOn target of "+c.Claim+" has ended unsatisfied")
	case nil:
		return nil, refuse.Invalidf("command", "is required")
	}
	return nil, refuse.Invalidf("command", "is not a claim command")
}

// pin returns digest, or the recorded digest of the artifact when empty.
func (s *State) pin(claim, art, digest string) string {
	if digest != "" {
		return digest
	}
	if c := s.claim(claim); c != nil {
		if a := c.artifacts[art]; a != nil {
			return a.digest
		}
	}
	return ""
}

// pinned is pin for a command naming art in field: an artifact with no
// digest given that the claim does not record is refused by name (there is
// nothing to pin), as validate would refuse it.
func (s *State) pinned(field, claim, art, digest string) (string, *refuse.Refusal) {
	if digest != "" {
		return digest, nil
	}
	if s.claim(claim) == nil {
		return "", refuse.NotFoundf("claim", "no claim "+quote(claim))
	}
	if art == "" {
		return "", refuse.Invalidf(field, "is required")
	}
	if d := s.pin(claim, art, ""); d != "" {
		return d, nil
	}
	return "", refuse.NotFoundf(field, "no artifact "+quote(art)+" in claim "+claim)
}

func (s *State) pinRefs(field, claim string, refs []Ref) ([]Ref, *refuse.Refusal) {
	out := make([]Ref, len(refs))
	for i, r := range refs {
		d, rf := s.pinned(field, claim, r.Artifact, r.Digest)
		if rf != nil {
			return nil, rf
		}
		out[i] = Ref{Artifact: r.Artifact, Digest: d}
	}
	return out, nil
}

// nextAttempt builds the begin record of the next attempt of a check.
func (s *State) nextAttempt(claim, check, art, digest string) (Event, *refuse.Refusal) {
	cr := s.claim(claim)
	if cr == nil {
		return Event{}, refuse.NotFoundf("claim", "no claim "+quote(claim))
	}
	_, ch, ok := cr.check(check)
	if !ok {
		return Event{}, refuse.NotFoundf("check", "claim "+claim+" declares no check "+quote(check))
	}
	digest, r := s.pinned("artifact", claim, art, digest)
	if r != nil {
		return Event{}, r
	}
	phase, handler, attempt := 0, 0, 1
	if a := cr.attempts[attemptKey{check, art, digest}]; a != nil {
		phase, handler, attempt = a.phase, a.handler, a.used+1
	}
	return Event{Type: TypeCheckBegin, Claim: claim, Check: check, Artifact: art, Digest: digest,
		Phase: string(ch.Phases[phase]), Handler: handler, Validator: ch.handler(handler), Attempt: attempt}, nil
}

// createSlots is the slots a Create records: its own with their defaults,
// or its predecessor's (see Create).
func (s *State) createSlots(claimant string, c Create) ([]SlotSpec, *refuse.Refusal) {
	switch {
	case c.NoChecks && len(c.Slots) > 0:
		return nil, refuse.Invalidf("no_checks", "says the claim declares no slots, but it declares "+strconv.Itoa(len(c.Slots)))
	case c.Inherits():
		p := s.claim(c.Predecessor)
		if p == nil {
			return nil, nil // validate refuses the unknown predecessor by name
		}
		if len(p.terms.Slots) == 0 {
			return nil, refuse.Invalidf("slots", "successor "+c.Claim+" declares none and its predecessor "+p.id+
				" has none to inherit: declare them, or pass no_checks (--no-checks) if the closing testament is the only requirement")
		}
		return cloneSlots(p.terms.Slots), nil
	}
	slots := cloneSlots(c.Slots)
	for i := range slots {
		sl := &slots[i]
		if sl.Mode == "" {
			sl.Mode = Required
		}
		for j := range sl.Checks {
			ch := &sl.Checks[j]
			if ch.Evaluator == "" {
				ch.Evaluator = claimant
			}
			if ch.Mode == "" {
				ch.Mode = Required
			}
			if len(ch.Phases) == 0 {
				ch.Phases = []Phase{Programmatic}
			}
			if ch.Attempts == 0 {
				ch.Attempts = 1
			}
			defaultVersion(&ch.Validator)
			for k := range ch.Fallbacks {
				defaultVersion(&ch.Fallbacks[k])
			}
		}
	}
	return slots, nil
}

// defaultVersion makes a validator named without a version version 1.
func defaultVersion(v *Validator) {
	if v.Version == "" && v.Name != "" {
		v.Version = "1"
	}
}

func cloneSlots(in []SlotSpec) []SlotSpec {
	out := make([]SlotSpec, len(in))
	for i, sl := range in {
		sl.Checks = slices.Clone(sl.Checks)
		for j := range sl.Checks {
			sl.Checks[j].Phases = slices.Clone(sl.Checks[j].Phases)
			sl.Checks[j].Fallbacks = slices.Clone(sl.Checks[j].Fallbacks)
		}
		out[i] = sl
	}
	return out
}

// priority is what a claim records of a priority: nothing for the default,
// so that a claim created without one reads as it did before priorities.
func priority(p *int) *int {
	if p == nil || *p == DefaultPriority {
		return nil
	}
	v := *p
	return &v
}
