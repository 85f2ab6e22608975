package liveness

import "time"

// The observer's health (Lifeguard's local health): missed probes and
// late ticks raise the score, answered probes lower it, and the score
// stretches the observer's timeouts by 1 + 0.25 × score, so 1× healthy to
// 3× at the worst score.
const (
	HealthMin = 0
	HealthMax = 8
	// HealthStep is the multiplier's increase per point of score.
	HealthStep = 0.25
)

// Health is an observer's health score, HealthMin to HealthMax; the zero
// value is healthy.
//
// Invariant: HealthMin ≤ score ≤ HealthMax.
type Health struct{ score int }

// Score is the current score.
func (h Health) Score() int { return h.score }

// Apply moves the score by delta, held within its bounds.
func (h Health) Apply(delta int) Health {
	h.score = min(max(h.score+delta, HealthMin), HealthMax)
	return h
}

// Missed records a probe that went unanswered, or a report that was not
// delivered.
func (h Health) Missed() Health { return h.Apply(1) }

// Late records a tick of the observer's own loop that came late: the
// observer itself is struggling to run.
func (h Health) Late() Health { return h.Apply(1) }

// Answered records a probe answered in time.
func (h Health) Answered() Health { return h.Apply(-1) }

// Multiplier is 1 + HealthStep × score: 1 to 3.
func (h Health) Multiplier() float64 { return 1 + HealthStep*float64(h.score) }

// Scale stretches a timeout by the multiplier.
func (h Health) Scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * h.Multiplier())
}

// LateTick says whether a tick of a loop meant to run every period, which
// ran at now after the previous one at prev, came late: more than half a
// period past its time.
func LateTick(prev, now time.Time, period time.Duration) bool {
	return now.Sub(prev) > period+period/2
}
