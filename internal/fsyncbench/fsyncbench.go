//go:build linux

// Package fsyncbench is what the durable-write benchmarks of store and
// ledger share: a directory for their files, and the baseline they are
// measured against (the very same lines, each written and fdatasynced
// alone), interleaved with the side measured in blocks so that disk noise
// falls on both alike.
package fsyncbench

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// Dir is a fresh directory for a benchmark's files, removed when it ends:
// under TALLY_BENCH_DIR when set, else the system temp dir.
func Dir(b *testing.B) string {
	b.Helper()
	dir, err := os.MkdirTemp(os.Getenv("TALLY_BENCH_DIR"), "tally-bench-*")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Interleave runs b.N operations in blocks of block. measured carries out n
// operations from the done-th on, appending the lines they wrote to lines
// (empty, its room kept from block to block), and returns them; the raw side
// then writes the same lines to raw, one fdatasync each. The raw side needs
// the lines the measured side wrote, so that side goes first; in odd blocks
// the raw side repeats the previous block's lines first, so that neither
// side always follows the other. It returns the time of each side and the
// bytes the raw side wrote.
func Interleave(b *testing.B, raw *os.File, block int, measured func(done, n int, lines [][]byte) [][]byte) (measuredTime, rawTime time.Duration, size int64) {
	lines := make([][]byte, 0, block)
	for done := 0; done < b.N; {
		n := min(block, b.N-done)
		rawFirst := len(lines) == n && (done/block)%2 == 1
		if rawFirst {
			rawTime += Raw(b, raw, lines, &size)
		}
		start := time.Now()
		lines = measured(done, n, lines[:0])
		measuredTime += time.Since(start)
		if !rawFirst {
			rawTime += Raw(b, raw, lines, &size)
		}
		done += n
	}
	return measuredTime, rawTime, size
}

// Raw is the baseline: it writes each line and fdatasyncs it, adding the
// bytes to size, and returns the time taken.
func Raw(b *testing.B, raw *os.File, lines [][]byte, size *int64) time.Duration {
	start := time.Now()
	for _, line := range lines {
		if _, err := raw.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(raw.Fd())); err != nil {
			b.Fatal(err)
		}
		*size += int64(len(line))
	}
	return time.Since(start)
}
