package instant

import (
	"strconv"
	"time"
)

// Span is to - from exactly, as whole seconds and nanoseconds
// (0 ≤ nsec < 1e9). Unlike time.Time.Sub it does not saturate at about 292
// years, so a deadline in 9999 or 1000 is described by its true distance.
func Span(from, to time.Time) (sec, nsec int64) {
	sec = to.Unix() - from.Unix()
	nsec = int64(to.Nanosecond()) - int64(from.Nanosecond())
	if nsec < 0 {
		sec, nsec = sec-1, nsec+1e9
	}
	return sec, nsec
}

// RoundSeconds is |to - from| rounded to the second (half away from zero),
// and whether to is before from.
func RoundSeconds(from, to time.Time) (sec int64, before bool) {
	if to.Before(from) {
		from, to, before = to, from, true
	}
	sec, nsec := Span(from, to)
	if nsec >= 5e8 {
		sec++
	}
	return sec, before
}

// FormatISOSpan writes a non-negative span in the one ISO 8601 spelling
// tally emits: hours, minutes and seconds ("PT6H", "PT1H45M", "PT0.5S",
// "PT0S").
func FormatISOSpan(sec, nsec int64) string {
	if sec < 0 || nsec < 0 || nsec >= 1e9 {
		panic("instant: negative or malformed span")
	}
	if sec == 0 && nsec == 0 {
		return "PT0S"
	}
	b := []byte("PT")
	if h := sec / 3600; h > 0 {
		b = strconv.AppendInt(b, h, 10)
		b = append(b, 'H')
	}
	if m := sec % 3600 / 60; m > 0 {
		b = strconv.AppendInt(b, m, 10)
		b = append(b, 'M')
	}
	if s := sec % 60; s > 0 || nsec > 0 {
		b = strconv.AppendInt(b, s, 10)
		if nsec > 0 {
			f := strconv.AppendInt(nil, nsec+1e9, 10)[1:] // nine digits
			for len(f) > 0 && f[len(f)-1] == '0' {
				f = f[:len(f)-1]
			}
			b = append(b, '.')
			b = append(b, f...)
		}
		b = append(b, 'S')
	}
	return string(b)
}

// Relative describes t against now for people: "in 2h", "2h ago".
func Relative(t, now time.Time) string {
	sec, before := RoundSeconds(now, t)
	if !before {
		return "in " + Short(sec)
	}
	return Short(sec) + " ago"
}

// Seconds is how long after from to is, in whole seconds: exact for any
// two instants, where time.Time.Sub stops at about 292 years.
func Seconds(from, to time.Time) int64 {
	sec, before := RoundSeconds(from, to)
	if before {
		return -sec
	}
	return sec
}

// Short prints a number of seconds in at most two units: 2d3h, 45m, 30s.
func Short(sec int64) string {
	const minute, hour, day = 60, 3600, 86400
	switch {
	case sec >= day:
		if h := sec % day / hour; h != 0 {
			return strconv.FormatInt(sec/day, 10) + "d" + strconv.FormatInt(h, 10) + "h"
		}
		return strconv.FormatInt(sec/day, 10) + "d"
	case sec >= hour:
		if m := sec % hour / minute; m != 0 {
			return strconv.FormatInt(sec/hour, 10) + "h" + strconv.FormatInt(m, 10) + "m"
		}
		return strconv.FormatInt(sec/hour, 10) + "h"
	case sec >= minute:
		return strconv.FormatInt(sec/minute, 10) + "m"
	}
	return strconv.FormatInt(sec, 10) + "s"
}
