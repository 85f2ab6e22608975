package ledger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/internal/poll"
	"tally/promise"
	"tally/store"
)

// fileLines counts the whole lines in the session's log file.
func fileLines(t *testing.T, l *Ledger) int {
	t.Helper()
	b, err := os.ReadFile(l.Log().Path())
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// holdLock takes the session's file lock as another process would, so the
// writers that come meanwhile queue; the caller releases it (Abort). The
// log it returns says when this process's committer waits for the lock
// (Contended).
func holdLock(t *testing.T, l *Ledger) (*store.Tx, *store.Log) {
	t.Helper()
	other, err := store.Open(l.Dir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	held, err := other.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return held, other
}

// await polls cond until it holds, failing the test after 10s: for the
// state a test means to wait for, where a fixed sleep would only hope.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, 10*time.Second, cond)
}

// A record is in the file before its fsync; nobody reading this process's
// state sees it until the fsync has returned and its writer is acknowledged.
func TestReadersSeeOnlyDurableRecords(t *testing.T) {
	l := open(t, t.TempDir(), testConfig(t0))
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // a failing test ends instead of waiting on the fsync
	l.syncLog = func() error { <-release; return l.log.Sync() }

	submitted := make(chan error, 1)
	go func() {
		_, err := l.Submit(context.Background(), declare("slow", "d"), WriteOptions{Actor: "d"})
		submitted <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for fileLines(t, l) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the line never reached the file")
		}
		time.Sleep(time.Millisecond)
	}
	read := make(chan string, 1)
	go func() { read <- allViews(l, t0) }()
	// The reader waits for the fsync, or (wrongly) has read already.
	for deadline := time.Now().Add(5 * time.Second); l.pipe.ReadersWaiting() == 0 && len(read) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the reader neither waits nor read")
		}
	}
	select {
	case v := <-read:
		t.Fatalf("a reader saw the state before the fsync: %q", v)
	case err := <-submitted:
		t.Fatalf("the writer was acknowledged before the fsync: %v", err)
	default:
	}
	free()
	if err := <-submitted; err != nil {
		t.Fatal(err)
	}
	if v := <-read; !strings.Contains(v, `"id":"slow"`) {
		t.Fatalf("after the fsync the reader does not see the record: %q", v)
	}
}

// When an fsync fails, every writer it covered and every batch written
// after it fails; the file is cut back to the last durable line, the state
// forgets them, and the next write succeeds on a whole log.
func TestFailedFsyncFailsTheRestOfThePipeline(t *testing.T) {
	l := open(t, t.TempDir(), testConfig(t0))
	if _, err := l.Submit(context.Background(), declare("before", "d"), WriteOptions{Actor: "d"}); err != nil {
		t.Fatal(err)
	}
	// Another process holds the file lock while the writers queue, so the
	// first batch is one writer and the rest are decided and written while
	// its fsync is under way: that fsync fails once all of them are in the
	// file.
	held, other := holdLock(t, l)
	const writers = 16
	var once sync.Once
	l.syncLog = func() error {
		failNow := false
		once.Do(func() { failNow = true })
		if !failNow {
			return l.log.Sync()
		}
		deadline := time.Now().Add(5 * time.Second)
		for fileLines(t, l) < 1+writers && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		return errors.New("disk on fire")
	}
	errs := make([]error, writers)
	var wg sync.WaitGroup
	submit := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = l.Submit(context.Background(), declare(fmt.Sprintf("w%d", i), "d"), WriteOptions{Actor: "d"})
		}()
	}
	// The first writer commits alone and waits for the lock; the rest queue
	// behind it.
	submit(0)
	await(t, "the first writer to wait for the file lock", other.Contended)
	for i := 1; i < writers; i++ {
		submit(i)
	}
	await(t, "the writers to queue behind the lock", func() bool { return l.pipe.Queued() == writers-1 })
	held.Abort()
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			if !strings.Contains(err.Error(), "disk on fire") {
				t.Fatalf("unexpected error: %v", err)
			}
			failed++
		}
	}
	if failed < 2 {
		t.Fatalf("%d writers saw the failed fsync; want it and the batches after it to fail", failed)
	}
	t.Logf("%d of %d writers failed with the fsync", failed, writers)
	acked := writers - failed + 1
	if rep := l.Verify(); !rep.Whole() || rep.Lines != uint64(acked) {
		t.Fatalf("verify: %+v; want %d whole lines (the acknowledged ones)", rep, acked)
	}
	views := allViews(l, t0)
	for i, err := range errs {
		if in := strings.Contains(views, fmt.Sprintf(`"id":"w%d"`, i)); in != (err == nil) {
			t.Fatalf("w%d: acknowledged %v, in the state %v", i, err == nil, in)
		}
	}
	if _, err := l.Submit(context.Background(), declare("after", "d"), WriteOptions{Actor: "d"}); err != nil {
		t.Fatalf("the write after the failure: %v", err)
	}
	if rep := l.Verify(); !rep.Whole() || rep.Lines != uint64(acked+1) {
		t.Fatalf("verify after: %+v", rep)
	}
	// A fresh open folds exactly what was acknowledged.
	l2 := open(t, l.Dir(), testConfig(t0))
	if got, want := allViews(l2, t0), allViews(l, t0); got != want {
		t.Fatalf("reopened state differs:\n%s\nwant\n%s", got, want)
	}
}

