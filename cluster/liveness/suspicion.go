package liveness

import (
	"math"
	"slices"
	"time"
)

// A suspicion's deadline lies between a minimum and a maximum that grow
// with the cluster: min = SuspicionMult × period × max(1, log10(n+1)) and
// max = SuspicionMaxMult × min. It starts at the maximum and each
// independent confirmation brings it down, on a logarithmic curve, to the
// minimum once K = min(IndirectProbes, n − 2) members have confirmed:
//
//	timeout(C) = max(min, max − (max − min) × ln(C + 1) / ln(K + 1))
//
// The observer's health multiplier, fixed when the suspicion starts,
// stretches the whole timeout.
const (
	SuspicionMult    = 3
	SuspicionMaxMult = 6
)

// SuspicionBounds are a suspicion's shortest and longest timeouts among n
// members probing every period.
func SuspicionBounds(n int, period time.Duration) (lo, hi time.Duration) {
	scale := max(1, math.Log10(float64(n+1)))
	lo = time.Duration(SuspicionMult * scale * float64(period))
	return lo, SuspicionMaxMult * lo
}

// Confirmations is K, the independent confirmations that bring a
// suspicion to its shortest timeout among n members: the indirect probes'
// count, and never more than the members other than the suspect and the
// accuser.
func Confirmations(n int) int { return max(0, min(IndirectProbes, n-2)) }

// Suspicion is one observer's suspicion of a member at one incarnation.
//
// Invariant: the accuser's own vote is never among confirmers, no member
// counts twice, and len(confirmers) ≤ k.
type Suspicion struct {
	Node        uint64
	Incarnation uint64
	// From is the member whose accusation started it.
	From  uint64
	Start time.Time
	// lo, hi are the bounds, scaled by the observer's health at Start.
	lo, hi     time.Duration
	k          int
	confirmers []uint64
	// extended is the time grants added to the deadline.
	extended time.Duration
}

// NewSuspicion starts a suspicion of node at incarnation inc, accused by
// from, at start, among n members probing every period, by an observer
// whose health is h.
func NewSuspicion(node, inc, from uint64, start time.Time, n int, period time.Duration, h Health) *Suspicion {
	lo, hi := SuspicionBounds(n, period)
	return &Suspicion{Node: node, Incarnation: inc, From: from, Start: start, lo: h.Scale(lo), hi: h.Scale(hi), k: Confirmations(n)}
}

// Confirm counts an independent confirmation by member from. It says
// false, changing nothing, for the accuser's own vote, a member that
// confirmed already (repeated gossip of the same evidence) and any past
// the k needed: none of these moves the deadline, and nothing restarts it.
func (s *Suspicion) Confirm(from uint64) bool {
	if from == s.From || from == s.Node || len(s.confirmers) >= s.k || slices.Contains(s.confirmers, from) {
		return false
	}
	s.confirmers = append(s.confirmers, from)
	return true
}

// Confirmed is the independent confirmations counted.
func (s *Suspicion) Confirmed() int { return len(s.confirmers) }

// Timeout is the time from Start to the deadline before grants.
func (s *Suspicion) Timeout() time.Duration {
	if s.k < 1 {
		return s.lo // no one can confirm: the shortest, as memberlist does
	}
	c := float64(len(s.confirmers))
	frac := math.Log(c+1) / math.Log(float64(s.k)+1)
	return max(s.lo, s.hi-time.Duration(frac*float64(s.hi-s.lo)))
}

// Extend adds a grant's time to the deadline.
func (s *Suspicion) Extend(d time.Duration) { s.extended += d }

// Deadline is when the suspicion, unrefuted, settles as a death.
func (s *Suspicion) Deadline() time.Time { return s.Start.Add(s.Timeout() + s.extended) }
