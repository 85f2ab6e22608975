package claim

import (
	"runtime"
	"testing"
	"time"
)

// BenchmarkDecodeLines decodes the wire lines of 2,000 claims of 5 slots × 3
// checks (84,000 lines: creates, artifacts, testaments, check begins and
// verdicts) and reports lines per second. Decode only, no fold.
func BenchmarkDecodeLines(b *testing.B) {
	b.Run("decoder=wire", func(b *testing.B) { benchDecode(b, Decode) })
	b.Run("decoder=encoding-json", func(b *testing.B) { benchDecode(b, decodeJSON) })
}

var decodeLines [][]byte

func benchDecode(b *testing.B, decode func([]byte) (Event, error)) {
	if decodeLines == nil {
		for _, me := range genClaims(2_000) {
			decodeLines = append(decodeLines, me.e.Encode())
		}
	}
	lines := decodeLines
	size := 0
	for _, l := range lines {
		size += len(l)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		for _, line := range lines {
			if _, err := decode(line); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(lines)*b.N)/time.Since(start).Seconds(), "lines/s")
	b.ReportMetric(float64(size)/float64(len(lines)), "B/line")
}

// BenchmarkFold100kClaimLines folds 100,000 claims of 5 slots × 3 checks
// (4.2 million records) from their wire lines, decode and apply, as the
// ledger does when it opens a session, and reports records per second. The
// lines sit in one buffer, so the heap the GC scans is the state's own.
func BenchmarkFold100kClaimLines(b *testing.B) {
	evs := genClaims(100_000)
	buf := make([]byte, 0, 400*len(evs)) // lines are ~376 B: grow once at most
	ends := make([]int, len(evs))
	actors := make([]bool, len(evs)) // true: maintainer, false: parser
	for i := range evs {
		buf = append(buf, evs[i].e.Encode()...)
		ends[i] = len(buf)
		actors[i] = evs[i].m.Actor == maintainer
	}
	evs = nil
	runtime.GC()
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	start := time.Now()
	for it := 0; it < b.N; it++ {
		s := NewState()
		from := 0
		for i, end := range ends {
			e, err := Decode(buf[from:end])
			if err != nil {
				b.Fatal(err)
			}
			from = end
			actor := parser
			if actors[i] {
				actor = maintainer
			}
			s.Apply(Meta{Seq: uint64(i + 1), Actor: actor, TS: t0}, e)
		}
		if _, n := s.Ignored(); n != 0 || s.claims["C99999"].status() != Satisfied {
			b.Fatalf("fold went wrong: %d ignored", n)
		}
	}
	b.ReportMetric(float64(len(ends)*b.N)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64(len(buf))/float64(len(ends)), "B/line")
}
