// Package liveness is the pure core of tally's failure detector, the rules
// memberlist (SWIM with Lifeguard) cannot express: the observer's health
// score and its multiplier, the suspicion deadline shortened by independent
// confirmations, refutation by a higher incarnation, latency-aware probe
// deadlines from Vivaldi coordinates, and the bounded "late homework"
// grants. Nothing here does I/O or reads a clock: every instant is passed
// in, so each rule is a table test. The cluster node (cluster/gossip.go)
// feeds it what memberlist and the members' reports observe and commits
// the settled verdicts in the meta group.
//
// A grant or a deadline here is about liveness only: it never grants
// leadership, never extends a claim's, promise's or expectation's
// deadline, and never lets a minority commit.
package liveness

import "time"

// The seed's numbers ("Failure Detection and Lifeguard"). Do not change
// one without the seed.
const (
	// ProbePeriod is how often a member probes another.
	ProbePeriod = time.Second
	// IndirectProbes is how many other members are asked to probe a member
	// whose direct probe timed out, before it is suspected.
	IndirectProbes = 3
)
