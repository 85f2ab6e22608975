package cli

import (
	"fmt"
	"io"
	"strings"
	"tally/jsondoc"
	"time"

	"tally/instant"
	"tally/promise"
)

// writeJSONDoc writes one --json document.
func writeJSONDoc(w io.Writer, members ...jsondoc.Member) error {
	_, err := w.Write(jsondoc.Doc(members...))
	return err
}

func member(name string, value []byte) jsondoc.Member { return jsondoc.M(name, value) }

func jsonString(s string) []byte { return jsondoc.S(s) }

// parseNow reads --now (RFC 3339); empty means the clock.
func parseNow(v string, clock func() time.Time) (time.Time, error) {
	if v == "" {
		return clock().UTC(), nil
	}
	return instant.Parse("now", v)
}

// relative describes t against now: "in 2h", "2h ago".
func relative(t, now time.Time) string {
	sec, before := instant.RoundSeconds(now, t)
	if !before {
		return "in " + short(sec)
	}
	return short(sec) + " ago"
}

// since is how long after from to is, in whole seconds: exact for any two
// instants, where time.Time.Sub stops at about 292 years.
func since(from, to time.Time) int64 {
	sec, before := instant.RoundSeconds(from, to)
	if before {
		return -sec
	}
	return sec
}

// short prints a number of seconds in at most two units: 2d3h, 45m, 30s.
func short(sec int64) string {
	const minute, hour, day = 60, 3600, 86400
	switch {
	case sec >= day:
		if h := sec % day / hour; h != 0 {
			return fmt.Sprintf("%dd%dh", sec/day, h)
		}
		return fmt.Sprintf("%dd", sec/day)
	case sec >= hour:
		if m := sec % hour / minute; m != 0 {
			return fmt.Sprintf("%dh%dm", sec/hour, m)
		}
		return fmt.Sprintf("%dh", sec/hour)
	case sec >= minute:
		return fmt.Sprintf("%dm", sec/minute)
	default:
		return fmt.Sprintf("%ds", sec)
	}
}

// due describes a promise's deadline at now for tables.
func due(v *promise.View, now time.Time) string {
	switch {
	case v.Overdue:
		return "overdue " + short(since(v.Until, now))
	case v.State == promise.Owed:
		return "due " + relative(v.Until, now)
	case v.State == promise.Conditional:
		return "waits on " + v.On
	default:
		return string(v.State)
	}
}

const (
	ansiReset  = "\x1b[0m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiDim    = "\x1b[2m"
)

// paint colours s for a terminal; without colour it returns s unchanged.
func paint(on bool, color, s string) string {
	if !on {
		return s
	}
	return color + s + ansiReset
}

func stateColor(v *promise.View) string {
	switch {
	case v.Overdue:
		return ansiRed
	case v.State == promise.Satisfied:
		return ansiGreen
	case v.State == promise.Owed:
		return ansiYellow
	default:
		return ansiDim
	}
}

// clip shortens text for a table cell.
func clip(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
