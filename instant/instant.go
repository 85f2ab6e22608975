// Package instant is tally's one rule for the instants and durations it
// accepts, and the packed int64 form the folds, the deadline index and the
// checkpoint keep them in.
//
// Accepted instants are those of RFC 3339 from just after
// 0001-01-01T00:00:00Z (Go's zero time, which every family reads as "none")
// to 9999-12-31T23:59:59.999999Z. Unix nanoseconds in an int64 reach only
// 1677 to 2262, so the packed form keeps nanoseconds for 1680–2253 (Unix
// nanoseconds unchanged, which is where every clock-stamped time lies) and
// microseconds outside it. An instant outside 1680–2253 with a digit finer
// than the microsecond is refused rather than rounded: tally never stores
// one value and computes with another.
//
// The package does no I/O and reads no clock.
package instant

import (
	"math"
	"strconv"
	"strings"
	"time"

	"tally/refuse"
)

// The band [1680-01-01, 2254-01-01) is packed as Unix nanoseconds; outside
// it, as microseconds from its edges. Pack(Max) and Pack(year 0) stay inside
// int64 (see TestPackBounds).
const (
	bandLoSec = -9151488000 // 1680-01-01T00:00:00Z
	bandHiSec = 8962185600  // 2254-01-01T00:00:00Z
	bandLoNs  = bandLoSec * 1_000_000_000
	bandHiNs  = bandHiSec * 1_000_000_000

	// BandFirstYear and BandLastYear bound the years kept to the nanosecond.
	BandFirstYear = 1680
	BandLastYear  = 2253
)

var (
	// Max is the latest accepted instant.
	Max = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	// None is Go's zero time, the first instant of year 1: it means "not
	// set" everywhere in tally, so it is not an accepted instant itself.
	None = time.Time{}
)

// RangeRule is the rule an out-of-range instant breaks, in the words every
// refusal uses.
const RangeRule = "must be after 0001-01-01T00:00:00Z (which means none) and no later than 9999-12-31T23:59:59.999999Z"

// PrecisionRule is the rule a too-fine instant outside the nanosecond band
// breaks.
const PrecisionRule = "before 1680 or after 2253 an instant is kept to the microsecond: give at most 6 fractional digits"

// Check refuses an instant tally cannot keep exactly, naming field.
func Check(field string, t time.Time) error {
	if p := Problem(t); p != "" {
		return refuse.Invalidf(field, p+", got "+Format(t))
	}
	return nil
}

// Problem is the rule t breaks (RangeRule or PrecisionRule), or "" when
// tally keeps it exactly.
func Problem(t time.Time) string {
	switch {
	case !t.After(None) || t.After(Max):
		return RangeRule
	case !Representable(t):
		return PrecisionRule
	}
	return ""
}

// Representable reports whether the packed form keeps t exactly: any
// nanosecond inside 1680–2253, whole microseconds outside it.
func Representable(t time.Time) bool {
	s := t.Unix()
	return (s >= bandLoSec && s < bandHiSec) || t.Nanosecond()%1000 == 0
}

// Pack returns the packed form of t: an int64 that orders as t does, equal
// to t.UnixNano() inside 1680–2253. An instant the form cannot keep is
// floored to the microsecond; one beyond the form's reach (about 600 BC to
// AD 10500, far outside the accepted range) saturates. Check
// it first wherever the value must be kept exactly.
func Pack(t time.Time) int64 {
	s, ns := t.Unix(), int64(t.Nanosecond())
	switch {
	case s >= bandLoSec && s < bandHiSec:
		return s*1e9 + ns
	case s >= bandHiSec:
		if s-bandHiSec > (math.MaxInt64-bandHiNs)/1_000_000-1 {
			return math.MaxInt64
		}
		return bandHiNs + (s-bandHiSec)*1e6 + ns/1000
	default:
		if bandLoSec-s > (bandLoNs-math.MinInt64)/1_000_000-1 {
			return math.MinInt64
		}
		return bandLoNs - (bandLoSec-s)*1e6 + ns/1000
	}
}

// PackCeil is Pack rounding up instead: for a due time computed from
// others, so that an index never fires before it.
func PackCeil(t time.Time) int64 {
	p := Pack(t)
	if !Representable(t) && p != math.MaxInt64 && p != math.MinInt64 {
		p++
	}
	return p
}

// Unpack is the inverse of Pack: Unpack(Pack(t)).Equal(t) for every t
// Representable in years 0000–9999.
func Unpack(p int64) time.Time {
	switch {
	case p >= bandLoNs && p < bandHiNs:
		return time.Unix(0, p).UTC()
	case p >= bandHiNs:
		us := p - bandHiNs
		return time.Unix(bandHiSec+us/1e6, us%1e6*1000).UTC()
	default:
		us := bandLoNs - p // > 0
		return time.Unix(bandLoSec-us/1e6, -(us%1e6)*1000).UTC()
	}
}

// Add returns the packed form of Unpack(p).Add(d), rounded up when the sum
// is not representable, without leaving int64: the sum of a packed time and
// nanoseconds is wrong outside the nanosecond band, so every fold adds
// through here.
func Add(p int64, d time.Duration) int64 {
	if p >= bandLoNs && p < bandHiNs {
		if q := p + int64(d); (d >= 0) == (q >= p) && q >= bandLoNs && q < bandHiNs {
			return q // the common case, inside the band
		}
	}
	return PackCeil(Unpack(p).Add(d))
}

