package claim

import (
	"tally/instant"
)

// The fold: what one record does to its claim (apply) and to the State
// (Apply, the dependency graph's settling).

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
