package expect

import (
	"fmt"
	"strings"
	"time"
)

// The fold: Apply and what each record type does to the State.

// Apply folds one record into the state. It never fails: a record that is
// malformed, names what the ledger does not hold, or contradicts it (a
// second raise of one id, a withdrawal of a closed expectation) changes
// nothing, so records written by other tools cannot corrupt the fold.
// Applying a recorded lapse a second time is a no-op. Records of other
// types are ignored.
//
// Policy that depends on the ledger's configuration (the lineage bound, the
// timekeeper's name) is enforced by Decide, not here, so that replay gives
// the same state after a configuration change.
func (s *State) Apply(m Meta, e Event) {
	if !Known(e.Type) || e.wellFormed() != nil {
		return
	}
	if !inRange(e.TS) {
		return
	}
	s.order++
	ts := e.TS
	if !m.TS.IsZero() && inRange(m.TS) {
		ts = m.TS
	}
	switch {
	case e.Raise != nil:
		s.applyRaise(m, ts, e.Raise)
	case e.Withdraw != nil:
		s.applyWithdraw(ts, e.Withdraw)
	case e.Fact != nil:
		s.applyFact(e.TS, e.Fact)
	case e.Lapse != nil:
		s.applyLapse(m, ts, e.Lapse)
	case e.TaskOutcome != nil:
		s.applyTaskOutcome(e.TaskOutcome)
	}
}

// raiseProblem says why a raise cannot be folded, given the ledger; "" when
// it can. Decide reports the same problems as refusals.
func (s *State) raiseProblem(r *Raise) (code, field, rule string) {
	switch {
	case !validID(r.ExpectationID):
		return "invalid", "expectationId", fmt.Sprintf("must be 1..%d characters without whitespace", IDMax)
	case !inRange(r.DueAt):
		return "invalid", "dueAt", timeProblem(r.DueAt)
	case !inRange(r.Horizon):
		return "invalid", "horizon", timeProblem(r.Horizon)
	case r.Grace < 0 || r.Grace > durationMax:
		return "invalid", "grace", "must be a duration between zero and a century"
	case !r.DueAt.IsZero() && !inRange(r.DueAt.Add(r.Grace)):
		// The lapse falls due at dueAt + grace: it must be kept exactly too.
		return "invalid", "grace", "dueAt + grace " + timeProblem(r.DueAt.Add(r.Grace))
	case !r.Horizon.IsZero() && r.Horizon.Before(r.DueAt):
		return "invalid", "horizon", "must not be before dueAt"
	case r.Producer != "" && (strings.TrimSpace(r.Producer) != r.Producer || len(r.Producer) > IDMax):
		return "invalid", "producer", fmt.Sprintf("must be a seat of 1..%d characters without surrounding whitespace", IDMax)
	}
	if _, ok := s.byID[r.ExpectationID]; ok {
		return "conflict", "expectationId", "already raised: an expectation is immutable once raised"
	}
	if a := r.Anchor; a != nil {
		switch {
		case a.Offset < 0 || a.Offset > durationMax:
			return "invalid", "anchor.offset", "must be a duration between zero and a century"
		case a.ExpectationID == r.ExpectationID:
			return "invalid", "anchor.expectationId", "must name another expectation"
		case s.byID[a.ExpectationID] == nil:
			return "not_found", "anchor.expectationId", "names no expectation in this ledger"
		}
	}
	for i, id := range r.After {
		switch {
		case !validID(id):
			return "invalid", "after", "must hold expectation ids"
		case id == r.ExpectationID:
			return "invalid", "after", "must name other expectations"
		}
		for _, earlier := range r.After[:i] {
			if earlier == id {
				return "invalid", "after", "names " + id + " twice"
			}
		}
		prev := s.byID[id]
		if prev == nil {
			return "not_found", "after", "names " + id + ", which is not in this ledger"
		}
		if s.subject(prev) != r.Subject {
			return "invalid", "after", "names " + id + ", a step on another subject"
		}
	}
	if r.Supersedes != "" {
		prev := s.byID[r.Supersedes]
		switch {
		case prev == nil:
			return "not_found", "supersedes", "names no expectation in this ledger"
		case prev.life != Open:
			return "conflict", "supersedes", "names a " + prev.life.String() + " expectation: only an open one can be extended"
		case s.subject(prev) != r.Subject:
			return "invalid", "subject", "must be the subject of the expectation it supersedes"
		}
		for a := prev; a != nil; a = a.parent() {
			if s.sameTerms(a, r) {
				return "conflict", "supersedes", "identical to ancestor " + a.id() + ": an extension must change something"
			}
		}
	}
	total := 0
	for _, f := range r.texts() {
		total += len(f)
	}
	if total > textPackMax {
		return "invalid", "expects", "the expectation's text is too long"
	}
	return "", "", ""
}

