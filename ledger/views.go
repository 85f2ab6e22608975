package ledger

import (
	"time"

	"tally/claim"
	"tally/expect"
	"tally/promise"
	"tally/store"
)

// The typed reads: each answers from the state once it holds everything
// durable and nothing that is not, and returns views that share nothing
// with it. A reader that needs several views of one moment uses Read.

// Promises returns the views of the promises f selects at now.
func (l *Ledger) Promises(f promise.Filter, now time.Time) (out []promise.View) {
	l.Read(func(st *State) { out = st.Promises.Select(f, now) })
	return out
}

// Promise returns the view of promise id at now, and whether it exists.
func (l *Ledger) Promise(id string, now time.Time) (v promise.View, ok bool) {
	l.Read(func(st *State) { v, ok = l.promiseFamily(st).View(id, now) })
	return v, ok
}

// Claims returns the summaries of the claims f selects at now.
func (l *Ledger) Claims(f claim.Filter, now time.Time) (out []claim.Summary) {
	l.Read(func(st *State) { out = st.Claims.List(f, now) })
	return out
}

// Claim returns the view of claim id at now, and whether it exists.
func (l *Ledger) Claim(id string, now time.Time) (v claim.View, ok bool) {
	l.Read(func(st *State) { v, ok = claimFamily(st).View(id, now) })
	return v, ok
}

// Expectations returns the views of the expectations f selects.
func (l *Ledger) Expectations(f expect.Filter) (out []expect.View) {
	l.Read(func(st *State) { out = st.Expects.List(f) })
	return out
}

// Expectation returns the view of expectation id, and whether it exists.
func (l *Ledger) Expectation(id string) (v expect.View, ok bool) {
	l.Read(func(st *State) { v, ok = expectFamily(st).View(id, time.Time{}) })
	return v, ok
}

// Lapses returns the lapses recorded at or after since.
func (l *Ledger) Lapses(since time.Time) (out []expect.LapseView) {
	l.Read(func(st *State) { out = st.Expects.Lapses(since) })
	return out
}

// SkippedSummary describes the lines kept but not folded ("" if none).
func (l *Ledger) SkippedSummary() (s string) {
	l.Read(func(st *State) { s = st.SkippedSummary() })
	return s
}

// Read calls fn with the current state: everything durable, nothing that
// is not. fn must not keep references past its return or modify the state.
func (l *Ledger) Read(fn func(st *State)) {
	l.pipe.Read(func(store.Position) { fn(l.st) })
}

// ReadAt is Read for a reader that follows the log from where the state
// is (the timekeeper's cursor, a page's sequence number): fn also gets the
// position the state has folded.
func (l *Ledger) ReadAt(fn func(st *State, pos store.Position)) {
	l.pipe.Read(func(pos store.Position) { fn(l.st, pos) })
}
