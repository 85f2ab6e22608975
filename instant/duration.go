package instant

import (
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"tally/refuse"
)

// DurationForms lists what ParseDuration accepts, for refusals and help.
const DurationForms = "90m, 2h, 3d, 1w, 1d12h, or ISO 8601 such as PT6H, P1D, P1W, P1DT2H"

// ISOForms lists what ParseISODuration accepts.
const ISOForms = "an ISO 8601 duration of weeks, days, hours, minutes and seconds such as PT6H, P1D, P1W, P1DT2H30M or PT0.5S"

// MaxDurationRule is the rule a too-long duration breaks.
const MaxDurationRule = "longer than 106751d (about 292 years), the longest duration tally computes with: give an RFC 3339 instant instead"

const (
	day  = 24 * time.Hour
	week = 7 * day
)

// durationError is a refusal with the kind the parser found, so Deadline
// says "neither an instant nor a duration" only when it is neither.
type durationError struct {
	syntax bool // not a duration at all, as opposed to one tally refuses
	r      *refuse.Refusal
}

func (e *durationError) Error() string { return e.r.Error() }

func syntaxErr(field, why string) error { return &durationError{true, refuse.Invalidf(field, why)} }

func refuseDuration(field, why string) error {
	return &durationError{false, refuse.Invalidf(field, why)}
}

// refusal returns the *refuse.Refusal the parsers hand out.
func refusal(err error) error {
	if e, ok := err.(*durationError); ok {
		return e.r
	}
	return err
}

// ParseDuration reads a duration as a person gives one: Go's form with
// days and weeks (90m, 1h30m, 1.5h, 3d, 1d12h, 2w) or ISO 8601 (see
// ParseISODuration). A duration counts forward: a sign is refused, and so is
// anything longer than time.Duration holds. Zero is allowed here; a caller
// that needs time to pass says so.
func ParseDuration(field, v string) (time.Duration, error) {
	d, err := parseDuration(field, v)
	return d, refusal(err)
}

func parseDuration(field, v string) (time.Duration, error) {
	if strings.HasPrefix(v, "P") {
		return parseISODuration(field, v)
	}
	if strings.HasPrefix(v, "-") {
		return 0, refuseDuration(field, "a duration counts forward: "+strconv.Quote(v)+" is negative; give "+DurationForms+", or an RFC 3339 time")
	}
	bad := func() (time.Duration, error) {
		return 0, syntaxErr(field, strconv.Quote(v)+" is not a duration: give "+DurationForms)
	}
	if v == "" || len(v) > 64 {
		return bad()
	}
	var total big.Rat
	for s := v; s != ""; {
		num, rest, ok := number(s)
		if !ok {
			return bad()
		}
		i := 0
		for i < len(rest) && !(rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		var unit time.Duration
		switch rest[:i] {
		case "ns":
			unit = time.Nanosecond
		case "us", "µs", "μs":
			unit = time.Microsecond
		case "ms":
			unit = time.Millisecond
		case "s":
			unit = time.Second
		case "m":
			unit = time.Minute
		case "h":
			unit = time.Hour
		case "d":
			unit = day
		case "w":
			unit = week
		default:
			return bad()
		}
		total.Add(&total, num.Mul(num, new(big.Rat).SetInt64(int64(unit))))
		s = rest[i:]
	}
	return toDuration(field, &total)
}

// ParseISODuration reads an ISO 8601 duration: P, then weeks and days, then
// T and hours, minutes and seconds, each at most once and in that order,
// with a fraction only on the seconds ("PT6H", "P1W", "P1DT2H30M",
// "PT0.5S"). Years and months are refused: their length depends on the
// calendar. It is the form stored on the wire.
func ParseISODuration(field, v string) (time.Duration, error) {
	d, err := parseISODuration(field, v)
	return d, refusal(err)
}

func parseISODuration(field, v string) (time.Duration, error) {
	bad := func() (time.Duration, error) {
		return 0, syntaxErr(field, strconv.Quote(v)+" is not "+ISOForms+" (years and months are refused: their length depends on the calendar)")
	}
	if len(v) < 3 || v[0] != 'P' || len(v) > 64 {
		return bad()
	}
	var total big.Rat
	inTime, units, last := false, 0, -1
	for i := 1; i < len(v); {
		if v[i] == 'T' {
			if inTime || i == len(v)-1 {
				return bad()
			}
			inTime = true
			i++
			continue
		}
		num, rest, ok := number(v[i:])
		if !ok || rest == "" {
			return bad()
		}
		var unit time.Duration
		var order int
		switch c := rest[0]; {
		case !inTime && c == 'W':
			unit, order = week, 0
		case !inTime && c == 'D':
			unit, order = day, 1
		case inTime && c == 'H':
			unit, order = time.Hour, 2
		case inTime && c == 'M':
			unit, order = time.Minute, 3
		case inTime && c == 'S':
			unit, order = time.Second, 4
		default:
			return bad()
		}
		if order <= last || (!num.IsInt() && unit != time.Second) {
			return bad()
		}
		last = order
		total.Add(&total, num.Mul(num, new(big.Rat).SetInt64(int64(unit))))
		units++
		i = len(v) - len(rest) + 1
	}
	if units == 0 {
		return bad()
	}
	return toDuration(field, &total)
}

// number reads a leading decimal (digits, optionally a point and at most
// nine more digits) off s.
func number(s string) (*big.Rat, string, bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return nil, s, false
	}
	j := i
	if j < len(s) && s[j] == '.' {
		j++
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i+1 || j-i-1 > 9 {
			return nil, s, false
		}
	}
	r, ok := new(big.Rat).SetString(s[:j])
	return r, s[j:], ok
}

// toDuration converts a sum of nanoseconds, refusing what overflows and
// any fraction of a nanosecond.
func toDuration(field string, total *big.Rat) (time.Duration, error) {
	if !total.IsInt() {
		return 0, syntaxErr(field, "must be a whole number of nanoseconds")
	}
	n := total.Num()
	if !n.IsInt64() || n.Int64() > math.MaxInt64 {
		return 0, refuseDuration(field, MaxDurationRule)
	}
	return time.Duration(n.Int64()), nil
}
