package ledger

import (
	"context"
	"time"

	"tally/claim"
	"tally/refuse"
)

// What the timekeeper (package timekeeper) needs from a ledger beyond Sweep.

// Timekeeper is the identity the timekeeper acts as.
func (l *Ledger) Timekeeper() string { return l.cfg.Timekeeper }

// Now reads the ledger's clock: the instant a sweep decides at.
func (l *Ledger) Now() time.Time { return l.cfg.Now().UTC() }

// Dir is the session directory.
func (l *Ledger) Dir() string { return l.log.Dir() }

// DueClaimDeadlines returns, in deadline order, up to max open claims whose
// deadline passed by now with no deadline fact yet (the claim state's
// deadline index: O(k log n), nothing when none is due).
func DueClaimDeadlines(st *State, now time.Time, max int) []string {
	if next, ok := st.Claims.NextDeadline(); !ok || now.Before(next) {
		return nil
	}
	return st.Claims.DueDeadlines(now, max)
}

// SweepClaims commits, as the timekeeper, the deadline fact of every claim
// whose deadline passed at the ledger's clock (at most max): Expired, or
// Deadlocked for the canonical victim of an Awaits wait-cycle. Each is
// decided under the log's lock, so a fact another timekeeper committed first
// is refused here, not recorded twice; such refusals are not errors.
func (l *Ledger) SweepClaims(ctx context.Context, max int) ([]Result, error) {
	var ids []string
	now := l.Now()
	l.Read(func(st *State) { ids = DueClaimDeadlines(st, now, max) })
	var out []Result
	for _, id := range ids {
		res, err := l.SubmitClaim(ctx, claim.CommitDeadline{Claim: id}, WriteOptions{Actor: l.cfg.Timekeeper})
		if err != nil {
			if _, ok := refuse.As(err); ok {
				continue // committed by another timekeeper, or ended meanwhile
			}
			return out, err
		}
		out = append(out, res...)
	}
	return out, nil
}
