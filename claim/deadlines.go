package claim

import (
	"time"

	"tally/duequeue"
)

// The deadline index holds every open claim that has a deadline, keyed by
// the claim's record; a claim leaves it when it ends (by any cause), so the
// timekeeper's question "which deadlines passed without a fact?" costs
// O(k log n) for k due claims and O(1) when none is due.

func lessClaimRec(a, b *claimRec) bool { return a.seq < b.seq }

func (s *State) deadlineIndex() *duequeue.Index[*claimRec] {
	if s.deadlines == nil {
		s.deadlines = duequeue.NewWithSlots(lessClaimRec, func(c *claimRec) *int32 { return &c.dlSlot })
	}
	return s.deadlines
}

// trackDeadline indexes a newly created claim's deadline.
func (s *State) trackDeadline(c *claimRec) {
	if !c.terms.Deadline.IsZero() && c.end == nil {
		s.deadlineIndex().Set(c, c.terms.Deadline)
	}
}

// untrackDeadline drops an ended claim from the index.
func (s *State) untrackDeadline(c *claimRec) {
	if s.deadlines != nil && c.dlSlot != 0 {
		s.deadlines.Delete(c)
	}
}

// DueDeadlines returns, in deadline order (ties by creation), the ids of at
// most max open claims whose deadline is at or before now and for which no
// fact has been committed yet: the claims the timekeeper should pass to
// CommitDeadline. max ≤ 0 means no bound. O(k log n) for k returned.
func (s *State) DueDeadlines(now time.Time, max int) []string {
	if s.deadlines == nil || s.deadlines.Len() == 0 {
		return nil
	}
	if next, _ := s.deadlines.Next(); next.After(now) {
		return nil
	}
	var out []string
	s.deadlines.Due(now, func(c *claimRec, _ time.Time) bool {
		out = append(out, c.id)
		return max <= 0 || len(out) < max
	})
	return out
}

// NextDeadline returns the earliest deadline of an open claim, and false
// when no open claim has one (so a timekeeper knows how long to sleep).
func (s *State) NextDeadline() (time.Time, bool) {
	if s.deadlines == nil {
		return time.Time{}, false
	}
	return s.deadlines.Next()
}

// Artifact returns the view of one artifact of a claim, without building the
// claim's whole view.
func (s *State) Artifact(claimID, id string) (ArtifactView, bool) {
	c := s.claim(claimID)
	if c == nil {
		return ArtifactView{}, false
	}
	a := c.artifacts[id]
	if a == nil {
		return ArtifactView{}, false
	}
	return a.view(), true
}
