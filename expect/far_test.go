package expect

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"tally/instant"
	"tally/refuse"
)

// Expectations due anywhere in years 1–9999 lapse exactly when due + grace
// has passed, in sweeps at increasing nows across the whole range; every
// lapse records the exact due and lapse instants.
func TestPropertyFarDues(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	lo, hi := time.Date(1, 1, 2, 0, 0, 0, 0, time.UTC).Unix(), time.Date(9999, 12, 1, 0, 0, 0, 0, time.UTC).Unix()
	random := func() time.Time {
		x := time.Unix(lo+rng.Int64N(hi-lo), rng.Int64N(1e9)).UTC()
		if !instant.Representable(x) {
			x = x.Truncate(time.Microsecond)
		}
		return x
	}
	h := newHarness(t)
	type exp struct {
		id         string
		due, lapse time.Time
	}
	var all []exp
	for i := 0; i < 120; i++ {
		due := random()
		grace := time.Duration(rng.Int64N(int64(48 * time.Hour))).Truncate(time.Microsecond)
		if i%5 == 0 {
			grace = 0
		}
		id := fmt.Sprintf("e%03d", i)
		h.do(agent, false, tRaise, RaiseCommand{Raise{ExpectationID: id, Kind: "k", Subject: Subject{"t", id},
			FactKey: "f:" + id, DueAt: due, Grace: grace, Basis: BasisDeclared}})
		if v := h.view(id); !v.CurrentDue.Equal(due) {
			t.Fatalf("%s: currentDue %v, want %v", id, v.CurrentDue, due)
		}
		all = append(all, exp{id, due, due.Add(grace)})
	}
	nows := []time.Time{tRaise}
	for i := 0; i < 40; i++ {
		nows = append(nows, random())
	}
	nows = append(nows, time.Unix(0, 0).UTC()) // the epoch is an instant like any other
	for _, e := range all[:5] {                // at and just after lapse instants
		nows = append(nows, e.lapse, e.lapse.Add(time.Microsecond))
	}
	slices.SortFunc(nows, time.Time.Compare)
	lapsed := map[string]bool{}
	for _, now := range nows {
		for _, e := range h.commit(now) {
			l := e.Lapse
			if l == nil || l.Kind != LapseOverdue {
				t.Fatalf("at %v: unexpected %s", now, e.Encode())
			}
			var x exp
			for _, c := range all {
				if c.id == l.ExpectationID {
					x = c
				}
			}
			if lapsed[x.id] || !l.DueAt.Equal(x.due) || !l.LapsedAt.Equal(x.lapse) || !now.After(x.lapse) {
				t.Fatalf("at %v: %s, want due %v lapsed %v", now, e.Encode(), x.due, x.lapse)
			}
			lapsed[x.id] = true
		}
		for _, x := range all {
			if now.After(x.lapse) != lapsed[x.id] {
				t.Fatalf("at %v: %s (lapses at %v) lapsed = %v", now, x.id, x.lapse, lapsed[x.id])
			}
		}
	}
}

func TestFarDueRefusals(t *testing.T) {
	h := newHarness(t)
	raise := func(due time.Time, grace time.Duration) Command {
		return RaiseCommand{Raise{ExpectationID: "e", Kind: "k", Subject: Subject{"t", "1"}, FactKey: "f", DueAt: due, Grace: grace, Basis: BasisDeclared}}
	}
	h.refuse(agent, false, tRaise, raise(mustTime("9999-12-31T23:30:00Z"), time.Hour), refuse.Invalid, "grace")
	h.refuse(agent, false, tRaise, raise(time.Date(9999, 1, 1, 0, 0, 0, 100, time.UTC), 0), refuse.Invalid, "dueAt")
	h.refuse(agent, false, tRaise, raise(mustTime("9000-01-01T00:00:00Z"), time.Nanosecond), refuse.Invalid, "grace")
	h.do(agent, false, tRaise, raise(mustTime("9999-12-31T22:30:00Z"), time.Hour))
	if len(h.lines) != 1 {
		t.Fatalf("refusals appended: %v", h.lines)
	}
}

// The Unix epoch is an instant like any other (the packed form once kept it
// for "none" and refused it): due then, the expectation lapses just after.
func TestEpochDue(t *testing.T) {
	h := newHarness(t)
	epoch := mustTime("1970-01-01T00:00:00Z")
	h.do(agent, false, tRaise, RaiseCommand{Raise{ExpectationID: "e", Kind: "k", Subject: Subject{"t", "1"}, FactKey: "f",
		DueAt: epoch.Add(-time.Hour), Grace: time.Hour, Horizon: epoch, Basis: BasisDeclared}})
	if v := h.view("e"); !v.CurrentDue.Equal(epoch.Add(-time.Hour)) || !v.Horizon.Equal(epoch) {
		t.Fatalf("view: %+v", v)
	}
	if got := lapses(h.commit(epoch)); got != nil {
		t.Fatalf("lapsed at its own instant: %v", got)
	}
	got := lapses(h.commit(epoch.Add(time.Nanosecond)))
	want := []string{"e overdue 1969-12-31T23:00:00Z 1970-01-01T00:00:00Z", "e stalled 1969-12-31T23:00:00Z 1970-01-01T00:00:00Z"}
	if !slices.Equal(got, want) {
		t.Fatalf("lapses %v, want %v", got, want)
	}
}
