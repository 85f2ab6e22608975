package timekeeper

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tally/expect"
	"tally/ledger"
	"tally/ledgerservice"
	"tally/promise"
	"tally/service"
)

var t0 = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable clock for a ledger.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.now = t; c.mu.Unlock() }

// recorder is a sink that keeps what it was given.
type recorder struct {
	mu   sync.Mutex
	keys []string
	docs []map[string]any
	fail int // fail this many deliveries first
}

func (r *recorder) Name() string { return "recorder" }

func (r *recorder) Deliver(_ context.Context, key string, doc []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail > 0 {
		r.fail--
		return fmt.Errorf("refused")
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		return err
	}
	r.keys = append(r.keys, key)
	r.docs = append(r.docs, m)
	return nil
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.keys
	r.keys = nil
	return k
}

type fixture struct {
	t   *testing.T
	dir string
	clk *clock
	l   *ledger.Ledger
	rec *recorder
	w   *Timekeeper
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, dir: t.TempDir(), clk: &clock{now: t0}, rec: &recorder{}}
	f.open()
	return f
}

// open (re)opens the ledger and a fresh timekeeper: a restart.
func (f *fixture) open() {
	f.t.Helper()
	if f.w != nil {
		f.w.Close()
		f.l.Close()
	}
	cfg := ledger.DefaultConfig()
	cfg.Now = f.clk.Now
	l, err := ledger.Open(f.dir, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	wc := DefaultConfig()
	wc.Sinks = []Sink{f.rec}
	w, err := New(context.Background(), ledgerservice.OneSession(l, ledgerservice.Config{}), service.Call{Tenant: "acme", Session: "main"}, wc)
	if err != nil {
		f.t.Fatal(err)
	}
	f.l, f.w = l, w
	f.t.Cleanup(func() { w.Close(); l.Close() })
}

func (f *fixture) sweepAt(at time.Time) Report {
	f.t.Helper()
	f.clk.Set(at)
	rep, err := f.w.Sweep(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	return rep
}

func (f *fixture) promise(cmd promise.Command, actor string) {
	f.t.Helper()
	if _, err := f.l.Submit(context.Background(), cmd, ledger.WriteOptions{Actor: actor}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) logBytes() []byte {
	f.t.Helper()
	b, err := os.ReadFile(f.l.Log().Path())
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

func want(t *testing.T, got []string, keys ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(keys) {
		t.Fatalf("delivered %v, want %v", got, keys)
	}
}

func TestLadderEachRungOnceAcrossRestarts(t *testing.T) {
	f := newFixture(t)
	deadline := t0.Add(time.Hour)
	f.promise(promise.Declare{ID: "p1", Text: "ship", By: "debtor", To: "creditor", Until: deadline}, "debtor")
	before := f.logBytes()

	f.sweepAt(deadline)
	want(t, f.rec.take()) // at the deadline itself nothing is late yet
	f.sweepAt(deadline.Add(time.Second))
	want(t, f.rec.take(), "ntc:p1:h1:r0")
	f.sweepAt(deadline.Add(2 * time.Second))
	want(t, f.rec.take())
	f.open() // restart
	f.sweepAt(deadline.Add(3 * time.Second))
	want(t, f.rec.take())
	f.sweepAt(deadline.Add(15*time.Minute + time.Second))
	want(t, f.rec.take(), "ntc:p1:h1:r1")
	f.open()
	f.sweepAt(deadline.Add(31 * time.Minute))
	want(t, f.rec.take(), "ntc:p1:h1:r2", "ntc:p1:h1:r3")
	last := f.rec.docs[len(f.rec.docs)-1]
	if last["to"] != "creditor" || last["recipient"] != "creditor" || f.rec.docs[0]["recipient"] != "debtor" {
		t.Fatalf("recipients: first %v, last %v", f.rec.docs[0], last)
	}
	f.open()
	f.sweepAt(deadline.Add(5 * time.Hour))
	want(t, f.rec.take())
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a sweep over promises changed the ledger's bytes")
	}

	// An amend starts a fresh ladder for the new horizon.
	f.clk.Set(deadline.Add(5 * time.Hour))
	f.promise(promise.Amend{ID: "p1", Until: deadline.Add(6 * time.Hour)}, "debtor")
	f.sweepAt(deadline.Add(5*time.Hour + time.Minute))
	want(t, f.rec.take())
	f.sweepAt(deadline.Add(6*time.Hour + time.Second))
	want(t, f.rec.take(), "ntc:p1:h2:r0")
	// A resolve stops the notices at once.
	f.promise(promise.Resolve{ID: "p1", As: promise.AsSatisfied, Evidence: []string{"https://example.org/p1"}}, "debtor")
	f.sweepAt(deadline.Add(8 * time.Hour))
	want(t, f.rec.take())
	f.open()
	f.sweepAt(deadline.Add(9 * time.Hour))
	want(t, f.rec.take())
}

func TestLadderLateWatcherSendsMissedRungsOnce(t *testing.T) {
	f := newFixture(t)
	f.promise(promise.Declare{ID: "p1", Text: "ship", By: "d", To: "c", Until: t0.Add(time.Hour)}, "d")
	f.sweepAt(t0.Add(48 * time.Hour))
	want(t, f.rec.take(), "ntc:p1:h1:r0", "ntc:p1:h1:r1", "ntc:p1:h1:r2", "ntc:p1:h1:r3")
	f.sweepAt(t0.Add(49 * time.Hour))
	want(t, f.rec.take())
}

func TestLadderConditionalWaitsForAntecedent(t *testing.T) {
	f := newFixture(t)
	f.promise(promise.Declare{ID: "a", Text: "first", By: "d", To: "c", Until: t0.Add(10 * time.Hour)}, "d")
	f.promise(promise.Declare{ID: "b", Text: "then", By: "d", To: "c", On: "a", Until: t0.Add(time.Hour)}, "d")
	f.sweepAt(t0.Add(2 * time.Hour))
	want(t, f.rec.take()) // b is conditional: not owed, so not late
	f.clk.Set(t0.Add(3 * time.Hour))
	f.promise(promise.Resolve{ID: "a", As: promise.AsSatisfied, Evidence: []string{"x"}}, "d")
	f.sweepAt(t0.Add(3*time.Hour + time.Second))
	want(t, f.rec.take(), "ntc:b:h1:r0", "ntc:b:h1:r1", "ntc:b:h1:r2", "ntc:b:h1:r3")
}

func TestFailedDeliveryIsRetriedNextSweep(t *testing.T) {
	f := newFixture(t)
	f.promise(promise.Declare{ID: "p1", Text: "ship", By: "d", To: "c", Until: t0.Add(time.Hour)}, "d")
	f.rec.fail = 1
	rep := f.sweepAt(t0.Add(time.Hour + time.Second))
	if rep.Failed != 1 {
		t.Fatalf("report %+v", rep)
	}
	want(t, f.rec.take())
	f.sweepAt(t0.Add(time.Hour + 2*time.Second))
	want(t, f.rec.take(), "ntc:p1:h1:r0")
}

func raise(id string, due time.Time) expect.RaiseCommand {
	return expect.RaiseCommand{Raise: expect.Raise{
		ExpectationID: id, Kind: "k", Subject: expect.Subject{Type: "s", ID: id},
		FactKey: "done:" + id, DueAt: due, Basis: expect.BasisDeclared,
	}}
}

func TestLapsesCommittedOnceAndDeliveredOnce(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 5; i++ {
		if _, err := f.l.SubmitExpect(context.Background(), raise(fmt.Sprint("e", i), t0.Add(time.Hour)), false, ledger.WriteOptions{Actor: "agent"}); err != nil {
			t.Fatal(err)
		}
	}
	f.rec.fail = 2 // the first two deliveries fail: they wait in the outbox
	rep := f.sweepAt(t0.Add(2 * time.Hour))
	if rep.Lapses != 5 || rep.Delivered != 3 || rep.Failed != 2 {
		t.Fatalf("report %+v", rep)
	}
	got := f.rec.take()
	f.open() // a restart finds the two undelivered lapses in the ledger
	rep = f.sweepAt(t0.Add(3 * time.Hour))
	if rep.Lapses != 0 || rep.Delivered != 2 {
		t.Fatalf("report after restart %+v", rep)
	}
	got = append(got, f.rec.take()...)
	seen := map[string]int{}
	for _, k := range got {
		seen[k]++
	}
	if len(seen) != 5 || len(got) != 5 {
		t.Fatalf("delivered %v", got)
	}
	f.open()
	f.sweepAt(t0.Add(4 * time.Hour))
	want(t, f.rec.take())
}

func TestJournalTornLineTolerated(t *testing.T) {
	dir := t.TempDir()
	j, err := OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(j.Lock(ctx))
	must(j.Record(JournalEntry{Key: "a", Kind: KindLapse, DueAt: t0, SentAt: t0}))
	j.Unlock()
	j.Close()
	// A timekeeper killed mid-write leaves a torn line.
	fh, err := os.OpenFile(filepath.Join(dir, JournalName), os.O_WRONLY|os.O_APPEND, 0)
	must(err)
	_, err = fh.WriteString(`{"key":"b","kind":"la`)
	must(err)
	fh.Close()

	j, err = OpenJournal(dir)
	must(err)
	if !j.Sent("a") || j.Sent("b") {
		t.Fatalf("after a torn line: a %v, b %v", j.Sent("a"), j.Sent("b"))
	}
	must(j.Lock(ctx))
	must(j.Record(JournalEntry{Key: "c", Kind: KindNotice, DueAt: t0, SentAt: t0}))
	j.Unlock()
	j.Close()
	j, err = OpenJournal(dir)
	must(err)
	defer j.Close()
	if !j.Sent("a") || j.Sent("b") || !j.Sent("c") || j.Damaged != 1 || j.Len() != 2 {
		t.Fatalf("reopened: a %v b %v c %v damaged %d len %d", j.Sent("a"), j.Sent("b"), j.Sent("c"), j.Damaged, j.Len())
	}
	b, _ := os.ReadFile(filepath.Join(dir, JournalName))
	if lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[2], `{"key":"c"`) {
		t.Fatalf("journal:\n%s", b)
	}
}

func TestJournalTwoWatchersNeverDoubleSend(t *testing.T) {
	dir := t.TempDir()
	const keys = 200
	var sends [keys]atomic.Int32
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		j, err := OpenJournal(dir) // separate open files: the OS lock separates them
		if err != nil {
			t.Fatal(err)
		}
		defer j.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < keys; k++ {
				key := fmt.Sprint("k", k)
				if err := j.Lock(context.Background()); err != nil {
					t.Error(err)
					return
				}
				if !j.Sent(key) {
					sends[k].Add(1)
					if err := j.Record(JournalEntry{Key: key, Kind: KindLapse}); err != nil {
						t.Error(err)
					}
				}
				j.Unlock()
			}
		}()
	}
	wg.Wait()
	for k := range sends {
		if n := sends[k].Load(); n != 1 {
			t.Fatalf("key %d sent %d times", k, n)
		}
	}
}

