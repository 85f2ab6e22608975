package instant

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"tally/refuse"
)

func mustParse(t *testing.T, v string) time.Time {
	t.Helper()
	x, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestPackBounds(t *testing.T) {
	if got := time.Unix(bandLoSec, 0).UTC(); got != time.Date(BandFirstYear, 1, 1, 0, 0, 0, 0, time.UTC) {
		t.Fatalf("bandLoSec is %v", got)
	}
	if got := time.Unix(bandHiSec, 0).UTC(); got != time.Date(BandLastYear+1, 1, 1, 0, 0, 0, 0, time.UTC) {
		t.Fatalf("bandHiSec is %v", got)
	}
	year0 := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	if p := Pack(Max); p == math.MaxInt64 || !Unpack(p).Equal(Max) {
		t.Fatalf("Pack(Max) = %d → %v", p, Unpack(p))
	}
	if p := Pack(year0); p == math.MinInt64 || !Unpack(p).Equal(year0) {
		t.Fatalf("Pack(year 0) = %d → %v", p, Unpack(p))
	}
	// Beyond the accepted range the form still orders, then saturates.
	for _, y := range []int{10400, -500} {
		x := time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)
		if p := Pack(x); p == math.MaxInt64 || p == math.MinInt64 || !Unpack(p).Equal(x) {
			t.Fatalf("year %d packs as %d", y, p)
		}
	}
	if Pack(time.Date(10600, 1, 1, 0, 0, 0, 0, time.UTC)) != math.MaxInt64 || Pack(time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC)) != math.MaxInt64 {
		t.Fatal("far future does not saturate")
	}
	if Pack(time.Date(-700, 1, 1, 0, 0, 0, 0, time.UTC)) != math.MinInt64 || Pack(time.Date(-300000, 1, 1, 0, 0, 0, 0, time.UTC)) != math.MinInt64 {
		t.Fatal("far past does not saturate")
	}
}

// TestPackExact covers the wire strings of the issue and the band's edges:
// each packs, unpacks to the same instant and formats to the same string.
func TestPackExact(t *testing.T) {
	for _, v := range []string{
		"9999-12-31T00:00:00Z", "9999-12-31T23:59:59.999999Z", "1000-01-01T00:00:00Z",
		"0001-01-01T00:00:00.000001Z", "0001-01-01T00:00:01Z", "1677-09-21T00:12:43Z",
		"1679-12-31T23:59:59.999999Z", "1680-01-01T00:00:00Z", "1680-01-01T00:00:00.000000001Z",
		"1970-01-01T00:00:00Z", "2026-09-01T17:00:00.123456789Z", "2253-12-31T23:59:59.999999999Z",
		"2254-01-01T00:00:00Z", "2262-04-11T23:47:16.854775Z", "2262-04-12T00:00:00Z", "5000-06-15T12:30:45.5Z",
	} {
		x, err := Parse("until", v)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if got := Format(Unpack(Pack(x))); got != v {
			t.Errorf("%s round-trips as %s", v, got)
		}
	}
}

func TestParseRefusals(t *testing.T) {
	for _, c := range []struct{ v, want string }{
		{"0001-01-01T00:00:00Z", "until: " + RangeRule},
		{"0000-06-01T00:00:00Z", "until: " + RangeRule},
		{"9999-12-30T00:00:00.0000001Z", "until: " + PrecisionRule},
		{"9999-12-31T23:59:59.9999999Z", "until: " + RangeRule},
		{"1000-01-01T00:00:00.000000001Z", "until: " + PrecisionRule},
		{"2026-13-01T00:00:00Z", `until: "2026-13-01T00:00:00Z" is not an RFC 3339 time`},
		{"10000-01-01T00:00:00Z", `until: "10000-01-01T00:00:00Z" is not an RFC 3339 time`},
	} {
		_, err := Parse("until", c.v)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q…", c.v, err, c.want)
		}
		if r, ok := refuse.As(err); !ok || r.Code != refuse.Invalid || r.Field != "until" {
			t.Errorf("%s: %#v is not an invalid refusal of until", c.v, err)
		}
	}
}

func TestPackOrderAndAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lo, hi := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), Max.Unix()
	random := func() time.Time {
		x := time.Unix(lo+rng.Int64N(hi-lo), rng.Int64N(1e9)).UTC()
		if !Representable(x) {
			x = x.Truncate(time.Microsecond)
		}
		return x
	}
	for i := 0; i < 200000; i++ {
		a, b := random(), random()
		if i%7 == 0 { // near each other, often across a band edge
			b = a.Add(time.Duration(rng.Int64N(int64(time.Hour))) - 30*time.Minute).Truncate(time.Microsecond)
		}
		pa, pb := Pack(a), Pack(b)
		if !Unpack(pa).Equal(a) {
			t.Fatalf("%v unpacks as %v", a, Unpack(pa))
		}
		if (pa < pb) != a.Before(b) || (pa == pb) != a.Equal(b) {
			t.Fatalf("order of %v, %v: packed %d, %d", a, b, pa, pb)
		}
		d := time.Duration(rng.Int64N(int64(100 * 365 * day)))
		sum := a.Add(d)
		if sum.After(Max) {
			continue
		}
		got := Unpack(Add(pa, d))
		if Representable(sum) && !got.Equal(sum) {
			t.Fatalf("Add(%v, %v) = %v, want %v", a, d, got, sum)
		}
		if !Representable(sum) && (got.Before(sum) || got.Sub(sum) >= time.Microsecond) {
			t.Fatalf("Add(%v, %v) = %v, not the next microsecond after %v", a, d, got, sum)
		}
	}
}

func TestDeadline(t *testing.T) {
	now := mustParse(t, "2026-09-01T17:00:00.5Z")
	for _, c := range []struct{ v, want string }{
		{"90m", "2026-09-01T18:30:00Z"},
		{"2h", "2026-09-01T19:00:00Z"},
		{"3d", "2026-09-04T17:00:00Z"},
		{"1d12h", "2026-09-03T05:00:00Z"},
		{"1w", "2026-09-08T17:00:00Z"},
		{"PT6H", "2026-09-01T23:00:00Z"},
		{"P1D", "2026-09-02T17:00:00Z"},
		{"P1W", "2026-09-08T17:00:00Z"},
		{"P1DT2H", "2026-09-02T19:00:00Z"},
		{"PT1.5S", "2026-09-01T17:00:02Z"},
		{"106751d", "2318-12-11T17:00:00Z"},
		{"9999-12-31T00:00:00Z", "9999-12-31T00:00:00Z"},
		{"2026-09-01T19:00:00+02:00", "2026-09-01T17:00:00Z"},
	} {
		got, err := Deadline("until", c.v, now)
		if err != nil || Format(got) != c.want {
			t.Errorf("%s: got %v, %v; want %s", c.v, Format(got), err, c.want)
		}
	}
	for _, c := range []struct{ v, want string }{
		{"-2h", `until: a duration counts forward: "-2h" is negative`},
		{"0s", "until: a duration from now counts forward: must be at least 1s"},
		{"PT0S", "until: a duration from now counts forward: must be at least 1s"},
		{"PT0.5S", "until: a duration from now counts forward: must be at least 1s"},
		{"106752d", "until: " + MaxDurationRule},
		{"300y", `until: "300y" is neither RFC 3339 (2026-09-01T17:00:00Z) nor a duration from now (` + DurationForms + ")"},
		{"P1Y", `until: "P1Y" is neither RFC 3339`},
		{"P1M", `until: "P1M" is neither RFC 3339`},
		{"soon", `until: "soon" is neither RFC 3339`},
		{"2026-09-01", `until: "2026-09-01" is not an RFC 3339 time`},
		{"", "until: required"},
	} {
		_, err := Deadline("until", c.v, now)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q…", c.v, err, c.want)
		}
	}
	late := mustParse(t, "9999-12-30T00:00:00Z")
	if _, err := Deadline("until", "2d", late); err == nil || !strings.Contains(err.Error(), "after 9999-12-31") {
		t.Errorf("2d after 9999-12-30: %v", err)
	}
}

