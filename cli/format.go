package cli

import (
	"io"
	"tally/api"
	"time"

	"tally/instant"
	"tally/prime"
	"tally/promise"
)

// writeJSONDoc writes one --json document.
func writeJSONDoc(w io.Writer, members ...api.Member) error {
	_, err := w.Write(api.Doc(members...))
	return err
}

func member(name string, value []byte) api.Member { return api.M(name, value) }

func jsonString(s string) []byte { return api.S(s) }

// parseNow reads --now (RFC 3339); empty means the clock.
func parseNow(v string, clock func() time.Time) (time.Time, error) {
	if v == "" {
		return clock().UTC(), nil
	}
	return instant.Parse("now", v)
}

// relative describes t against now: "in 2h", "2h ago".
func relative(t, now time.Time) string { return instant.Relative(t, now) }

// since is how long after from to is, in whole seconds.
func since(from, to time.Time) int64 { return instant.Seconds(from, to) }

// short prints a number of seconds in at most two units: 2d3h, 45m, 30s.
func short(sec int64) string { return instant.Short(sec) }

// humanTime is an instant as people read it: RFC 3339 in whole seconds (a
// clock's reading carries nanoseconds, which the --json documents keep).
func humanTime(t time.Time) string { return instant.Format(t.Truncate(time.Second)) }

// humanStamp is a recorded RFC 3339 instant as people read it (humanTime);
// one that does not parse is printed as recorded.
func humanStamp(v string) string {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return v
	}
	return humanTime(t)
}

// due describes a promise's deadline at now for tables.
func due(v *promise.View, now time.Time) string { return prime.Due(v, now) }

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
func clip(s string, n int) string { return prime.Clip(s, n) }
