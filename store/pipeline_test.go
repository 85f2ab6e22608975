package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// counter is a Machine as small as one can be: it folds the count and sum
// of the "n" members of note records, and refuses a negative n.
type counter struct {
	lines, sum int
	restored   int // how many times Restore succeeded
}

// note is a request to append one note record with n.
type note struct {
	n    int
	seq  uint64
	err  error
	done chan struct{}
}

func (r *note) Settle(err error, keep bool) {
	if err != nil && (!keep || r.err == nil) {
		r.err = err
	}
	close(r.done)
}

func (r *note) Settled() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

var errNegative = errors.New("n must not be negative")

func (c *counter) Reset() { c.lines, c.sum = 0, 0 }

func (c *counter) Restore(b []byte) error {
	if len(b) != 16 {
		return fmt.Errorf("counter snapshot of %d bytes", len(b))
	}
	c.lines, c.sum = int(binary.BigEndian.Uint64(b)), int(binary.BigEndian.Uint64(b[8:]))
	c.restored++
	return nil
}

func (c *counter) Apply(e Entry) error {
	var n int
	i := bytes.Index(e.Line, []byte(`"n":`))
	if i < 0 {
		return fmt.Errorf("line %d: no n", e.Env.Seq)
	}
	if _, err := fmt.Sscanf(string(e.Line[i+4:]), "%d", &n); err != nil {
		return fmt.Errorf("line %d: %w", e.Env.Seq, err)
	}
	c.lines++
	c.sum += n
	return nil
}

func (c *counter) Decide(tx Appender, batch []Request) (appended, refused int) {
	for _, q := range batch {
		r := q.(*note)
		if r.n < 0 {
			r.err = errNegative
			refused++
			continue
		}
		seq, err := tx.Append(rec(r.n))
		if err != nil {
			r.err = err
			continue
		}
		r.seq = seq
		c.lines++
		c.sum += r.n
		appended++
	}
	return appended, refused
}

func (c *counter) Snapshot(bool) Snapshot {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:], uint64(c.lines))
	binary.BigEndian.PutUint64(b[8:], uint64(c.sum))
	return counterSnapshot(b[:])
}

type counterSnapshot []byte

func (s counterSnapshot) Encode(emit func([]byte) error) error { return emit(s) }
func (s counterSnapshot) Release()                             {}

var (
	_ Machine    = (*counter)(nil)
	_ Snapshot   = counterSnapshot(nil)
	_ Request    = (*note)(nil)
	_ SessionLog = (*faultyLog)(nil)
)

// faultyLog fails its fsyncs while fail is set.
type faultyLog struct {
	*Log
	fail  atomic.Bool
	syncs atomic.Int32
}

func (f *faultyLog) Sync() error {
	f.syncs.Add(1)
	if f.fail.Load() {
		return errors.New("disk on fire")
	}
	return f.Log.Sync()
}

func testCommitConfig() CommitConfig {
	cfg := DefaultCommitConfig()
	cfg.CheckpointMin = 1 << 30
	cfg.LockTimeout = 5 * time.Second
	return cfg
}

// waitQueued waits until the pipeline's committer has taken the first
// writer's request off the queue (it then waits for the file lock another
// process holds) and n more wait queued behind it: writers submitted one
// at a time this way are queued in the order they were submitted.
func waitQueued(t *testing.T, p *Pipeline, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		p.qmu.Lock()
		queued, committing := len(p.queue), p.committing
		p.qmu.Unlock()
		if committing && queued == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writers queued (committing %v), want %d behind the first", queued, committing, n)
		}
	}
}

func newPipeline(t *testing.T, cfg CommitConfig, lg SessionLog, m Machine) *Pipeline {
	t.Helper()
	p, err := NewPipeline(cfg, lg, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// submitNote submits n and waits until it is settled.
func submitNote(ctx context.Context, p *Pipeline, n int) (*note, error) {
	r := &note{n: n, done: make(chan struct{})}
	if err := p.Submit(ctx, r); err != nil {
		return r, err
	}
	<-r.done
	return r, r.err
}

// Concurrent writers share fsyncs; each is told of its own record only
// once it is durable, and another pipeline on the same log folds them all.
func TestPipelineSharesFsyncsAndFoldsInOrder(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	m := &counter{}
	p := newPipeline(t, testCommitConfig(), lg, m)
	const writers, each = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r, err := submitNote(context.Background(), p, w)
				if err == nil && p.Durable().Seq < r.seq {
					err = fmt.Errorf("acknowledged line %d before it was durable (%d)", r.seq, p.Durable().Seq)
				}
				if err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	wantSum := each * (writers - 1) * writers / 2
	p.Read(func(pos Position) {
		if m.lines != writers*each || m.sum != wantSum || pos.Seq != writers*each {
			t.Fatalf("folded %d lines, sum %d at %d; want %d, %d", m.lines, m.sum, pos.Seq, writers*each, wantSum)
		}
	})
	st := p.Stats()
	if st.Appended != writers*each || st.Commits == 0 || st.Commits >= writers*each {
		t.Fatalf("stats %+v: want %d appended in fewer commits", st, writers*each)
	}
	other := &counter{}
	newPipeline(t, testCommitConfig(), openLog(t, dir), other)
	if other.lines != m.lines || other.sum != m.sum {
		t.Fatalf("another pipeline folds %d/%d, this one %d/%d", other.lines, other.sum, m.lines, m.sum)
	}
}

// A full queue makes a writer wait for room until its context ends; it is
// then refused with ErrQueueFull and appends nothing, while the writers
// already queued are all carried through.
func TestPipelineFullQueueWaitsForTheContext(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	cfg := testCommitConfig()
	cfg.QueueMax, cfg.BatchMax = 2, 1
	p := newPipeline(t, cfg, lg, &counter{})
	// Another process holds the file lock: the first writer takes its own
	// request off the queue and waits for the lock; two more fill the queue.
	held, err := openLog(t, dir).Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(held.Abort) // before its log closes, should the test fail first
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, errs[i] = submitNote(context.Background(), p, i)
		}(i)
		waitQueued(t, p, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r, err := submitNote(ctx, p, 99)
	if !errors.Is(err, ErrQueueFull) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "(2 waiting)") {
		t.Fatalf("a writer past a full queue: %v", err)
	}
	if r.Settled() {
		t.Fatal("a request refused at the queue was settled")
	}
	held.Abort()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("queued writer %d: %v", i, err)
		}
	}
	b, err := os.ReadFile(lg.Path())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), "\n") != 3 || bytes.Contains(b, []byte(`"n":99`)) {
		t.Fatalf("log after the refusal:\n%s", b)
	}
}