func TestParseDurationForms(t *testing.T) {
	for _, c := range []struct {
		v    string
		want time.Duration
	}{
		{"90m", 90 * time.Minute}, {"1h30m", 90 * time.Minute}, {"1.5h", 90 * time.Minute},
		{"3d", 3 * day}, {"1d12h", 36 * time.Hour}, {"2w", 14 * day}, {"1w2d", 9 * day},
		{"300ms", 300 * time.Millisecond}, {"0s", 0}, {"PT0S", 0},
		{"PT6H", 6 * time.Hour}, {"P1D", day}, {"P1W", week}, {"P1DT2H", 26 * time.Hour},
		{"PT1H45M", 105 * time.Minute}, {"P2DT30S", 2*day + 30*time.Second}, {"PT0.5S", 500 * time.Millisecond},
		{"PT0.000000001S", 1}, {"P1W1D", 8 * day}, {"106751d", 106751 * day},
	} {
		got, err := ParseDuration("grace", c.v)
		if err != nil || got != c.want {
			t.Errorf("%s: got %v, %v; want %v", c.v, got, err, c.want)
		}
	}
	for _, v := range []string{"", "P", "PT", "P1", "PT1D", "P1H", "PT1H1H", "PT1M1H", "P1.5D", "PT1.H", "PT.5S",
		"P1Y", "P1M", "-PT1H", "+2h", "2", "2x", "h", "1d-2h", "PT1.0000000001S", "1.5ns", "P1DT"} {
		if d, err := ParseDuration("grace", v); err == nil {
			t.Errorf("%q parsed as %v", v, d)
		} else if r, ok := refuse.As(err); !ok || r.Field != "grace" {
			t.Errorf("%q: %v does not name the field", v, err)
		}
	}
	for _, v := range []string{"2h", "3d", "1w"} {
		if _, err := ParseISODuration("grace", v); err == nil {
			t.Errorf("ParseISODuration accepted %q", v)
		}
	}
}

// FuzzParse checks that every accepted instant is kept exactly: it packs,
// unpacks, formats and parses back to itself, inside the accepted range.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"9999-12-31T00:00:00Z", "1000-01-01T00:00:00Z", "2026-09-01T17:00:00.123456789+02:00",
		"0001-01-01T00:00:00Z", "2262-04-11T23:47:16.854775807Z", "1677-09-21T00:12:43.145224192Z", "2253-12-31T23:59:59.999999999Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		x, err := Parse("t", v)
		if err != nil {
			if _, ok := refuse.As(err); !ok {
				t.Fatalf("%q: %v is not a refusal", v, err)
			}
			return
		}
		if !x.After(None) || x.After(Max) || !Representable(x) {
			t.Fatalf("%q accepted as %v", v, x)
		}
		if !Unpack(Pack(x)).Equal(x) {
			t.Fatalf("%q packs as %v", v, Unpack(Pack(x)))
		}
		y, err := Parse("t", Format(x))
		if err != nil || !y.Equal(x) {
			t.Fatalf("%q: its format %s reads back as %v, %v", v, Format(x), y, err)
		}
	})
}

// FuzzParseDuration checks that a duration is never negative, that the ISO
// reader accepts a subset of the general one with the same value, and that
// Deadline counts forward from now and stays in range.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"90m", "2h", "3d", "1d12h", "1w", "PT6H", "P1D", "P1W", "P1DT2H", "-2h", "PT0.5S", "106752d", "9223372036854775807ns"} {
		f.Add(s)
	}
	now := time.Date(2026, 9, 1, 17, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, err := ParseDuration("d", v)
		if err == nil && d < 0 {
			t.Fatalf("%q is negative: %v", v, d)
		}
		if e, iso := ParseISODuration("d", v); iso == nil && (err != nil || e != d) {
			t.Fatalf("%q: ISO %v, general %v, %v", v, e, d, err)
		}
		if x, err := Deadline("d", v, now); err == nil {
			if !x.After(now) || Problem(x) != "" {
				t.Fatalf("%q: deadline %v", v, x)
			}
		} else if _, ok := refuse.As(err); !ok {
			t.Fatalf("%q: %v is not a refusal", v, err)
		}
	})
}

