package claim

import (
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
