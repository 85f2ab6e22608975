package ledger

// Benchmarks for issue 2 §6 (figures 1, 2, 4 and 6). Each reports its
// figure as a ratio against a baseline measured in the same benchmark, so a
// noisy machine moves both sides together:
//
//	go test ./ledger -run '^$' -bench 'SubmitVsRawFsync' -benchtime 2000x
//	go test ./ledger -run '^$' -bench 'GroupCommit$'     -benchtime 1000x
//	go test ./ledger -run '^$' -bench 'GroupCommitNoDisk' -benchtime 200000x
//	go test ./ledger -run '^$' -bench 'FoldVsJSON'       -benchtime 3x
//	go test ./ledger -run '^$' -bench 'MemoryPerPromise' -benchtime 1x
//
// bench/run.sh runs them all. TALLY_BENCH_DIR picks the directory the
// files go in (default: the system temp dir); TALLY_BENCH_PROMISES sets the
// size of the memory benchmark (default 1,000,000). Nothing here runs
// without -bench.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"tally/instant"
	"tally/internal/fsyncbench"
	"tally/promise"
	"tally/store"
)

func benchConfig() Config {
	cfg := DefaultConfig()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

var benchEpoch = time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)

// benchParty is one of a few hundred identities, as in a busy team.
func benchParty(r *rand.Rand, role string) string {
	return fmt.Sprintf("team-%02d/%s-%03d", r.IntN(20), role, r.IntN(300))
}

// benchDeclare is a declaration command of realistic size.
func benchDeclare(r *rand.Rand, i int) (promise.Declare, string) {
	by := benchParty(r, "agent")
	return promise.Declare{
		Text:  fmt.Sprintf("hand back a reviewed schema for ticket %d", i),
		By:    by,
		To:    benchParty(r, "author"),
		Until: benchEpoch.Add(time.Duration(24+r.IntN(24*30)) * time.Hour),
	}, by
}

// benchEvents yields n promise-family records shaped like a working
// ledger: about 70% declarations (a tenth with an antecedent, a fifth with
// a task, a tenth with meta), 15% amends, 10% resolves, 5% assessments.
// Deadlines fall after `until` except for every overdueEvery-th promise.
func benchEvents(n int, mix bool, fn func(promise.Event)) (promises int) {
	r := rand.New(rand.NewPCG(1, 2))
	var ids []string
	ts := benchEpoch
	for i := 0; i < n; i++ {
		ts = ts.Add(time.Second)
		k := 0
		if mix && len(ids) > 10 {
			k = r.IntN(100)
		}
		switch {
		case k < 70:
			id := fmt.Sprintf("pnk_%06x", len(ids))
			e := promise.Event{TS: ts, Type: promise.TypePromise, ID: id,
				Text: fmt.Sprintf("hand back a reviewed schema for ticket %d", i),
				By:   benchParty(r, "agent"), To: benchParty(r, "author"),
				Until: instant.Format(ts.Add(time.Duration(24+r.IntN(24*30)) * time.Hour))}
			if len(ids) > 0 && r.IntN(10) == 0 {
				e.On = ids[r.IntN(len(ids))]
			}
			if r.IntN(5) == 0 {
				e.Task = fmt.Sprintf("task-%d", r.IntN(1<<20))
			}
			if r.IntN(10) == 0 {
				e.Meta = `{"priority":"high","source":"planner"}`
			}
			ids = append(ids, id)
			fn(e)
		case k < 85:
			fn(promise.Event{TS: ts, Type: promise.TypeAmend, ID: ids[r.IntN(len(ids))], By: benchParty(r, "agent"),
				Until: instant.Format(ts.Add(72 * time.Hour)), Reason: "blocked on review"})
		case k < 95:
			fn(promise.Event{TS: ts, Type: promise.TypeResolve, ID: ids[r.IntN(len(ids))], As: promise.AsSatisfied,
				By: benchParty(r, "agent"), Evidence: []string{fmt.Sprintf("commit:%08x", r.Uint32())}})
		default:
			fn(promise.Event{TS: ts, Type: promise.TypeAssess, ID: ids[r.IntN(len(ids))], State: promise.StateViolated,
				Observer: benchParty(r, "observer"), Note: "late and unannounced"})
		}
	}
	return len(ids)
}

