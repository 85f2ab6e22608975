package duequeue

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 9, 1, 17, 0, 0, 0, time.UTC)

func at(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }

func lessString(a, b string) bool { return a < b }

type visit struct {
	key string
	due time.Time
}

func dueAll(x *Index[string], now time.Time) []visit {
	var out []visit
	x.Due(now, func(k string, d time.Time) bool {
		out = append(out, visit{k, d})
		return true
	})
	return out
}

func TestDueOrderAndTies(t *testing.T) {
	x := New(lessString)
	x.Set("c", at(5))
	x.Set("a", at(5))
	x.Set("b", at(1))
	x.Set("z", at(60))
	x.Set("d", at(3))
	got := dueAll(x, at(5))
	want := []visit{{"b", at(1)}, {"d", at(3)}, {"a", at(5)}, {"c", at(5)}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Due = %v, want %v", got, want)
	}
	if x.Len() != 5 {
		t.Fatalf("Due removed keys: Len = %d", x.Len())
	}
}

func TestSetMovesAndDeleteRemoves(t *testing.T) {
	x := New(lessString)
	x.Set("a", at(10))
	x.Set("b", at(20))
	x.Set("a", at(30)) // move later
	if d, ok := x.Next(); !ok || !d.Equal(at(20)) {
		t.Fatalf("Next = %v %v, want %v", d, ok, at(20))
	}
	x.Set("a", at(1)) // move earlier
	if d, _ := x.Next(); !d.Equal(at(1)) {
		t.Fatalf("Next = %v, want %v", d, at(1))
	}
	if !x.Delete("a") || x.Delete("a") {
		t.Fatal("Delete should report presence once")
	}
	if d, _ := x.Get("b"); !d.Equal(at(20)) {
		t.Fatalf("Get(b) = %v", d)
	}
	if _, ok := x.Get("a"); ok {
		t.Fatal("Get(a) after Delete")
	}
	x.Delete("b")
	if _, ok := x.Next(); ok || x.Len() != 0 {
		t.Fatal("index should be empty")
	}
}

func TestDueStopsEarlyAndNothingDue(t *testing.T) {
	x := New(lessString)
	for i := range 10 {
		x.Set(fmt.Sprintf("k%02d", i), at(i))
	}
	var seen []string
	x.Due(at(100), func(k string, _ time.Time) bool {
		seen = append(seen, k)
		return len(seen) < 3
	})
	if fmt.Sprint(seen) != "[k00 k01 k02]" {
		t.Fatalf("seen %v", seen)
	}
	called := false
	x.Due(at(-1), func(string, time.Time) bool { called = true; return true })
	if called {
		t.Fatal("nothing is due before the first deadline")
	}
}

func TestMutationInsideDuePanics(t *testing.T) {
	x := New(lessString)
	x.Set("a", at(0))
	defer func() {
		if recover() == nil {
			t.Fatal("Set inside Due should panic")
		}
		x.Set("b", at(1)) // usable again after the panic
	}()
	x.Due(at(0), func(string, time.Time) bool { x.Set("b", at(1)); return true })
}

func TestSaturation(t *testing.T) {
	x := New(lessString)
	x.Set("far", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))
	x.Set("old", time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC))
	got := dueAll(x, time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC))
	if len(got) != 1 || got[0].key != "old" {
		t.Fatalf("got %v", got)
	}
}

// reference is the naive second implementation: a slice sorted on demand.
type reference struct{ due map[string]time.Time }

func (r *reference) due0(now time.Time) []visit {
	var out []visit
	for k, d := range r.due {
		if !d.After(now) {
			out = append(out, visit{k, d})
		}
	}
	slices.SortFunc(out, func(a, b visit) int {
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		if a.key < b.key {
			return -1
		}
		if a.key > b.key {
			return 1
		}
		return 0
	})
	return out
}

// check drives an Index and the reference with the same operations, read
// three bytes at a time: operation, key, due minute.
func check(t *testing.T, ops []byte) {
	checkIndex(t, ops, New(lessString))
	slots := map[string]*int32{}
	checkIndex(t, ops, NewWithSlots(lessString, func(k string) *int32 {
		if slots[k] == nil {
			slots[k] = new(int32)
		}
		return slots[k]
	}))
}

func checkIndex(t *testing.T, ops []byte, x *Index[string]) {
	r := &reference{due: map[string]time.Time{}}
	for i := 0; i+2 < len(ops); i += 3 {
		key := fmt.Sprintf("k%d", ops[i+1]%24)
		when := at(int(ops[i+2] % 64))
		switch ops[i] % 4 {
		case 0, 1:
			x.Set(key, when)
			r.due[key] = when
		case 2:
			_, want := r.due[key]
			if got := x.Delete(key); got != want {
				t.Fatalf("op %d: Delete(%s) = %v, want %v", i/3, key, got, want)
			}
			delete(r.due, key)
		case 3:
			got, want := dueAll(x, when), r.due0(when)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("op %d: Due(%v) = %v, want %v", i/3, when, got, want)
			}
		}
		if x.Len() != len(r.due) {
			t.Fatalf("op %d: Len = %d, want %d", i/3, x.Len(), len(r.due))
		}
		all := r.due0(at(1 << 20))
		next, ok := x.Next()
		if ok != (len(all) > 0) || (ok && !next.Equal(all[0].due)) {
			t.Fatalf("op %d: Next = %v %v, want %v", i/3, next, ok, all)
		}
	}
}

func TestAgainstReference(t *testing.T) {
	seed := uint32(1)
	for range 200 {
		ops := make([]byte, 300)
		for i := range ops {
			seed = seed*1664525 + 1013904223
			ops[i] = byte(seed >> 24)
		}
		check(t, ops)
	}
}

func FuzzIndex(f *testing.F) {
	f.Add([]byte{0, 1, 5, 0, 2, 3, 3, 0, 9, 2, 1, 0, 3, 0, 63})
	f.Add([]byte{1, 1, 1, 1, 1, 1, 2, 1, 1, 3, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 3000 {
			ops = ops[:3000]
		}
		check(t, ops)
	})
}

// BenchmarkDueNothing measures the cost of asking a large index whether
// anything is due when nothing is.
func BenchmarkDueNothing(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			x := New(func(a, b int) bool { return a < b })
			for i := range n {
				x.Set(i, at(60+i%1000))
			}
			b.ResetTimer()
			for b.Loop() {
				x.Due(at(0), func(int, time.Time) bool { return true })
			}
		})
	}
}

// BenchmarkSetDelete measures one update on an index of a million keys.
func BenchmarkSetDelete(b *testing.B) {
	const n = 1_000_000
	x := New(func(a, b int) bool { return a < b })
	for i := range n {
		x.Set(i, at(i%100_000))
	}
	i := 0
	for b.Loop() {
		x.Set(i%n, at((i*7919)%100_000))
		i++
	}
}