// When an fsync fails, its writers hear of it once the log is cut back; a
// request its batch refused keeps its refusal; the next write succeeds on
// a whole log.
func TestPipelineFailedFsyncCutsTheLogBack(t *testing.T) {
	dir := t.TempDir()
	lg := &faultyLog{Log: openLog(t, dir)}
	m := &counter{}
	p := newPipeline(t, testCommitConfig(), lg, m)
	if _, err := submitNote(context.Background(), p, 1); err != nil {
		t.Fatal(err)
	}
	held, err := openLog(t, dir).Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(held.Abort) // before its log closes, should the test fail first
	lg.fail.Store(true)
	ns := []int{2, -1, 3}
	errs := make([]error, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Add(1)
		go func(i, n int) {
			defer wg.Done()
			_, errs[i] = submitNote(context.Background(), p, n)
		}(i, n)
		waitQueued(t, p, i)
	}
	held.Abort()
	wg.Wait()
	lg.fail.Store(false)
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "disk on fire") ||
		!errors.Is(errs[1], errNegative) ||
		errs[2] == nil || !strings.Contains(errs[2].Error(), "disk on fire") {
		t.Fatalf("errors after a failed fsync: %v", errs)
	}
	if _, err := submitNote(context.Background(), p, 4); err != nil {
		t.Fatal(err)
	}
	entries, _, torn, err := readAll(t, lg.Log)
	if err != nil || torn != nil || len(entries) != 2 {
		t.Fatalf("log after recovery: %d lines, torn %v, %v", len(entries), torn, err)
	}
	p.Read(func(pos Position) {
		if m.lines != 2 || m.sum != 5 || pos.Seq != 2 {
			t.Fatalf("state after recovery: %d lines, sum %d, at %d", m.lines, m.sum, pos.Seq)
		}
	})
	if st := p.Stats(); st.Refused != 1 || st.Appended != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// A checkpoint is restored by the next pipeline on the log; a damaged one
// is ignored and the log folded instead, to the same state.
func TestPipelineRestoresItsCheckpoint(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	p := newPipeline(t, testCommitConfig(), lg, &counter{})
	for i := 1; i <= 5; i++ {
		if _, err := submitNote(context.Background(), p, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if _, err := submitNote(context.Background(), p, 6); err != nil {
		t.Fatal(err)
	}
	again := &counter{}
	newPipeline(t, testCommitConfig(), openLog(t, dir), again)
	if again.restored != 1 || again.lines != 6 || again.sum != 21 {
		t.Fatalf("from the checkpoint: %+v", again)
	}
	// A checkpoint whose payload does not decode is ignored.
	if err := lg.WriteCheckpoint(Position{}, []byte("short")); err != nil {
		t.Fatal(err)
	}
	folded := &counter{}
	newPipeline(t, testCommitConfig(), openLog(t, dir), folded)
	if folded.restored != 0 || folded.lines != 6 || folded.sum != 21 {
		t.Fatalf("without a usable checkpoint: %+v", folded)
	}
}

// Validate names the field and quotes its value.
func TestCommitConfigValidate(t *testing.T) {
	if err := DefaultCommitConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		change func(*CommitConfig)
		want   string
	}{
		{func(c *CommitConfig) { c.BatchMax = 0 }, "BatchMax 0 must be at least 1"},
		{func(c *CommitConfig) { c.QueueMax = -1 }, "QueueMax -1 must be at least 1"},
		{func(c *CommitConfig) { c.CheckpointMin = 0 }, "CheckpointMin 0 must be at least 1"},
		{func(c *CommitConfig) { c.CohortWait = -time.Millisecond }, "CohortWait -1ms must not be negative"},
		{func(c *CommitConfig) { c.LockTimeout = 0 }, "LockTimeout 0s must be positive"},
	} {
		c := DefaultCommitConfig()
		tc.change(&c)
		if err := c.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("Validate() = %v, want %q", err, tc.want)
		}
		if _, err := NewPipeline(c, openLog(t, t.TempDir()), &counter{}, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewPipeline: %v, want %q", err, tc.want)
		}
	}
}