// benchWriteLog writes n records to a session log in dir through the store
// (many records per commit: this is setup, not the thing measured).
func benchWriteLog(b *testing.B, dir string, n int, mix bool) int {
	b.Helper()
	lg, err := store.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer lg.Close()
	var tx *store.Tx
	var pos store.Position
	count := 0
	flush := func() {
		if tx != nil {
			if pos, err = tx.Commit(); err != nil {
				b.Fatal(err)
			}
			tx = nil
		}
	}
	promises := benchEvents(n, mix, func(e promise.Event) {
		if tx == nil {
			if tx, err = lg.Begin(context.Background()); err != nil {
				b.Fatal(err)
			}
			if _, err = tx.CatchUp(pos, func(store.Entry) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := tx.Append(store.Record{Body: e.Encode()}); err != nil {
			b.Fatal(err)
		}
		if count++; count%50000 == 0 {
			flush()
		}
	})
	flush()
	return promises
}

// Figure 1: ledger.Submit of a declaration (decide, append, group commit of
// one, fdatasync) against a raw write+fdatasync loop of the same lines, in
// interleaved blocks on the same filesystem.
func BenchmarkSubmitVsRawFsync(b *testing.B) {
	dir := fsyncbench.Dir(b)
	l, err := Open(filepath.Join(dir, "session"), benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	raw, err := os.OpenFile(filepath.Join(dir, "raw.jsonl"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	r := rand.New(rand.NewPCG(3, 4))
	ctx := context.Background()
	b.ResetTimer()
	libTime, rawTime, size := fsyncbench.Interleave(b, raw, 50, func(done, n int, lines [][]byte) [][]byte {
		for i := 0; i < n; i++ {
			cmd, actor := benchDeclare(r, done+i)
			res, err := l.Submit(ctx, cmd, WriteOptions{Actor: actor})
			if err != nil {
				b.Fatal(err)
			}
			lines = append(lines, append(res.Line, '\n'))
		}
		return lines
	})
	b.StopTimer()
	libRate, rawRate := float64(b.N)/libTime.Seconds(), float64(b.N)/rawTime.Seconds()
	b.ReportMetric(float64(size)/float64(b.N), "B/line")
	b.ReportMetric(libRate, "submits/s")
	b.ReportMetric(rawRate, "raw_fsyncs/s")
	b.ReportMetric(libRate/rawRate, "x_raw")
}

// Figure 2: 64 goroutines calling Submit at once (sharing fsyncs through
// group commit) against one goroutine calling it in a loop, on one ledger,
// alternating the two phases. Each op of b.N is one single-writer submit;
// the concurrent phase carries 16 times as many.
func BenchmarkGroupCommit(b *testing.B) {
	const writers, factor, rounds = 64, 16, 4
	dir := fsyncbench.Dir(b)
	l, err := Open(filepath.Join(dir, "session"), benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	var singleTime, groupTime time.Duration
	var singleOps, groupOps int
	var groupRecords, groupFsyncs uint64
	var groupCPU time.Duration    // the process's CPU time in the 64-way legs
	var latencies []time.Duration // each 64-way submit's
	seq := 0
	b.ResetTimer()
	// The legs alternate in short rounds, so a noisy minute on the shared
	// disk weighs on both alike.
	for round := 0; round < rounds; round++ {
		n := b.N / rounds
		if round == rounds-1 {
			n = b.N - (rounds-1)*(b.N/rounds)
		}
		// Commands are made before the clock starts: the figure is the
		// ledger's, not the load generator's.
		r := rand.New(rand.NewPCG(5, uint64(round)))
		cmds, actors := make([]promise.Declare, n), make([]string, n)
		for i := range cmds {
			cmds[i], actors[i] = benchDeclare(r, seq)
			seq++
		}
		start := time.Now()
		for i := range cmds {
			if _, err := l.Submit(ctx, cmds[i], WriteOptions{Actor: actors[i]}); err != nil {
				b.Fatal(err)
			}
		}
		singleTime += time.Since(start)
		singleOps += n

		per := max(n*factor/writers, 1)
		wcmds, wactors := benchWriters(writers, per, uint64(round))
		before := l.Stats()
		took, elapsed, cpu, err := runWriters(ctx, l, wcmds, wactors)
		if err != nil {
			b.Fatal(err)
		}
		groupTime += elapsed
		groupCPU += cpu
		for _, t := range took {
			latencies = append(latencies, t...)
		}
		groupOps += per * writers
		after := l.Stats()
		groupRecords += after.Appended - before.Appended
		groupFsyncs += after.Commits - before.Commits
	}
	b.StopTimer()
	single, group := float64(singleOps)/singleTime.Seconds(), float64(groupOps)/groupTime.Seconds()
	b.ReportMetric(single, "single_submits/s")
	b.ReportMetric(group, "64way_submits/s")
	b.ReportMetric(float64(groupRecords)/float64(max(groupFsyncs, 1)), "64way_records/fsync")
	b.ReportMetric(group/single, "x_single")
	// The 64 writers are bound by the CPU between fsyncs: what one record
	// costs (user and system, the fsyncs' share included) moves the figure
	// and, unlike the rate, does not follow the disk's minute.
	b.ReportMetric(float64(groupCPU.Nanoseconds())/1000/float64(groupOps), "64way_cpu_us/rec")
	// The tail shows what holds every writer at once (a checkpoint's
	// encoding did, under the session lock).
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)*999/1000].Microseconds())/1000, "64way_p999_ms")
	b.ReportMetric(float64(latencies[len(latencies)-1].Microseconds())/1000, "64way_max_ms")
}

// BenchmarkGroupCommitNoDisk runs the 64 writers of figure 2 with the fsync
// taken out: their rate is the ceiling the CPU sets on group commit, and
// its cost per record is what a change to the write path moves, free of
// the disk's noise. It is not a figure; it is the tool for improving one.
func BenchmarkGroupCommitNoDisk(b *testing.B) {
	const writers = 64
	l, err := Open(filepath.Join(fsyncbench.Dir(b), "session"), benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	l.syncLog = func() error { return nil }
	per := max(b.N/writers, 1)
	wcmds, wactors := benchWriters(writers, per, 9)
	b.ResetTimer()
	_, elapsed, cpu, err := runWriters(context.Background(), l, wcmds, wactors)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	n := per * writers
	b.ReportMetric(float64(n)/elapsed.Seconds(), "submits/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1000/float64(n), "cpu_us/rec")
}

// benchWriters makes per declarations for each of writers concurrent
// writers (and the actor of each), seeded by writer and salt.
func benchWriters(writers, per int, salt uint64) ([][]promise.Declare, [][]string) {
	cmds, actors := make([][]promise.Declare, writers), make([][]string, writers)
	for w := range cmds {
		r := rand.New(rand.NewPCG(uint64(w), salt))
		cmds[w], actors[w] = make([]promise.Declare, per), make([]string, per)
		for i := range cmds[w] {
			cmds[w][i], actors[w][i] = benchDeclare(r, i)
		}
	}
	return cmds, actors
}

// runWriters runs one goroutine a writer, each submitting its commands in
// order, and returns each submit's latency by writer, the leg's wall time
// and the CPU the process used meanwhile.
func runWriters(ctx context.Context, l *Ledger, cmds [][]promise.Declare, actors [][]string) (took [][]time.Duration, elapsed, cpu time.Duration, err error) {
	var wg sync.WaitGroup
	errs := make(chan error, len(cmds))
	took = make([][]time.Duration, len(cmds))
	cpu0 := processCPU()
	start := time.Now()
	for w := range cmds {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			took[w] = make([]time.Duration, 0, len(cmds[w]))
			for i := range cmds[w] {
				t := time.Now()
				if _, err := l.Submit(ctx, cmds[w][i], WriteOptions{Actor: actors[w][i]}); err != nil {
					errs <- err
					return
				}
				took[w] = append(took[w], time.Since(t))
			}
		}(w)
	}
	wg.Wait()
	elapsed, cpu = time.Since(start), processCPU()-cpu0
	close(errs)
	return took, elapsed, cpu, <-errs
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchJSONLine has the fields of a log line, for the baseline decoder.
type benchJSONLine struct {
	TS       string          `json:"ts"`
	Type     string          `json:"type"`
	ID       string          `json:"id"`
	Promise  string          `json:"promise"`
	By       string          `json:"by"`
	To       string          `json:"to"`
	On       string          `json:"on"`
	Until    string          `json:"until"`
	Task     string          `json:"task"`
	As       string          `json:"as"`
	Evidence []string        `json:"evidence"`
	Reason   string          `json:"reason"`
	State    string          `json:"state"`
	Observer string          `json:"observer"`
	Note     string          `json:"note"`
	Meta     json.RawMessage `json:"meta"`
	Tally    struct {
		V      int    `json:"v"`
		Seq    uint64 `json:"seq"`
		Actor  string `json:"actor"`
		Rid    string `json:"rid"`
		Import bool   `json:"import"`
		Hash   string `json:"hash"`
	} `json:"tally"`
}

// Figure 4: the full fold (decode every line and apply it to the state)
// against encoding/json decoding the same lines into a struct with the
// same fields. Two folds are timed: from memory (decode + apply, no chain
// check) and through store.Scan over the file (envelope, sequence and
// BLAKE3 chain verified, then decode + apply). One op is one pass of each
// over all lines; the metrics are per line.
func BenchmarkFoldVsJSON(b *testing.B) {
	n := 200000
	if v, err := strconv.Atoi(os.Getenv("TALLY_BENCH_FOLD_LINES")); err == nil && v > 0 {
		n = v
	}
	dir := filepath.Join(fsyncbench.Dir(b), "session")
	benchWriteLog(b, dir, n, true)
	data, err := os.ReadFile(filepath.Join(dir, "log.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	lg, err := store.Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer lg.Close()

	// Each phase is timed on the wall and in the process's CPU time (which
	// holds better when other work shares the machine), after a GC so that
	// one phase's garbage is not collected on the next one's time.
	var jsonTime, foldTime, scanTime, jsonCPU, foldCPU, scanCPU time.Duration
	phase := func(wall, cpu *time.Duration, run func()) {
		runtime.GC()
		start, cpu0 := time.Now(), processCPU()
		run()
		*wall += time.Since(start)
		*cpu += processCPU() - cpu0
	}
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		phase(&jsonTime, &jsonCPU, func() {
			for _, line := range lines {
				var v benchJSONLine
				if err := json.Unmarshal(line, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
		phase(&foldTime, &foldCPU, func() {
			st := newState(DefaultConfig())
			for i, line := range lines {
				if err := st.apply(store.Entry{Line: line, Env: store.Envelope{Seq: uint64(i + 1)}}); err != nil {
					b.Fatal(err)
				}
			}
		})
		phase(&scanTime, &scanCPU, func() {
			st := newState(DefaultConfig())
			if _, _, err := lg.Scan(store.Position{}, st.apply); err != nil {
				b.Fatal(err)
			}
			if st.Promises.Len() == 0 {
				b.Fatal("nothing folded")
			}
		})
	}
	b.StopTimer()
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*len(lines)) }
	b.ReportMetric(float64(len(data))/float64(len(lines)), "B/line")
	b.ReportMetric(per(jsonTime), "json_ns/line")
	b.ReportMetric(per(foldTime), "fold_ns/line")
	b.ReportMetric(per(scanTime), "scanfold_ns/line")
	b.ReportMetric(per(jsonTime)/per(foldTime), "fold_x_json")
	b.ReportMetric(per(jsonTime)/per(scanTime), "scanfold_x_json")
	b.ReportMetric(per(jsonCPU), "json_cpu_ns/line")
	b.ReportMetric(per(scanCPU), "scanfold_cpu_ns/line")
	b.ReportMetric(per(jsonCPU)/per(foldCPU), "fold_x_json_cpu")
	b.ReportMetric(per(jsonCPU)/per(scanCPU), "scanfold_x_json_cpu")
}

func benchHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Figure 6: heap per open promise with 1,000,000 open promises in the
// state: HeapAlloc after GC with the ledger open, less HeapAlloc before,
// divided by the count; once folded from the log and once loaded from a
// checkpoint. Also reports the two open times.
func BenchmarkMemoryPerPromise(b *testing.B) {
	n := 1000000
	if v, err := strconv.Atoi(os.Getenv("TALLY_BENCH_PROMISES")); err == nil && v > 0 {
		n = v
	}
	dir := filepath.Join(fsyncbench.Dir(b), "session")
	benchWriteLog(b, dir, n, false)
	var foldB, cpB, foldS, cpS float64
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		lg, _ := store.Open(dir, nil)
		lg.RemoveCheckpoint()
		lg.Close()

		measure := func() (perPromise, secs float64) {
			before := benchHeap()
			start := time.Now()
			l, err := Open(dir, benchConfig())
			if err != nil {
				b.Fatal(err)
			}
			secs = time.Since(start).Seconds()
			open := 0
			l.Read(func(st *State) {
				st.Promises.Each(func(p *promise.Promise) bool {
					if st.Promises.Status(p).Open() {
						open++
					}
					return true
				})
			})
			after := benchHeap()
			runtime.KeepAlive(l)
			l.Close()
			return float64(after-before) / float64(open), secs
		}
		// Open with no checkpoint folds the log, then writes one.
		foldB, foldS = measure()
		cpB, cpS = measure()
	}
	b.StopTimer()
	b.ReportMetric(foldB, "B/promise_folded")
	b.ReportMetric(cpB, "B/promise_checkpoint")
	b.ReportMetric(foldS, "s_open_fold")
	b.ReportMetric(cpS, "s_open_checkpoint")
}
