package raftlog

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// A repeated error is logged once, then counted: the count comes with the
// next other error, or once a minute while it goes on; errors that differ
// only in their file numbers are one error.
func TestRepeatsLogOnceWithACount(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	r := newRepeats(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})))
	r.now = func() time.Time { return now }
	for i := 0; i < 3000; i++ {
		r.errorf(fmt.Sprintf("background error: write /d/raft/%06d.sst: no space left on device", 600000+i))
		now = now.Add(time.Millisecond)
	}
	now = now.Add(time.Minute)
	r.errorf("background error: write /d/raft/700000.sst: no space left on device")
	r.errorf("another error")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		`level=ERROR msg="background error: write /d/raft/600000.sst: no space left on device"`,
		`level=ERROR msg="background error: write /d/raft/700000.sst: no space left on device" repeated=3000 since=1970-01-01T00:16:40.000Z`,
		`level=ERROR msg="another error"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want[i])
		}
	}
}

func TestDigitless(t *testing.T) {
	for in, want := range map[string]string{
		"write 000051.sst: no space": "write #.sst: no space",
		"":                           "",
		"9 of 10":                    "# of #",
	} {
		if got := digitless(in); got != want {
			t.Errorf("digitless(%q) = %q, want %q", in, got, want)
		}
	}
}

// Background work that fails again and again waits longer each time, up
// to backgroundWaitMax, and from the start again once some succeeds.
func TestBackoffDoublesToItsBound(t *testing.T) {
	var waits []time.Duration
	b := &backoff{sleep: func(d time.Duration) { waits = append(waits, d) }}
	for i := 0; i < 12; i++ {
		b.failed()
	}
	b.ok()
	b.failed()
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond,
		320 * time.Millisecond, 640 * time.Millisecond, 1280 * time.Millisecond, 2560 * time.Millisecond, 5 * time.Second, 5 * time.Second, 5 * time.Second,
		10 * time.Millisecond}
	if fmt.Sprint(waits) != fmt.Sprint(want) {
		t.Fatalf("waits %v, want %v", waits, want)
	}
}

// A store opened on a disk that cannot take the flush of what its log
// holds does not spin: pebble's retries wait longer each time, each is
// heard (Options.OnBackgroundError) and logged once with a count; once the
// disk takes writes again the store opens, whole.
func TestOpenOnAFullDiskBacksOff(t *testing.T) {
	mem := vfs.NewMem()
	d, err := Open("/d", Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	// Small batches, which stay in the log and the memtable: the next
	// open flushes them.
	value := bytes.Repeat([]byte("v"), 1<<10)
	for i := 0; i < 2048; i++ {
		b := d.Pebble().NewBatch()
		if err := b.Set([]byte(fmt.Sprintf("s%06d", i)), value, nil); err != nil {
			t.Fatal(err)
		}
		if err := d.Commit(b, i == 2047); err != nil {
			t.Fatal(err)
		}
		b.Close()
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	var full atomic.Bool
	full.Store(true)
	fs := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && strings.HasSuffix(op.Path, ".sst") && (op.Kind == errorfs.OpCreate || op.Kind == errorfs.OpFileWrite) {
			return syscall.ENOSPC
		}
		return nil
	}))
	var heard atomic.Int64
	var logs safeBuffer
	opened := make(chan error, 1)
	var again *DB
	go func() {
		var err error
		again, err = Open("/d", Options{FS: fs, MemTableSize: 1 << 20, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			OnBackgroundError: func(error) { heard.Add(1) }})
		opened <- err
	}()
	// Four failed flushes in a row are at least the three waits between
	// them apart (10, 20 and 40 ms): a store that spun would fail them at
	// once; and they are logged once, with a count to come.
	start := time.Now()
	for deadline := start.Add(20 * time.Second); heard.Load() < 4; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d failed flushes in 20 s, want 4", heard.Load())
		}
	}
	if took := time.Since(start); took < 70*time.Millisecond {
		t.Fatalf("4 failed flushes in %v: no backoff (waits doubling from 10 ms)", took)
	}
	if n := strings.Count(logs.String(), "\n"); n > 2 {
		t.Fatalf("%d log lines for 4 failed flushes:\n%s", n, logs.String())
	}
	full.Store(false)
	select {
	case err := <-opened:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the store did not open once the disk took writes")
	}
	defer again.Close()
	if again.Failed() != nil {
		t.Fatalf("the store opened failed: %v", again.Failed())
	}
	if v, ok, err := again.get([]byte("s002047")); err != nil || !ok || !bytes.Equal(v, value) {
		t.Fatalf("the last write: %v %v", ok, err)
	}
}

// safeBuffer is a buffer written by pebble's goroutines and read by the
// test's.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
