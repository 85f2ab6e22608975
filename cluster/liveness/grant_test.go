package liveness

import (
	"fmt"
	"testing"
	"time"
)

func TestGrantFor(t *testing.T) {
	want := []string{"3.12s", "1.56s", "1s", "1s", "1s", "1s", "1s"}
	for k, w := range want {
		if got := GrantFor(k).String(); got != w {
			t.Errorf("grant %d: %s, want %s", k, got, w)
		}
	}
}

func TestLoadOverloaded(t *testing.T) {
	for _, c := range []struct {
		l    Load
		want string
	}{
		{Load{}, "false "},
		{Load{MemoryUsed: 900, MemoryLimit: 1000}, "false "},
		{Load{MemoryUsed: 901, MemoryLimit: 1000}, "true memory 901 of 1000 bytes, past 90%"},
		{Load{MemoryUsed: 5000}, "false "}, // no limit known
		{Load{DiskFree: DiskFloor, DiskKnown: true}, "false "},
		{Load{DiskFree: DiskFloor - 1, DiskKnown: true}, "true disk free 67108863 bytes, under 67108864"},
		{Load{DiskFree: 0}, "false "}, // unknown disk
	} {
		over, why := c.l.Overloaded()
		if got := fmt.Sprintf("%v %s", over, why); got != c.want {
			t.Errorf("%+v: %q, want %q", c.l, got, c.want)
		}
	}
}

// TestGrantsEveryGrantAndDenial walks one member's requests through every
// grant and every denial, in order: each step's state follows from the
// previous one.
func TestGrantsEveryGrantAndDenial(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	over := Load{MemoryUsed: 95, MemoryLimit: 100}
	g := Grants{}.Baseline(3, 10)
	for i, s := range []struct {
		r    Homework
		want string // denial or grant, then the record after
	}{
		{Homework{Incarnation: 3, Witness: 10, At: at(0)}, "witness_unchanged (witness 10, not past 10) used=0"},
		{Homework{Incarnation: 2, Witness: 99, At: at(0)}, "stale_incarnation (incarnation 2 is below 3) used=0"},
		{Homework{Incarnation: 3, Witness: 11, Load: over, At: at(0)}, "overloaded (memory 95 of 100 bytes, past 90%) used=0"},
		{Homework{Incarnation: 3, Witness: 11, At: at(0)}, "grant 3.12s used=1"},
		{Homework{Incarnation: 3, Witness: 12, At: at(999)}, "too_soon (999ms after the previous grant, under 1s) used=1"},
		{Homework{Incarnation: 3, Witness: 11, At: at(1000)}, "witness_unchanged (witness 11, not past 11) used=1"},
		{Homework{Incarnation: 3, Witness: 12, At: at(1000)}, "grant 1.56s used=2"},
		{Homework{Incarnation: 3, Witness: 13, At: at(2000)}, "grant 1s used=3"},
		{Homework{Incarnation: 3, Witness: 14, At: at(3000)}, "grant 1s used=4"},
		{Homework{Incarnation: 3, Witness: 15, Load: Load{DiskFree: 1, DiskKnown: true}, At: at(4000)}, "overloaded (disk free 1 bytes, under 67108864) used=4"},
		{Homework{Incarnation: 3, Witness: 15, At: at(4000)}, "grant 1s used=5"},
		{Homework{Incarnation: 3, Witness: 16, At: at(5000)}, "exhausted (5 grants used at incarnation 3) used=5"},
		{Homework{Incarnation: 3, Witness: 99, At: at(9000)}, "exhausted (5 grants used at incarnation 3) used=5"},
		// A new incarnation starts the allowance again.
		{Homework{Incarnation: 4, Witness: 1, At: at(9001)}, "grant 3.12s used=1"},
		{Homework{Incarnation: 4, Witness: 2, At: at(9500)}, "too_soon (499ms after the previous grant, under 1s) used=1"},
		{Homework{Incarnation: 3, Witness: 50, At: at(20000)}, "stale_incarnation (incarnation 3 is below 4) used=1"},
	} {
		var d Decision
		g, d = g.Decide(s.r, ProbePeriod)
		got := fmt.Sprintf("grant %v used=%d", d.Grant, g.Used)
		if d.Denial != Granted {
			got = fmt.Sprintf("%s (%s) used=%d", d.Denial, d.Detail, g.Used)
		}
		if got != s.want {
			t.Fatalf("step %d %+v: %s, want %s", i, s.r, got, s.want)
		}
	}
}

// TestGrantsDenialsExhaustive tries every combination of the request's
// conditions on a record with one grant given and checks the one answer
// each must get, in the order the rules are checked.
func TestGrantsDenialsExhaustive(t *testing.T) {
	t0 := time.Unix(1000, 0)
	base := Grants{Incarnation: 5, Used: 1, Witness: 20, Last: t0}
	for _, stale := range []bool{false, true} {
		for _, overloaded := range []bool{false, true} {
			for _, exhausted := range []bool{false, true} {
				for _, unchanged := range []bool{false, true} {
					for _, soon := range []bool{false, true} {
						g := base
						if exhausted {
							g.Used = GrantsMax
						}
						r := Homework{Incarnation: 5, Witness: 21, At: t0.Add(ProbePeriod)}
						if stale {
							r.Incarnation = 4
						}
						if overloaded {
							r.Load = Load{DiskFree: 1, DiskKnown: true}
						}
						if unchanged {
							r.Witness = 20
						}
						if soon {
							r.At = t0.Add(ProbePeriod - time.Nanosecond)
						}
						want := Granted
						switch {
						case stale:
							want = DenyStale
						case overloaded:
							want = DenyOverloaded
						case exhausted:
							want = DenyExhausted
						case unchanged:
							want = DenyUnchanged
						case soon:
							want = DenyTooSoon
						}
						after, d := g.Decide(r, ProbePeriod)
						if d.Denial != want {
							t.Errorf("stale=%v overloaded=%v exhausted=%v unchanged=%v soon=%v: %q, want %q", stale, overloaded, exhausted, unchanged, soon, d.Denial, want)
						}
						if want == Granted && (after.Used != g.Used+1 || d.Grant != GrantFor(g.Used) || after.Witness != r.Witness || !after.Last.Equal(r.At)) {
							t.Errorf("grant recorded as %+v, %v", after, d.Grant)
						}
						if want != Granted && after != g {
							t.Errorf("a denial (%s) changed the record: %+v, was %+v", want, after, g)
						}
					}
				}
			}
		}
	}
}

func TestGrantsBaseline(t *testing.T) {
	g := Grants{}.Baseline(1, 5).Baseline(1, 7).Baseline(1, 6)
	if g != (Grants{Incarnation: 1, Witness: 7}) {
		t.Fatalf("baseline: %+v", g)
	}
	g, _ = g.Decide(Homework{Incarnation: 1, Witness: 8}, ProbePeriod)
	if g.Baseline(1, 100).Witness != 8 {
		t.Errorf("a baseline after a grant moved the grant's witness: %+v", g.Baseline(1, 100))
	}
	if g.Baseline(2, 3) != (Grants{Incarnation: 2, Witness: 3}) {
		t.Errorf("a new incarnation's baseline: %+v", g.Baseline(2, 3))
	}
}