func TestWebhookRetriesWithOneIdempotencyKey(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, r.Header.Get(IdempotencyHeader))
		if len(keys) <= 2 {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	var waits []time.Duration
	wh := &Webhook{URL: srv.URL, Attempts: 4, Backoff: 10 * time.Millisecond,
		Sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	if err := wh.Deliver(context.Background(), "lps_1", []byte(`{"kind":"lapse"}`)); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(keys) != "[lps_1 lps_1 lps_1]" || fmt.Sprint(waits) != "[10ms 20ms]" {
		t.Fatalf("keys %v waits %v", keys, waits)
	}
	// Bounded: a server that never recovers fails after Attempts.
	keys = nil
	wh.Attempts = 2
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get(IdempotencyHeader))
		mu.Unlock()
		http.Error(w, "down", http.StatusBadGateway)
	})
	if err := wh.Deliver(context.Background(), "k2", []byte(`{}`)); err == nil || len(keys) != 2 {
		t.Fatalf("err %v after %d attempts", err, len(keys))
	}
}

func TestLadderShape(t *testing.T) {
	got := Ladder([]time.Duration{15 * time.Minute, 30 * time.Minute}, 0)
	if fmt.Sprint(got) != "[{0s debtor} {15m0s debtor} {30m0s debtor} {30m0s creditor}]" {
		t.Fatalf("default ladder %v", got)
	}
	if got := Ladder(nil, time.Hour); fmt.Sprint(got) != "[{0s debtor} {1h0m0s creditor}]" {
		t.Fatalf("ladder %v", got)
	}
	if NoticeKey("p", 2, 1) != "ntc:p:h2:r1" {
		t.Fatal(NoticeKey("p", 2, 1))
	}
}

