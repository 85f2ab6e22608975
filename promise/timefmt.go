package promise

import "time"

// parseTime reads an RFC 3339 time. The shape tally writes
// (2026-09-01T17:00:00Z) is read without time.Parse, which dominates a fold
// otherwise; anything else, or anything the fast path doubts, goes to
// time.Parse, so both paths accept exactly the same inputs.
func parseTime(v string) (time.Time, error) {
	if t, ok := parseCanonical(v); ok {
		return t, nil
	}
	return time.Parse(time.RFC3339Nano, v)
}

// parseCanonical takes the bytes of a line as well as a string, so that the
// fold reads a record's ts without making a string of it.
func parseCanonical[T string | []byte](v T) (time.Time, bool) {
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
