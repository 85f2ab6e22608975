package promise

import (
	"testing"
	"time"
)

func TestParseTimeAgreesWithTimeParse(t *testing.T) {
	for _, v := range []string{
		"2026-09-01T17:00:00Z", "2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z", "2026-13-01T00:00:00Z",
		"2026-09-31T00:00:00Z", "2026-09-01T24:00:00Z", "2026-09-01T17:60:00Z", "2026-09-01T17:00:60Z",
		"2026-09-01T17:00:00+02:00", "2026-09-01T17:00:00.5Z", "2026-09-01 17:00:00Z", "0000-01-01T00:00:00Z",
	} {
		a, errA := parseTime(v)
		b, errB := time.Parse(time.RFC3339Nano, v)
		if (errA == nil) != (errB == nil) || !a.Equal(b) {
			t.Errorf("%s: fast %v %v, time.Parse %v %v", v, a, errA, b, errB)
		}
	}
}

func FuzzParseTime(f *testing.F) {
	f.Add("2026-09-01T17:00:00Z")
	f.Fuzz(func(t *testing.T, v string) {
		a, errA := parseTime(v)
		b, errB := time.Parse(time.RFC3339Nano, v)
		if (errA == nil) != (errB == nil) || (errA == nil && !a.Equal(b)) {
			t.Fatalf("%q: fast %v %v, time.Parse %v %v", v, a, errA, b, errB)
		}
	})
}