// texts returns a raise's packed text fields, in expectation field order.
func (r *Raise) texts() [nText]string {
	var anchor string
	if r.Anchor != nil {
		anchor = r.Anchor.ExpectationID
	}
	return [nText]string{
		tID: r.ExpectationID, tSubjectID: r.Subject.ID, tExpects: r.Expects,
		tFactKey: r.FactKey, tTask: r.Origin.TaskID, tContext: r.Origin.ContextID,
		tAnchor: anchor, tSupersedes: r.Supersedes,
	}
}

// sameTerms reports whether raise r states exactly what x stated: every
// term but the ids, the origin and who raised it.
func (s *State) sameTerms(x *expectation, r *Raise) bool {
	old := s.raiseOf(x)
	if (old.Anchor == nil) != (r.Anchor == nil) || (old.Anchor != nil && *old.Anchor != *r.Anchor) {
		return false
	}
	if len(old.After) != len(r.After) {
		return false
	}
	for i := range old.After {
		if old.After[i] != r.After[i] {
			return false
		}
	}
	return old.Kind == r.Kind && old.Subject == r.Subject && old.Expects == r.Expects &&
		old.FactKey == r.FactKey && old.DueAt.Equal(r.DueAt) && old.Grace == r.Grace &&
		old.Horizon.Equal(r.Horizon) && old.Basis == r.Basis && old.Producer == r.Producer
}

// raiseOf rebuilds the raise that created x.
func (s *State) raiseOf(x *expectation) Raise {
	r := Raise{
		ExpectationID: x.id(),
		Kind:          s.name(x.kind),
		Subject:       s.subject(x),
		Expects:       x.field(tExpects),
		FactKey:       x.field(tFactKey),
		DueAt:         fromNanos(x.projectedDue),
		Grace:         time.Duration(x.grace),
		Horizon:       fromNanos(x.horizon),
		Basis:         bases[x.basis],
		Supersedes:    x.field(tSupersedes),
		Origin:        Origin{TaskID: x.field(tTask), ContextID: x.field(tContext)},
		By:            s.name(x.by),
		Human:         x.flags&flagHuman != 0,
	}
	if id := x.field(tAnchor); id != "" {
		r.Anchor = &Anchor{ExpectationID: id, Offset: time.Duration(x.anchorOffset)}
	}
	if x.extra != nil {
		r.After = x.extra.after
		if x.extra.replyTo != nil {
			rt := *x.extra.replyTo
			r.ReplyTo = &rt
		}
		r.Producer = x.extra.producer
	}
	return r
}

func (s *State) applyRaise(m Meta, ts time.Time, r *Raise) {
	if code, _, _ := s.raiseProblem(r); code != "" {
		return
	}
	texts := r.texts()
	x := &expectation{
		kind:         s.intern(r.Kind),
		subjectType:  s.intern(r.Subject.Type),
		by:           s.intern(r.By),
		basis:        basisCode(r.Basis),
		order:        s.order,
		raisedAt:     nanos(ts),
		projectedDue: nanos(r.DueAt),
		currentDue:   nanos(r.DueAt),
		grace:        int64(r.Grace),
		horizon:      nanos(r.Horizon),
	}
	n := 0
	for _, f := range texts {
		n += len(f)
	}
	buf := make([]byte, 0, n)
	for i, f := range texts {
		buf = append(buf, f...)
		x.ends[i] = uint16(len(buf))
	}
	x.text = string(buf)
	if r.Human {
		x.flags |= flagHuman
	}
	if r.Anchor != nil {
		x.anchorOffset = int64(r.Anchor.Offset)
	}
	if len(r.After) > 0 {
		x.ext().after = append([]string(nil), r.After...)
	}
	if r.Producer != "" {
		x.ext().producer = r.Producer
	}
	if r.ReplyTo != nil {
		rt := *r.ReplyTo
		x.ext().replyTo = &rt
	}
	s.byID[x.id()] = x

	if r.Supersedes != "" {
		prev := s.byID[r.Supersedes]
		s.close(prev, Superseded, ts, r.By)
		prev.ext().child = x
		x.ext().parent = prev
	}
	if task := r.Origin.TaskID; task != "" {
		x.nextSameTask = s.byTask[task]
		s.byTask[task] = x
		if s.tasks[task].withdraws() {
			x.flags |= flagOriginClosed
			s.pendingWithdraw[x] = struct{}{}
		}
	}
	if r.Anchor != nil {
		id := r.Anchor.ExpectationID
		s.anchored[id] = append(s.anchored[id], x)
		if a := head(s.byID[id]); a.life == Satisfied {
			s.reanchor(x, a.satisfiedAt)
		}
	}
	if at, ok := s.factFirst[r.FactKey]; ok {
		s.satisfy(x, at)
	} else {
		key := x.field(tFactKey)
		x.nextSameKey = s.byFactKey[key]
		s.byFactKey[key] = x
	}
	s.reindex(x)
}

