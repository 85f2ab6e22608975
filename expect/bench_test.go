package expect

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

var benchStart = mustTime("2026-09-01T00:00:00Z")

// benchRaise is a realistic open expectation: the draft's example with its
// own ids, subject, fact key, task and context.
func benchRaise(i int) *Raise {
	return &Raise{
		ExpectationID: fmt.Sprintf("exp-%08d", i),
		Kind:          "shipment.arrival",
		Subject:       Subject{Type: "shipment", ID: fmt.Sprintf("PA-%08d", i)},
		Expects:       "an arrival event at DOH",
		FactKey:       fmt.Sprintf("shipment.arrived:PA-%08d", i),
		DueAt:         benchStart.Add(10*24*time.Hour + time.Duration(i)*time.Second),
		Grace:         6 * time.Hour,
		Horizon:       benchStart.Add(30*24*time.Hour + time.Duration(i)*time.Second),
		Basis:         BasisObserved,
		Origin:        Origin{TaskID: fmt.Sprintf("task-%08d", i), ContextID: fmt.Sprintf("ctx-%08d", i/10)},
		By:            "agent://booking",
	}
}

// buildOpen folds n raises; the first due of them fall due within a day.
func buildOpen(n, due int) *State {
	s := NewState(DefaultConfig())
	for i := range n {
		r := benchRaise(i)
		if i < due {
			r.DueAt = benchStart.Add(time.Duration(i) * time.Millisecond)
			r.Grace = 0
		}
		s.Apply(Meta{Seq: uint64(i + 1), Actor: r.By, TS: benchStart}, Event{TS: benchStart, Type: TypeRaise, Raise: r})
	}
	return s
}

// BenchmarkSweepNothingDue compares a sweep that finds nothing due over
// 1,000 and over 1,000,000 open expectations (goal: ratio ≤ 3).
func BenchmarkSweepNothingDue(b *testing.B) {
	small, large := buildOpen(1_000, 0), buildOpen(1_000_000, 0)
	now := benchStart.Add(24 * time.Hour)
	const reps = 1000
	var smallTime, largeTime time.Duration
	for b.Loop() {
		t := time.Now()
		for range reps {
			if len(small.Sweep(now, 0)) != 0 {
				b.Fatal("something was due")
			}
		}
		smallTime += time.Since(t)
		t = time.Now()
		for range reps {
			if len(large.Sweep(now, 0)) != 0 {
				b.Fatal("something was due")
			}
		}
		largeTime += time.Since(t)
	}
	sweeps := float64(b.N * reps)
	b.ReportMetric(float64(smallTime.Nanoseconds())/sweeps, "ns/sweep@1k")
	b.ReportMetric(float64(largeTime.Nanoseconds())/sweeps, "ns/sweep@1M")
	b.ReportMetric(float64(largeTime)/float64(smallTime), "ratio")
}

// BenchmarkSweepDue measures a sweep that finds 10,000 due lapses among
// 1,000,000 open expectations, per lapse returned.
func BenchmarkSweepDue(b *testing.B) {
	const n, due = 1_000_000, 10_000
	s := buildOpen(n, due)
	now := benchStart.Add(time.Hour)
	for b.Loop() {
		if got := len(s.Sweep(now, due)); got != due {
			b.Fatalf("swept %d, want %d", got, due)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*due), "ns/lapse")
}

// BenchmarkResidentBytesPerOpen reports the heap held per open expectation
// with 1,000,000 open (goal: ≤ 512 B), maps and deadline index included.
func BenchmarkResidentBytesPerOpen(b *testing.B) {
	const n = 1_000_000
	var perOpen float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := buildOpen(n, 0)
		runtime.GC()
		runtime.ReadMemStats(&after)
		if s.index.Len() != n {
			b.Fatalf("index holds %d, want %d", s.index.Len(), n)
		}
		perOpen = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(s)
	}
	b.ReportMetric(perOpen, "B/open")
}
