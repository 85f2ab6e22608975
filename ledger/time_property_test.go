package ledger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"tally/instant"
	"tally/jsonline"
	"tally/promise"
	"tally/store"
)

// randomInstant is uniform over the accepted range (years 0001–9999), kept
// to the microsecond outside the nanosecond band; one time in eight it is
// near a band edge or an end of the range, where a wrong packing shows.
func randomInstant(rng *rand.Rand) time.Time {
	edges := []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC), instant.Max,
		time.Date(instant.BandFirstYear, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(instant.BandLastYear+1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(0, -1<<63).UTC(), time.Unix(0, 1<<63-1).UTC(), // the old int64-nanosecond range
	}
	var t time.Time
	if rng.IntN(8) == 0 {
		e := edges[rng.IntN(len(edges))]
		t = e.Add(time.Duration(rng.Int64N(int64(2*time.Hour))) - time.Hour)
	} else {
		lo, hi := time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC).Unix(), instant.Max.Unix()
		t = time.Unix(lo+rng.Int64N(hi-lo), rng.Int64N(1e9)).UTC()
	}
	if !instant.Representable(t) {
		t = t.Truncate(time.Microsecond)
	}
	if instant.Problem(t) != "" {
		return randomInstant(rng)
	}
	return t
}

// wireString spells t as a client might: UTC, or with an offset when the
// local date stays inside years 0001–9999.
func wireString(rng *rand.Rand, t time.Time) string {
	if y := t.Year(); y > 1 && y < 9999 && rng.IntN(3) == 0 {
		zone := time.FixedZone("", (rng.IntN(28)-14)*3600+rng.IntN(2)*1800)
		return t.In(zone).Format(time.RFC3339Nano)
	}
	return instant.Format(t)
}

// Random instants across the whole accepted range go in as wire strings
// (deadlines and clock times alike), are appended to a real ledger, folded,
// viewed, exported and checkpointed, and come back exactly; every overdue
// answer, from a scan and from the deadline index, is the brute-force one.
func TestPropertyFarInstantsRoundTrip(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	clock := t0
	cfg := DefaultConfig()
	cfg.Now = func() time.Time { return clock }
	cfg.CheckpointMin = 1 << 30 // checkpoints only when the test asks
	l := open(t, dir, cfg)
	ctx := context.Background()

	const n = 300
	until := map[string][]time.Time{}  // id → horizons
	declared := map[string]time.Time{} // id → the clock at declaration
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("p%03d", i)
		clock = randomInstant(rng)
		u := randomInstant(rng)
		parsed, err := promise.ParseDeadline("until", wireString(rng, u), clock)
		if err != nil || !parsed.Equal(u) {
			t.Fatalf("%v parses as %v, %v", u, parsed, err)
		}
		if _, err := l.Submit(ctx, promise.Declare{ID: id, Text: "t", By: "d", To: "c", Until: parsed}, WriteOptions{Actor: "d"}); err != nil {
			t.Fatalf("declare %s until %v: %v", id, u, err)
		}
		ids = append(ids, id)
		declared[id] = clock.Truncate(time.Second) // the ledger stamps whole seconds
		until[id] = []time.Time{u}
		if rng.IntN(3) == 0 {
			a := randomInstant(rng)
			if _, err := l.Submit(ctx, promise.Amend{ID: id, Until: a}, WriteOptions{Actor: "d"}); err != nil {
				t.Fatalf("amend %s until %v: %v", id, a, err)
			}
			until[id] = append(until[id], a)
		}
	}

	// The exported log holds every deadline as written, in UTC.
	var lines []string
	if _, _, err := l.Lines(func(e store.Entry) error {
		lines = append(lines, string(e.Line))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	k := 0
	for _, id := range ids {
		for j, u := range until[id] {
			want := `"until":` + string(jsonline.AppendString(nil, instant.Format(u)))
			if !strings.Contains(lines[k], want) || (j == 0 && !strings.Contains(lines[k], `"ts":`+string(jsonline.AppendString(nil, instant.Format(declared[id]))))) {
				t.Fatalf("line %d: %s, want %s", k+1, lines[k], want)
			}
			k++
		}
	}

	check := func(stage string, l *Ledger) string {
		t.Helper()
		nows := []time.Time{t0, instant.Max, time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC)}
		for i := 0; i < 6; i++ {
			nows = append(nows, randomInstant(rng))
		}
		// Deadlines themselves: overdue is strictly after.
		nows = append(nows, until[ids[0]][len(until[ids[0]])-1], until[ids[1]][len(until[ids[1]])-1].Add(time.Microsecond))
		l.Read(func(st *State) {
			for _, now := range nows {
				var want []string
				for _, id := range ids {
					p, ok := st.Promises.Get(id)
					if !ok {
						t.Fatalf("%s: %s is missing", stage, id)
					}
					v := st.Promises.View(p, now)
					h := until[id]
					if !v.Until.Equal(h[len(h)-1]) || !slices.EqualFunc(v.Horizons, h, time.Time.Equal) || !v.Declared.Equal(declared[id]) {
						t.Fatalf("%s: %s reads until %v, horizons %v, declared %v; want %v, declared %v", stage, id, v.Until, v.Horizons, v.Declared, h, declared[id])
					}
					if got := instant.Format(v.Until); !strings.Contains(string(v.AppendJSON(nil)), `"until":"`+got+`"`) {
						t.Fatalf("%s: %s view JSON lacks its until", stage, id)
					}
					overdue := now.After(h[len(h)-1])
					if v.Overdue != overdue || st.Promises.Overdue(p, now) != overdue {
						t.Fatalf("%s: %s (until %v) overdue at %v = %v, want %v", stage, id, h[len(h)-1], now, v.Overdue, overdue)
					}
					if overdue {
						want = append(want, id)
					}
				}
				// Twice: the first scans, the second uses the deadline index.
				for round := 0; round < 2; round++ {
					var got []string
					for _, v := range st.Promises.Select(promise.Filter{State: "overdue"}, now) {
						got = append(got, v.ID)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("%s: overdue at %v (round %d): %v, want %v", stage, now, round, got, want)
					}
				}
			}
		})
		return allViews(l, t0)
	}
	folded := check("folded", l)
	if err := l.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Log().ReadCheckpoint(); err != nil {
		t.Fatalf("no checkpoint: %v", err)
	}
	fromCP := open(t, dir, cfg)
	if got := check("from the checkpoint", fromCP); got != folded {
		t.Fatal("views from the checkpoint differ from the fold")
	}
	if err := l.Log().RemoveCheckpoint(); err != nil {
		t.Fatal(err)
	}
	if got := check("refolded", open(t, dir, cfg)); got != folded {
		t.Fatal("views refolded from the log differ")
	}
}