func TestSince(t *testing.T) {
	now := mustParse(t, "2026-09-01T17:00:00.5Z")
	for _, c := range []struct{ v, want string }{
		{"1h", "2026-09-01T16:00:00Z"}, {"P1D", "2026-08-31T17:00:00Z"}, {"0s", "2026-09-01T17:00:00Z"},
		{"1000-01-01T00:00:00Z", "1000-01-01T00:00:00Z"},
	} {
		got, err := Since("since", c.v, now)
		if err != nil || Format(got) != c.want {
			t.Errorf("%s: got %v, %v; want %s", c.v, Format(got), err, c.want)
		}
	}
	for _, c := range []struct{ v, want string }{
		{"-1h", `since: a duration counts forward`},
		{"soon", `since: "soon" is neither RFC 3339`},
	} {
		if _, err := Since("since", c.v, now); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q…", c.v, err, c.want)
		}
	}
	if _, err := Since("since", "106751d", mustParse(t, "0100-01-01T00:00:00Z")); err == nil || !strings.Contains(err.Error(), "before 0001-01-01") {
		t.Errorf("106751d before year 100: %v", err)
	}
}

func TestSpan(t *testing.T) {
	for _, c := range []struct{ from, to, want string }{
		{"2026-09-01T17:00:00Z", "2026-09-01T23:00:00Z", "PT6H"},
		{"2026-09-01T17:00:00Z", "2026-09-01T18:45:00.25Z", "PT1H45M0.25S"},
		{"2026-09-01T17:00:00.9Z", "2026-09-01T17:00:01.1Z", "PT0.2S"},
		{"2026-09-01T17:00:00Z", "2026-09-01T17:00:00Z", "PT0S"},
		// Beyond time.Duration's 292 years, still exact.
		{"1000-01-01T00:00:00Z", "9999-12-31T00:00:00Z", "PT78892344H"},
		{"0001-01-01T00:00:00.000001Z", "9999-12-31T23:59:59.999999Z", "PT87649415H59M59.999998S"},
	} {
		sec, nsec := Span(mustParse(t, c.from), mustParse(t, c.to))
		if got := FormatISOSpan(sec, nsec); got != c.want {
			t.Errorf("%s → %s: %s, want %s", c.from, c.to, got, c.want)
		}
	}
	if sec, before := RoundSeconds(mustParse(t, "9999-12-31T00:00:00Z"), mustParse(t, "1000-01-01T00:00:00.5Z")); !before || sec != 78892344*3600 {
		t.Errorf("RoundSeconds backwards: %d %v", sec, before)
	}
	for _, d := range []time.Duration{0, time.Nanosecond, 90 * time.Minute, 6*time.Hour + 500*time.Millisecond, 1<<63 - 1} {
		if got, want := FormatISOSpan(int64(d/time.Second), int64(d%time.Second)), d; got == "" || !strings.HasPrefix(got, "PT") {
			t.Errorf("%v: %q", want, got)
		} else if back, err := ParseISODuration("d", got); err != nil || back != d {
			t.Errorf("%v formats as %s, which reads back as %v, %v", d, got, back, err)
		}
	}
}

// TestAppendQuoted: the appended form is Format's string, quoted as JSON
// (and as Go: an RFC 3339 time needs no escape in either).
func TestAppendQuoted(t *testing.T) {
	for _, at := range []time.Time{
		{}, time.Date(2026, 9, 1, 17, 0, 0, 0, time.UTC), time.Date(2026, 9, 1, 17, 0, 0, 123456789, time.UTC),
		time.Date(2026, 9, 1, 19, 0, 0, 500, time.FixedZone("x", 2*3600)), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	} {
		if got, want := string(AppendQuoted([]byte("x"), at)), "x"+strconv.Quote(Format(at)); got != want {
			t.Errorf("%v: %s, want %s", at, got, want)
		}
	}
}

