package duequeue

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// Due times across years 1–9999 keep their order and value: two deadlines
// after 2262 used to saturate to one instant and tie, and Get returned the
// saturated time, not the one set.
func TestFarDueTimes(t *testing.T) {
	times := []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC),
		time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1677, 9, 21, 0, 12, 43, 145224000, time.UTC),
		time.Date(1679, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Date(1680, 1, 1, 0, 0, 0, 1, time.UTC),
		t0,
		time.Date(2253, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2254, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2262, 4, 11, 23, 47, 16, 854775000, time.UTC),
		time.Date(2262, 4, 11, 23, 47, 16, 854776000, time.UTC),
		time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 50; round++ {
		x, r := New(lessString), &reference{due: map[string]time.Time{}}
		for i := 0; i < 40; i++ {
			key := fmt.Sprintf("k%d", rng.IntN(20))
			when := times[rng.IntN(len(times))]
			x.Set(key, when)
			r.due[key] = when
			if got, ok := x.Get(key); !ok || !got.Equal(when) {
				t.Fatalf("Get(%s) = %v, want %v", key, got, when)
			}
		}
		for _, now := range times {
			for _, n := range []time.Time{now, now.Add(-time.Microsecond), now.Add(time.Microsecond)} {
				if got, want := dueAll(x, n), r.due0(n); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("Due(%v) = %v, want %v", n, got, want)
				}
			}
		}
	}
}