// A process that keeps its pipeline busy still lets another process's
// writer in: it releases the file lock at least every holdMax.
func TestBusyWriterLetsOtherProcessesIn(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir, testConfig(t0)), open(t, dir, testConfig(t0))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				if _, err := a.Submit(context.Background(), declare(fmt.Sprintf("a%d-%d", w, i), "d"), WriteOptions{Actor: "d"}); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	await(t, "the busy process to commit", func() bool { return a.Stats().Commits > 0 })
	start := time.Now()
	for i := 0; i < 5; i++ {
		if _, err := b.Submit(context.Background(), declare(fmt.Sprintf("b%d", i), "d"), WriteOptions{Actor: "d"}); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	cancel()
	wg.Wait()
	if took > 5*time.Second {
		t.Fatalf("5 writes from the other process took %v under load", took)
	}
	if rep := a.Verify(); !rep.Whole() {
		t.Fatalf("verify: %+v", rep)
	}
	// Both see every record once both have caught up.
	if err := a.Refresh(); err != nil {
		t.Fatal(err)
	}
	if err := b.Refresh(); err != nil {
		t.Fatal(err)
	}
	var pa, pb store.Position
	a.ReadAt(func(_ *State, p store.Position) { pa = p })
	b.ReadAt(func(_ *State, p store.Position) { pb = p })
	if pa != pb {
		t.Fatalf("positions differ: %+v vs %+v", pa, pb)
	}
}

// A broken invariant (a panic while deciding) fails that batch only: the
// ledger refolds its state from the log and goes on taking writes.
func TestPanicInACommitFailsOnlyItsBatch(t *testing.T) {
	cfg := testConfig(t0)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	l := open(t, t.TempDir(), cfg)
	if _, err := l.Submit(context.Background(), declare("a", "d"), WriteOptions{Actor: "d"}); err != nil {
		t.Fatal(err)
	}
	boom := &request{decide: func(st *State, now time.Time) ([]pending, []string, error) {
		// Fold a record, then break: the state holds what the log does not.
		ev, _, err := st.Promises.Decide(DefaultConfig().Limits, "d", now, declare("ghost", "d"))
		if err != nil {
			return nil, nil, err
		}
		st.Promises.Apply(promise.Meta{Seq: 99}, &ev)
		panic("boom")
	}}
	if _, err := l.submit(context.Background(), boom); err == nil || !strings.Contains(err.Error(), "internal error") {
		t.Fatalf("err = %v", err)
	}
	if _, err := l.Submit(context.Background(), declare("b", "d"), WriteOptions{Actor: "d"}); err != nil {
		t.Fatalf("the write after the panic: %v", err)
	}
	views := allViews(l, t0)
	if !strings.Contains(views, `"id":"a"`) || !strings.Contains(views, `"id":"b"`) || strings.Contains(views, "ghost") {
		t.Fatalf("state after the panic:\n%s", views)
	}
	if rep := l.Verify(); !rep.Whole() || rep.Lines != 2 {
		t.Fatalf("verify: %+v", rep)
	}
}

// A write's Render runs as the write is decided: it sees the write's own
// record, and Execute returns what it made without a second look at the
// state (which would wait for every batch decided since).
func TestRenderSeesTheWritesOwnRecord(t *testing.T) {
	l := open(t, t.TempDir(), testConfig(t0))
	render := func(st *State, res []Result) []byte {
		p, ok := st.Promises.Get(res[0].Event.ID)
		if !ok {
			return []byte("missing")
		}
		v := st.Promises.View(p, t0)
		return v.AppendJSON(nil)
	}
	_, resp, replayed, err := l.Execute(context.Background(), Command{Promise: declare("r1", "d")}, WriteOptions{Actor: "d", Render: render}, nil)
	if err != nil || replayed {
		t.Fatal(err, replayed)
	}
	if !strings.Contains(string(resp), `"id":"r1"`) || !strings.Contains(string(resp), `"state":"owed"`) {
		t.Fatalf("response %s", resp)
	}
	// A refused write renders nothing.
	_, resp, _, err = l.Execute(context.Background(), Command{Promise: declare("r1", "d")}, WriteOptions{Actor: "d", Render: render}, nil)
	if err == nil || resp != nil {
		t.Fatalf("refused write: %v %s", err, resp)
	}
}