// TestRead pins the rule Read reports, on the fast path's shape and off
// it, and that it agrees with time.Parse and Problem.
func TestRead(t *testing.T) {
	for _, c := range []struct{ v, rule, want string }{
		{"2026-09-01T17:00:00Z", "", "2026-09-01T17:00:00Z"},
		{"2024-02-29T00:00:00Z", "", "2024-02-29T00:00:00Z"},
		{"2026-09-01T17:00:00.5Z", "", "2026-09-01T17:00:00.5Z"},
		{"2026-09-01T19:00:00+02:00", "", "2026-09-01T17:00:00Z"},
		{"2023-02-29T00:00:00Z", SyntaxRule, ""},
		{"2026-13-01T00:00:00Z", SyntaxRule, ""},
		{"2026-09-31T00:00:00Z", SyntaxRule, ""},
		{"2026-09-01T24:00:00Z", SyntaxRule, ""},
		{"2026-09-01 17:00:00Z", SyntaxRule, ""},
		{"", SyntaxRule, ""},
		{"0001-01-01T00:00:00Z", RangeRule, "0001-01-01T00:00:00Z"},
		{"0000-01-01T00:00:00Z", RangeRule, "0000-01-01T00:00:00Z"},
		{"1000-01-01T00:00:00.000000001Z", PrecisionRule, "1000-01-01T00:00:00.000000001Z"},
	} {
		for _, got := range []struct {
			t    time.Time
			rule string
		}{readString(c.v), readBytes(c.v)} {
			if got.rule != c.rule {
				t.Errorf("Read(%q) rule %q, want %q", c.v, got.rule, c.rule)
			}
			if c.want != "" && Format(got.t) != c.want {
				t.Errorf("Read(%q) = %s, want %s", c.v, Format(got.t), c.want)
			}
			if got.t.Location() != time.UTC {
				t.Errorf("Read(%q) in %v, want UTC", c.v, got.t.Location())
			}
		}
	}
}

func readString(v string) (r struct {
	t    time.Time
	rule string
}) {
	r.t, r.rule = Read(v)
	return r
}

func readBytes(v string) (r struct {
	t    time.Time
	rule string
}) {
	r.t, r.rule = Read([]byte(v))
	return r
}

// FuzzRead checks that the fast path accepts exactly what time.Parse does,
// with the same instant, and reports Problem's rule.
func FuzzRead(f *testing.F) {
	for _, s := range []string{"2026-09-01T17:00:00Z", "2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z", "2026-09-01T17:00:60Z",
		"2026-09-01T17:00:00+02:00", "0000-01-01T00:00:00Z", "9999-12-31T23:59:59Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		a, rule := Read(v)
		b, rule2 := Read([]byte(v))
		want, err := time.Parse(time.RFC3339Nano, v)
		switch {
		case rule != rule2 || !a.Equal(b):
			t.Fatalf("%q: string %v %q, bytes %v %q", v, a, rule, b, rule2)
		case err != nil:
			if rule != SyntaxRule || !a.IsZero() {
				t.Fatalf("%q: %v %q, time.Parse %v", v, a, rule, err)
			}
		case !a.Equal(want) || a.Location() != time.UTC || rule != Problem(want):
			t.Fatalf("%q: %v %q, time.Parse %v (%q)", v, a, rule, want, Problem(want))
		}
	})
}

// ReadUTC takes a record's time in UTC only, reporting the other rules
// as Read does.
func TestReadUTC(t *testing.T) {
	for _, c := range []struct{ in, want, rule string }{
		{"2026-09-01T17:00:00Z", "2026-09-01T17:00:00Z", ""},
		{"2026-09-01T17:00:00.5Z", "2026-09-01T17:00:00.5Z", ""},
		{"2026-09-01T19:00:00+02:00", "0001-01-01T00:00:00Z", UTCRule},
		{"yesterday", "0001-01-01T00:00:00Z", UTCRule},
		{"0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z", RangeRule},
	} {
		got, rule := ReadUTC(c.in)
		if got.Format(time.RFC3339Nano) != c.want || rule != c.rule {
			t.Errorf("ReadUTC(%q) = %s %q, want %s %q", c.in, got.Format(time.RFC3339Nano), rule, c.want, c.rule)
		}
	}
}
