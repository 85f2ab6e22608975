package liveness

import "time"

// The probe deadline to a peer: clamp(3 × (predicted RTT + error margin),
// 300 ms, 2 s) × the observer's health multiplier.
const (
	ProbeDeadlineFactor = 3
	ProbeDeadlineMin    = 300 * time.Millisecond
	ProbeDeadlineMax    = 2 * time.Second
)

// Estimate is a coordinate-predicted round trip to a peer and the margin
// the two coordinates' errors add. Valid is false when the observations
// are too sparse or a coordinate is invalid: then the deadline takes the
// conservative default, ProbeDeadlineMax.
type Estimate struct {
	RTT, Margin time.Duration
	Valid       bool
}

// ProbeDeadline is how long the observer waits for a peer's answer to a
// probe, given the estimate to it and the observer's health.
func ProbeDeadline(e Estimate, h Health) time.Duration {
	base := ProbeDeadlineMax
	if e.Valid {
		base = min(max(ProbeDeadlineFactor*(e.RTT+e.Margin), ProbeDeadlineMin), ProbeDeadlineMax)
	}
	return h.Scale(base)
}
