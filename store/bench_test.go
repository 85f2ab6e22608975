package store

// Figure 1 of issue 2 §6 at the store level: a durable append (one record
// per transaction: lock, catch up, append, write, fdatasync, unlock) against
// a raw write+fdatasync loop of the very same bytes, on the same
// filesystem, measured in the same run and interleaved in blocks so that
// disk noise falls on both sides alike.
//
//	go test ./store -run '^$' -bench DurableAppend -benchtime 4000x
//
// TALLY_BENCH_DIR picks the directory the files go in (default: the
// system temp dir). Benchmarks only run with -bench.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"tally/internal/fsyncbench"
)

// benchStoreBody is a promise declaration the size and shape the CLI writes.
func benchStoreBody(i int) []byte {
	return fmt.Appendf(nil, `{"ts":"2026-09-01T10:%02d:%02dZ","type":"promise","id":"pnk_%06x","promise":"hand back a reviewed schema for ticket %d","by":"team-%02d/reviewer","to":"team-%02d/author","until":"2026-09-%02dT17:00:00Z"}`,
		i/60%60, i%60, i&0xffffff, i, i%37, (i+5)%41, 2+i%27)
}

func BenchmarkDurableAppend(b *testing.B) {
	dir := fsyncbench.Dir(b)
	lg, err := Open(filepath.Join(dir, "session"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer lg.Close()
	raw, err := os.OpenFile(filepath.Join(dir, "raw.jsonl"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()

	ctx := context.Background()
	var pos Position
	noop := func(Entry) error { return nil }
	b.ResetTimer()
	libTime, rawTime, _ := fsyncbench.Interleave(b, raw, 50, func(done, n int, lines [][]byte) [][]byte {
		for i := 0; i < n; i++ {
			tx, err := lg.Begin(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if pos, err = tx.CatchUp(pos, noop); err != nil {
				b.Fatal(err)
			}
			if _, err := tx.Append(Record{Body: benchStoreBody(done + i)}); err != nil {
				b.Fatal(err)
			}
			line := tx.Lines()
			if pos, err = tx.Commit(); err != nil {
				b.Fatal(err)
			}
			lines = append(lines, line)
		}
		return lines
	})
	b.StopTimer()
	libRate := float64(b.N) / libTime.Seconds()
	rawRate := float64(b.N) / rawTime.Seconds()
	b.ReportMetric(float64(libTime.Nanoseconds())/float64(b.N), "store_ns/append")
	b.ReportMetric(libRate, "store_appends/s")
	b.ReportMetric(rawRate, "raw_fsyncs/s")
	b.ReportMetric(libRate/rawRate, "x_raw")
}

// BenchmarkCatchUpEmpty is the cost a writer pays to look for other
// writers' lines when there are none: the common case of every commit.
func BenchmarkCatchUpEmpty(b *testing.B) {
	dir := fsyncbench.Dir(b)
	lg, err := Open(filepath.Join(dir, "session"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer lg.Close()
	tx, err := lg.Begin(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tx.CatchUp(Position{}, func(Entry) error { return nil }); err != nil {
		b.Fatal(err)
	}
	if _, err := tx.Append(Record{Body: benchStoreBody(1)}); err != nil {
		b.Fatal(err)
	}
	pos, err := tx.Commit()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := lg.Scan(pos, func(Entry) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFsyncUnderCPULoad measures what the machine does to an fsync
// when its CPUs are busy: a raw write+fdatasync loop, of one record's bytes
// and of a 64-record batch's, alone and then beside one goroutine that keeps
// a CPU busy, in alternating blocks. A group commit keeps the CPUs busy
// while its fsync runs (writers coming back, the next batch being decided);
// a single writer leaves them idle. Where busy CPUs slow an fsync (a virtual
// disk whose I/O shares the host's cores with the guest's), the ratio of
// figure 2 of issue 2 falls with it. It reports median fsync times.
//
//	go test ./store -run '^$' -bench FsyncUnderCPULoad -benchtime 2000x
func BenchmarkFsyncUnderCPULoad(b *testing.B) {
	dir := fsyncbench.Dir(b)
	f, err := os.OpenFile(filepath.Join(dir, "raw.jsonl"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	const block = 50
	sizes := map[string]int{"line": 300, "batch": 19000}
	times := map[string][]time.Duration{}
	b.ResetTimer()
	for done := 0; done < b.N; done += block {
		for _, busy := range []bool{false, true} {
			for name, size := range sizes {
				buf := bytes.Repeat([]byte{'x'}, size)
				stop := make(chan struct{})
				spun := make(chan struct{})
				if busy {
					go func() {
						defer close(spun)
						for {
							select {
							case <-stop:
								return
							default:
							}
						}
					}()
				}
				key := name
				if busy {
					key += "_busy"
				}
				for i := 0; i < block/4; i++ {
					if _, err := f.Write(buf); err != nil {
						b.Fatal(err)
					}
					start := time.Now()
					if err := syscall.Fdatasync(int(f.Fd())); err != nil {
						b.Fatal(err)
					}
					times[key] = append(times[key], time.Since(start))
				}
				close(stop)
				if busy {
					<-spun
				}
			}
		}
	}
	b.StopTimer()
	median := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds())
	}
	for key, d := range times {
		b.ReportMetric(median(d), key+"_p50_µs")
	}
	b.ReportMetric(median(times["batch_busy"])/median(times["batch"]), "x_batch_busy")
	b.ReportMetric(median(times["batch"])/median(times["line"]), "x_batch_vs_line")
}