// Format writes t as tally stores it: RFC 3339 in UTC, fractional seconds
// only when present.
func Format(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// AppendQuoted appends Format(t) as a JSON string, without the string's
// allocation: an RFC 3339 time holds nothing JSON escapes.
func AppendQuoted(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// Parse reads an RFC 3339 instant (any offset; the result is UTC) and
// refuses one tally cannot keep exactly.
func Parse(field, v string) (time.Time, error) {
	t, rule := Read(v)
	switch rule {
	case "":
		return t, nil
	case SyntaxRule:
		return time.Time{}, refuse.Invalidf(field, strconv.Quote(v)+" is not an RFC 3339 time such as 2026-09-01T17:00:00Z")
	}
	return time.Time{}, refuse.Invalidf(field, rule+", got "+Format(t))
}

// SyntaxRule is the rule Read reports for text that is not an RFC 3339 time.
const SyntaxRule = "must be an RFC 3339 time"

// Read is the one reader of instants behind every family's codec and Parse:
// v as RFC 3339 (any offset; the result is UTC) and the rule it breaks, ""
// when tally keeps it exactly, else SyntaxRule (t is zero), RangeRule or
// PrecisionRule (t is the instant read). Each family words its own refusal
// from the rule. It takes a line's bytes as well as a string, so a fold
// reads a record's time without making a string of it; the shape tally
// writes (2026-09-01T17:00:00Z) is read without time.Parse, which
// dominates a fold otherwise, and everything else goes to time.Parse, so
// both paths accept exactly the same text (FuzzRead).
func Read[T string | []byte](v T) (time.Time, string) {
	t, ok := readCanonical(v)
	if !ok {
		var err error
		if t, err = time.Parse(time.RFC3339Nano, string(v)); err != nil {
			return time.Time{}, SyntaxRule
		}
		t = t.UTC()
	}
	return t, Problem(t)
}

// UTCRule is the rule ReadUTC reports for text that is not an RFC 3339
// time in UTC (ending in Z).
const UTCRule = "must be an RFC 3339 UTC time"

// ReadUTC is Read for a record's times, which tally writes in UTC: text
// with another offset breaks UTCRule, as text that is no time does.
func ReadUTC(v string) (time.Time, string) {
	t, rule := Read(v)
	if rule == SyntaxRule || !strings.HasSuffix(v, "Z") {
		return time.Time{}, UTCRule
	}
	return t, rule
}

// readCanonical reads YYYY-MM-DDTHH:MM:SSZ, and declines anything else or
// anything it doubts.
func readCanonical[T string | []byte](v T) (time.Time, bool) {
	if len(v) != 20 || v[4] != '-' || v[7] != '-' || v[10] != 'T' || v[13] != ':' || v[16] != ':' || v[19] != 'Z' {
		return time.Time{}, false
	}
	num := func(i, n int) (int, bool) {
		x := 0
		for j := i; j < i+n; j++ {
			c := v[j]
			if c < '0' || c > '9' {
				return 0, false
			}
			x = x*10 + int(c-'0')
		}
		return x, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 2)
	day, ok3 := num(8, 2)
	hour, ok4 := num(11, 2)
	minute, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	if day > daysIn(time.Month(month), year) {
		return time.Time{}, false
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, 0, time.UTC), true
}

func daysIn(m time.Month, year int) int {
	switch m {
	case time.February:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

// Deadline reads a deadline as every mode accepts it: an RFC 3339 instant,
// or a duration counting forward from now (90m, 2h, 3d, 1w, PT6H, P1DT2H;
// see ParseDuration), which is truncated to the second. A duration must be
// at least a second, so the deadline is always after now.
func Deadline(field, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, refuse.Invalidf(field, "required (RFC 3339 such as 2026-09-01T17:00:00Z, or a duration from now such as 90m, 2h, 3d, PT6H)")
	}
	if looksLikeInstant(v) {
		return Parse(field, v)
	}
	d, err := parseDuration(field, v)
	if e, ok := err.(*durationError); ok && e.syntax {
		return time.Time{}, refuse.Invalidf(field, strconv.Quote(v)+" is neither RFC 3339 (2026-09-01T17:00:00Z) nor a duration from now ("+DurationForms+")")
	}
	if err != nil {
		return time.Time{}, refusal(err)
	}
	if d < time.Second {
		return time.Time{}, refuse.Invalidf(field, "a duration from now counts forward: must be at least 1s, got "+strconv.Quote(v))
	}
	t := now.UTC().Add(d).Truncate(time.Second)
	if t.After(Max) {
		return time.Time{}, refuse.Invalidf(field, "now + "+v+" is after 9999-12-31T23:59:59.999999Z, the latest instant tally keeps")
	}
	return t, nil
}

// Since reads a lower bound as every mode accepts it: an RFC 3339 instant,
// or a duration counting back from now ("1h": the last hour), truncated to
// the second.
func Since(field, v string, now time.Time) (time.Time, error) {
	if looksLikeInstant(v) {
		return Parse(field, v)
	}
	d, err := parseDuration(field, v)
	if e, ok := err.(*durationError); ok && e.syntax {
		return time.Time{}, refuse.Invalidf(field, strconv.Quote(v)+" is neither RFC 3339 (2026-09-01T17:00:00Z) nor a duration back from now (1h: the last hour; "+DurationForms+")")
	}
	if err != nil {
		return time.Time{}, refusal(err)
	}
	t := now.UTC().Add(-d).Truncate(time.Second)
	if !t.After(None) {
		return time.Time{}, refuse.Invalidf(field, "now - "+v+" is before 0001-01-01T00:00:00Z, the earliest instant tally keeps")
	}
	return t, nil
}

// looksLikeInstant tells an RFC 3339 attempt (2026-…) from a duration, so
// a malformed instant gets the instant's message.
func looksLikeInstant(v string) bool {
	return len(v) >= 5 && v[4] == '-' && v[0] >= '0' && v[0] <= '9'
}