// bases are the stored bases, indexed by expectation.basis.
var bases = [...]Basis{BasisObserved, BasisContract, BasisDeclared}

func basisCode(b Basis) uint8 {
	for i, v := range bases {
		if v == b {
			return uint8(i)
		}
	}
	panic("expect: unknown basis " + string(b))
}

// unlink removes x from the open chains (fact key and task).
func (s *State) unlink(x *expectation) {
	unchain(s.byFactKey, x.field(tFactKey), x, func(e *expectation) **expectation { return &e.nextSameKey })
	if task := x.field(tTask); task != "" {
		unchain(s.byTask, task, x, func(e *expectation) **expectation { return &e.nextSameTask })
	}
	delete(s.pendingWithdraw, x)
}

// unchain removes x from the chain heads[key] whose links next names,
// dropping the key with its last member.
func unchain(heads map[string]*expectation, key string, x *expectation, next func(*expectation) **expectation) {
	if p := heads[key]; p == x {
		if *next(x) == nil {
			delete(heads, key)
		} else {
			heads[key] = *next(x)
		}
	} else {
		for ; p != nil; p = *next(p) {
			if *next(p) == x {
				*next(p) = *next(x)
				break
			}
		}
	}
	*next(x) = nil
}

// close ends an open expectation by withdrawal or supersession: no lapse
// is pending for it afterwards.
func (s *State) close(x *expectation, life Life, ts time.Time, by string) {
	if x.life != Open || (life != Withdrawn && life != Superseded) {
		panic("expect: close of a " + x.life.String() + " expectation as " + life.String())
	}
	s.unlink(x)
	x.life = life
	x.ext().closedAt = nanos(ts)
	x.extra.closedBy = by
	s.index.Delete(x)
}

// satisfy records that a fact with x's key happened at at.
func (s *State) satisfy(x *expectation, at int64) {
	if x.life != Open {
		panic("expect: satisfy of a " + x.life.String() + " expectation")
	}
	s.unlink(x)
	x.life = Satisfied
	x.satisfiedAt = at
	// Steps anchored on x, or on any expectation x superseded, now follow
	// x's actual time.
	for a := x; a != nil; a = a.parent() {
		for _, d := range s.anchored[a.id()] {
			if d.life == Open {
				s.reanchor(d, at)
				s.reindex(d)
			}
		}
	}
	// Earlier steps x follows that are still open were skipped.
	if x.extra != nil {
		subject := s.subject(x)
		for _, id := range x.extra.after {
			p := head(s.byID[id])
			if p == nil || p.life != Open || p.flags&flagOriginClosed != 0 || s.subject(p) != subject {
				continue
			}
			if p.skippedAt == 0 || at < p.skippedAt {
				p.skippedAt = at
				s.reindex(p)
			}
		}
	}
	s.reindex(x)
}

func (s *State) reanchor(x *expectation, anchorAt int64) {
	x.currentDue = addNanos(anchorAt, time.Duration(x.anchorOffset))
	x.flags |= flagReanchored
	x.ext().reanchoredAt = anchorAt
}

func (s *State) applyWithdraw(ts time.Time, w *Withdraw) {
	x := s.byID[w.ExpectationID]
	if x == nil || x.life != Open {
		return
	}
	s.close(x, Withdrawn, ts, w.By)
	x.extra.withdrawReason = w.Reason
}

func (s *State) applyFact(ts time.Time, f *Fact) {
	at := f.At
	if at.IsZero() {
		at = ts
	}
	if !inRange(at) {
		return
	}
	n := nanos(at)
	if _, ok := s.factFirst[f.FactKey]; !ok {
		s.factFirst[f.FactKey] = n
	}
	s.subjectFacts[f.Subject] = append(s.subjectFacts[f.Subject], factMark{order: s.order, at: n})
	x := s.byFactKey[f.FactKey]
	for x != nil {
		next := x.nextSameKey
		s.satisfy(x, n)
		x = next
	}
}

