package expect

import (
	"errors"
	"time"

	"tally/instant"
	"tally/refuse"
)

// ParseTime reads an RFC 3339 UTC time ("2026-09-01T17:00:00Z") that tally
// keeps exactly (instant.Problem). Offsets other than Z are refused so that
// every stored time has one spelling.
func ParseTime(s string) (time.Time, error) {
	t, rule := instant.ReadUTC(s)
	if rule == instant.UTCRule {
		return time.Time{}, errors.New("must be an RFC 3339 UTC time ending in Z")
	}
	// The zero instant would read as "none" (a fact at it as now, a
	// horizon at it as no horizon): refused with the rest of what tally
	// cannot keep.
	if rule != "" {
		return time.Time{}, errors.New(rule)
	}
	return t, nil
}

// durationMax bounds grace and offsets: a century is far longer than any
// grace, offset or extension.
const durationMax = 100 * 366 * 24 * time.Hour

// ParseDuration reads an ISO 8601 duration, the form stored on the wire
// (instant.ParseISODuration: weeks, days, hours, minutes and seconds, such
// as "PT6H", "P1W", "P1DT2H30M", "PT0.5S"). Years and months are refused:
// their length depends on the calendar. Negative durations are refused.
func ParseDuration(s string) (time.Duration, error) {
	d, err := instant.ParseISODuration("", s)
	if r, ok := refuse.As(err); ok {
		return 0, errors.New(r.Rule)
	}
	return d, err
}

// FormatDuration writes d in the one canonical ISO 8601 spelling this
// package emits: hours, minutes and seconds ("PT6H", "PT1H45M", "PT0S").
func FormatDuration(d time.Duration) string {
	if d < 0 {
		panic("expect: negative duration")
	}
	return instant.FormatISOSpan(int64(d/time.Second), int64(d%time.Second))
}