// A batch that breaks after appending lines, while earlier batches wait in
// the buffer for the running fsync, leaves none of its lines behind: the
// earlier batches are written and acknowledged, the broken one is not.
func TestPanicAfterAppendingLeavesNoLine(t *testing.T) {
	cfg := testConfig(t0)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.BatchMax = 1 // one request a batch
	l := open(t, t.TempDir(), cfg)
	held, other := holdLock(t, l)
	gate := make(chan struct{})
	var once sync.Once
	l.syncLog = func() error {
		once.Do(func() { <-gate }) // the first fsync waits while the next batches are decided
		return l.log.Sync()
	}
	errs := make(map[string]error)
	var mu sync.Mutex
	var wg sync.WaitGroup
	queued := 0
	submit := func(name string, req func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := req()
			mu.Lock()
			errs[name] = err
			mu.Unlock()
		}()
		// Queue in this order: the first is the committer's batch, waiting
		// for the lock; each after it waits in the queue.
		if queued == 0 {
			await(t, name+" to wait for the file lock", other.Contended)
		} else {
			await(t, name+" to queue", func() bool { return l.pipe.Queued() == queued })
		}
		queued++
	}
	decl := func(id string) func() error {
		return func() error {
			_, err := l.Submit(context.Background(), declare(id, "d"), WriteOptions{Actor: "d"})
			return err
		}
	}
	submit("a", decl("a"))
	submit("b", decl("b"))
	submit("boom", func() error {
		_, err := l.submit(context.Background(), &request{decide: func(*State, time.Time) ([]pending, []string, error) {
			// A record that is appended and then does not fold: a broken invariant.
			return []pending{{typ: TypeRequest, body: []byte(`{"ts":"2026-09-01T12:00:00Z","type":7}`)}}, nil, nil
		}})
		return err
	})
	submit("c", decl("c"))
	held.Abort()
	// The broken batch fails while the first fsync still waits, after the
	// batch before it was decided into the buffer.
	await(t, "the broken batch to fail", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return errs["boom"] != nil
	})
	close(gate)
	wg.Wait()
	if errs["a"] != nil || errs["b"] != nil || errs["boom"] == nil {
		t.Fatalf("errors: %v", errs)
	}
	b, err := os.ReadFile(l.Log().Path())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"type":7`) {
		t.Fatalf("the broken batch's line reached the file:\n%s", b)
	}
	want := uint64(2)
	if errs["c"] == nil {
		want = 3
	}
	if rep := l.Verify(); !rep.Whole() || rep.Lines != want {
		t.Fatalf("verify: %+v, want %d lines (errors %v)", rep, want, errs)
	}
}

// The syncer waits for the writers it acknowledged only until they are
// back, and never longer than twice the fsync it hopes to save, however long
// CohortWait is: writers that stop coming cost at most that. A lone writer
// never waits.
func TestCohortWaitEndsWhenTheWritersAreBack(t *testing.T) {
	cfg := testConfig(t0)
	cfg.CohortWait = 10 * time.Second
	l := open(t, t.TempDir(), cfg)
	start := time.Now()
	for i := 0; i < 20; i++ {
		if _, err := l.Submit(context.Background(), declare(fmt.Sprintf("lone%d", i), "d"), WriteOptions{Actor: "d"}); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a lone writer waited: 20 writes took %v", took)
	}
	const writers, each = 8, 10
	start = time.Now()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := l.Submit(context.Background(), declare(fmt.Sprintf("w%d-%d", w, i), "d"), WriteOptions{Actor: "d"}); err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("%d writes from %d writers took %v", writers*each, writers, took)
	}
	if rep := l.Verify(); !rep.Whole() || rep.Lines != 20+writers*each {
		t.Fatalf("verify: %+v", rep)
	}
}

// An id minted outside the lock that turns out taken is minted again under
// it: the declaration gets a free id, never a refusal.
func TestMintedIDCollisionIsMintedAgain(t *testing.T) {
	l := open(t, t.TempDir(), testConfig(t0))
	if _, err := l.Submit(context.Background(), declare("pnk_aaaaaa", "d"), WriteOptions{Actor: "d"}); err != nil {
		t.Fatal(err)
	}
	l.spread = func() string { return "pnk_aaaaaa" }
	d := declare("", "d")
	res, err := l.Submit(context.Background(), d, WriteOptions{Actor: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if id := res.Event.ID; id == "pnk_aaaaaa" || !strings.HasPrefix(id, "pnk_") || len(id) != 10 {
		t.Fatalf("minted %q", id)
	}
	if !strings.Contains(string(res.Line), `"id":"`+res.Event.ID+`"`) {
		t.Fatalf("the line does not carry the minted id: %s", res.Line)
	}
	if rep := l.Verify(); !rep.Whole() || rep.Lines != 2 {
		t.Fatalf("verify: %+v", rep)
	}
}

// Readers and writers racing on one ledger never wedge it: a reader that
// found the state ahead of the disk must hear of the fsync that catches it
// up, even when that fsync ends between its check and its wait (a lost
// wake-up left the reader waiting and the committer waiting for it).
func TestReadersAndWritersNeverWedge(t *testing.T) {
	l := open(t, t.TempDir(), testConfig(t0))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && i < 20000; i++ {
				id := fmt.Sprintf("w%d-%d", w, i)
				if _, err := l.Submit(context.Background(), declare(id, "d"), WriteOptions{Actor: "d"}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && i < 200000; i++ {
				l.Read(func(*State) {})
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("readers and writers wedged:\n%s", buf[:n])
	}
}