// FuzzJournal feeds arbitrary bytes as a timekeeper journal: opening it never
// panics or fails, what is not an entry is counted damaged, and an entry
// recorded after it reads back from a fresh open, torn tail or not.
func FuzzJournal(f *testing.F) {
	f.Add([]byte(`{"key":"L1","kind":"lapse","dueAt":"2026-09-01T10:00:00Z","sentAt":"2026-09-01T10:00:01Z"}` + "\n"))
	f.Add([]byte(`{"key":"retry:L2","kind":"lapse","sweeps":3,"next":"2026-09-01T10:05:00Z"}` + "\n" + `{"key":"L2"`))
	f.Add([]byte("not json\n\n{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, JournalName), data, 0o644); err != nil {
			t.Fatal(err)
		}
		j, err := OpenJournal(dir)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		if err := j.Lock(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := j.Record(JournalEntry{Key: "fuzz-check", Kind: "lapse"}); err != nil {
			t.Fatal(err)
		}
		j.Unlock()
		j.Close()
		again, err := OpenJournal(dir)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer again.Close()
		if !again.Sent("fuzz-check") {
			t.Fatal("an entry recorded after arbitrary bytes does not read back")
		}
	})
}

// TestSweepRefusesAnInstantAheadOfTheClock: a timekeeper whose instant a
// caller set (Config.Clock given) sweeps nothing past FutureSkewMax ahead
// of the process's clock: no lapse, no notice, the log as it was; within
// the skew it sweeps.
func TestSweepRefusesAnInstantAheadOfTheClock(t *testing.T) {
	f := newFixture(t)
	deadline := t0.Add(time.Hour)
	f.promise(promise.Declare{ID: "p1", Text: "ship", By: "debtor", To: "creditor", Until: deadline}, "debtor")
	real := t0 // the process's clock stands still at t0
	f.w.cfg.Clock = func() time.Time { return real }
	before := f.logBytes()
	f.clk.Set(deadline.Add(time.Minute))
	_, err := f.w.Sweep(context.Background())
	if err == nil || err.Error() != "now: 2026-09-01T13:01:00Z is later than this process's clock (2026-09-01T12:00:00Z) by more than 5s: the timekeeper records only what has happened (a dry run shows what it would record)" {
		t.Fatalf("sweep ahead of the clock: %v", err)
	}
	want(t, f.rec.take())
	if !bytes.Equal(f.logBytes(), before) || f.w.Journal().Sent("ntc:p1:h1:r0") {
		t.Fatal("the refused sweep recorded something")
	}
	for _, c := range []struct {
		ahead time.Duration
		ok    bool
	}{{0, true}, {FutureSkewMax, true}, {FutureSkewMax + time.Nanosecond, false}, {-time.Hour, true}} {
		if err := CheckNow(real.Add(c.ahead), real); (err == nil) != c.ok {
			t.Errorf("CheckNow %v ahead: %v", c.ahead, err)
		}
	}
	real = deadline.Add(time.Minute)
	f.sweepAt(deadline.Add(time.Minute))
	want(t, f.rec.take(), "ntc:p1:h1:r0")
}
