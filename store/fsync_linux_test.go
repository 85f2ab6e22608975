package store

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"tally/internal/fsyncbench"
)

// BenchmarkFsyncBesideBusyCPU times a raw 19 KB append + fdatasync (one
// group commit's batch) from a thread pinned to each CPU in turn, with the
// others idle, and then with a goroutine spinning on each CPU in turn and
// the fsyncing thread pinned to the next. On a virtual machine whose disk
// interrupts go to one CPU, an fsync issued from another CPU waits for a
// cross-CPU wake-up, and one issued while the interrupts' CPU is busy waits
// longer still: it shows why a group commit, which keeps the CPUs busy
// around its fsyncs and issues them from whichever thread runs its syncer,
// pays more per fsync than a lone writer. It reports median fsync times.
//
//	go test ./store -run '^$' -bench FsyncBesideBusyCPU -benchtime 800x
func BenchmarkFsyncBesideBusyCPU(b *testing.B) {
	n := runtime.NumCPU()
	if n < 2 {
		b.Skip("needs two CPUs")
	}
	f, err := os.OpenFile(filepath.Join(fsyncbench.Dir(b), "raw.jsonl"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 19000)
	for i := range buf {
		buf[i] = 'x'
	}
	fsyncs := func(cpu, count int) ([]time.Duration, error) {
		out := make(chan []time.Duration, 1)
		errs := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // the thread dies with the goroutine, pinned
			if err := pin(cpu); err != nil {
				errs <- err
				return
			}
			var ts []time.Duration
			for range count {
				if _, err := f.Write(buf); err != nil {
					errs <- err
					return
				}
				start := time.Now()
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					errs <- err
					return
				}
				ts = append(ts, time.Since(start))
			}
			out <- ts
		}()
		select {
		case ts := <-out:
			return ts, nil
		case err := <-errs:
			return nil, err
		}
	}
	times := map[string][]time.Duration{}
	const block = 40
	b.ResetTimer()
	for done := 0; done < b.N; done += block * 2 * n {
		for cpu := range n {
			ts, err := fsyncs(cpu, block)
			if err != nil {
				b.Fatal(err)
			}
			key := "idle_on_cpu" + strconv.Itoa(cpu)
			times[key] = append(times[key], ts...)
		}
		for busy := range n {
			var stop atomic.Bool
			spun := make(chan error, 1)
			go func() {
				runtime.LockOSThread()
				if err := pin(busy); err != nil {
					spun <- err
					return
				}
				for !stop.Load() {
				}
				spun <- nil
			}()
			ts, err := fsyncs((busy+1)%n, block)
			stop.Store(true)
			if err == nil {
				err = <-spun
			}
			if err != nil {
				b.Fatal(err)
			}
			key := "busy_cpu" + strconv.Itoa(busy)
			times[key] = append(times[key], ts...)
		}
	}
	b.StopTimer()
	for key, d := range times {
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds()), key+"_p50_µs")
	}
}

// pin keeps the calling thread (locked to its goroutine) on one CPU.
func pin(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set)
}
