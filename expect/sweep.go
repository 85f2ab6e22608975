package expect

import (
	"slices"
	"time"
)

// Sweep is the timekeeper's pure step: it returns the records the timekeeper
// should commit as of now, at most max of them (max <= 0 or above
// Config.SweepMax means Config.SweepMax):
//
//   - first, an expect.withdraw for every open expectation whose origin task
//     was cancelled or failed and whose withdrawal is not recorded yet;
//   - then a lapse for every lapse that has fallen due (its instant is
//     strictly before now) and is not recorded, in the order they fell due.
//
// Each record has ts = now (the time it was noticed); a lapse carries the
// due time in force (dueAt) and the instant it lapsed (lapsedAt), so a
// timekeeper that was down for a day records every lapse, each once, on its
// next sweep. Sweep does not change the folded state: a lapse stays pending
// until its record is applied, so sweeping again before applying returns it
// again, and the lapse's deterministic id makes the second commit a no-op.
//
// Cost: O(1) when nothing is due; O(k log n) for k due lapses. Sweep prunes
// stalled candidates it finds ruled out from its index, which is a cache.
func (s *State) Sweep(now time.Time, max int) []Event {
	if max <= 0 || max > s.cfg.SweepMax {
		max = s.cfg.SweepMax
	}
	now = now.UTC()
	var out []Event
	if len(s.pendingWithdraw) > 0 {
		xs := make([]*expectation, 0, len(s.pendingWithdraw))
		for x := range s.pendingWithdraw {
			xs = append(xs, x)
		}
		slices.SortFunc(xs, func(a, b *expectation) int { return cmpOrder(a.order, b.order) })
		if len(xs) > max {
			xs = xs[:max]
		}
		for _, x := range xs {
			reason := "origin task " + string(s.tasks[x.field(tTask)])
			out = append(out, s.withdrawals([]*expectation{x}, s.cfg.Timekeeper, now, reason)...)
		}
	}
	if len(out) >= max || !inRange(now) {
		return out
	}
	limit := nanos(now)
	// stale are visited expectations whose index entry is out of date: a
	// stalled candidate ruled out by a fact, or a lapse owed to a task that
	// has since ended badly. Re-indexed after the visit.
	var stale []*expectation
	// Lapses fall due strictly after their instant: a fact at exactly
	// due + grace is in time.
	s.index.Due(now.Add(-time.Nanosecond), func(x *expectation, _ time.Time) bool {
		emitted := false
		for _, c := range s.pending(x) {
			if c.lapsedAt >= limit {
				break
			}
			if c.kind == LapseStalled && s.heard(x) {
				x.flags |= flagStalledClear // facts are never removed: this holds for good
				continue
			}
			out = append(out, s.lapseEvent(x, c, now))
			emitted = true
			if len(out) >= max {
				return false
			}
		}
		if !emitted {
			stale = append(stale, x)
		}
		return true
	})
	for _, x := range stale {
		s.reindex(x)
	}
	return out
}

// NextDue returns the earliest instant at which a lapse can fall due, so a
// timekeeper can sleep until then; false when none is pending. Withdrawals
// are due at once (see Sweep).
func (s *State) NextDue() (time.Time, bool) {
	return s.index.Next()
}

// PendingWithdrawals reports how many withdrawals Sweep would return now.
func (s *State) PendingWithdrawals() int { return len(s.pendingWithdraw) }