func (s *State) applyLapse(m Meta, ts time.Time, l *Lapse) {
	// Only a lapse the log authenticates as appended by the identity it
	// names is folded: one imported from another tool's file (no appender)
	// or written by anyone else in the timekeeper's name is kept in the log
	// but changes nothing. Decide alone admits the timekeeper, so this
	// holds whatever the configuration was when the log was written.
	if m.Actor == "" || m.Actor != l.By {
		return
	}
	x := s.byID[l.ExpectationID]
	if x == nil || x.life == Withdrawn || x.life == Superseded {
		return
	}
	if !inRange(l.DueAt) || !inRange(l.LapsedAt) || l.LapseID != LapseID(x.id(), l.Kind, l.DueAt) {
		return
	}
	if s.recorded(x, l.Kind, nanos(l.DueAt)) {
		return
	}
	e := x.ext()
	e.lapses = append(e.lapses, recordedLapse{
		id: l.LapseID, kind: l.Kind, due: nanos(l.DueAt), lapsedAt: nanos(l.LapsedAt),
		noticed: nanos(ts), by: l.By, seq: m.Seq,
	})
	switch l.Kind {
	case LapseSkipped:
		x.flags |= flagSkippedRecorded
	case LapseStalled:
		x.flags |= flagStalledRecorded
	}
	s.lapse = append(s.lapse, x)
	s.lapsi = append(s.lapsi, int32(len(e.lapses)-1))
	s.reindex(x)
}

// recorded reports whether x already has this lapse: an overdue lapse once
// per due time in force, a skipped or stalled lapse once per expectation.
func (s *State) recorded(x *expectation, kind LapseKind, due int64) bool {
	switch kind {
	case LapseSkipped:
		return x.flags&flagSkippedRecorded != 0
	case LapseStalled:
		return x.flags&flagStalledRecorded != 0
	}
	if x.extra == nil {
		return false
	}
	for _, l := range x.extra.lapses {
		if l.kind == kind && l.due == due {
			return true
		}
	}
	return false
}

func (s *State) applyTaskOutcome(o *TaskOutcome) {
	if _, ok := s.tasks[o.TaskID]; ok {
		return // the first outcome recorded wins
	}
	s.tasks[o.TaskID] = o.Outcome
	if !o.Outcome.withdraws() {
		return
	}
	for x := s.byTask[o.TaskID]; x != nil; x = x.nextSameTask {
		x.flags |= flagOriginClosed
		s.pendingWithdraw[x] = struct{}{}
		s.index.Delete(x)
	}
}

// candidate is a lapse that falls due at lapsedAt unless something rules it
// out first.
type candidate struct {
	kind     LapseKind
	lapsedAt int64
}

// pending returns x's unrecorded lapses in the order they fall due. A
// lapse falls due at its instant only if x was still open then: a late
// satisfaction does not undo it; a withdrawal or supersession does (no lapse
// afterwards), and so does the end of its origin task by cancellation or
// failure. Stalled candidates still need the subject check (heard).
func (s *State) pending(x *expectation) []candidate {
	if x.life == Withdrawn || x.life == Superseded || x.flags&flagOriginClosed != 0 {
		return nil
	}
	// A satisfied expectation left its task's chain, but a lapse it owes
	// from before is still for cancelled work once the task ends badly.
	if task := x.field(tTask); task != "" && x.life == Satisfied && s.tasks[task].withdraws() {
		return nil
	}
	openAt := func(at int64) bool { return x.life == Open || x.satisfiedAt > at }
	var out []candidate
	if at := addNanos(x.currentDue, time.Duration(x.grace)); openAt(at) && !s.recorded(x, LapseOverdue, x.currentDue) {
		out = append(out, candidate{LapseOverdue, at})
	}
	if at := x.skippedAt; at != 0 && openAt(at) && x.flags&flagSkippedRecorded == 0 {
		out = append(out, candidate{LapseSkipped, at})
	}
	if at := x.horizon; at != 0 && openAt(at) && x.flags&(flagStalledRecorded|flagStalledClear) == 0 {
		out = append(out, candidate{LapseStalled, at})
	}
	// At most three: insertion sort by (instant, kind).
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && (out[j].lapsedAt < out[j-1].lapsedAt ||
			out[j].lapsedAt == out[j-1].lapsedAt && out[j].kind.rank() < out[j-1].kind.rank()); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// heard reports whether any fact on x's subject, recorded after x was
// raised, happened by x's horizon: such a fact rules stalled out.
func (s *State) heard(x *expectation) bool {
	facts := s.subjectFacts[s.subject(x)]
	for i := len(facts) - 1; i >= 0 && facts[i].order > x.order; i-- {
		if facts[i].at <= x.horizon {
			return true
		}
	}
	return false
}

// reindex puts x in the deadline index at its earliest pending lapse, or
// takes it out.
func (s *State) reindex(x *expectation) {
	c := s.pending(x)
	if len(c) == 0 {
		s.index.Delete(x)
		return
	}
	s.index.Set(x, fromNanos(c[0].lapsedAt))
}
