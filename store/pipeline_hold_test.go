package store

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

// logSize is the size of the log file in dir.
func logSize(t *testing.T, dir string) int64 {
	t.Helper()
	fi, err := os.Stat(LogPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// lockFree reports whether another writer can take the log's lock.
func lockFree(t *testing.T, dir string) bool {
	t.Helper()
	other := openLog(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	tx, err := other.Begin(ctx)
	if err != nil {
		return false
	}
	tx.Abort()
	return true
}

// Holding, writes are settled as they are decided, kept out of the file
// and under one lock until Unhold writes them all; a read in between gets
// them written first; a refusal is settled as one and appends nothing.
func TestPipelineHoldWritesAtUnholdOrForARead(t *testing.T) {
	dir := t.TempDir()
	m := &counter{}
	p := newPipeline(t, testCommitConfig(), openLog(t, dir), m)
	ctx := context.Background()
	if _, err := submitNote(ctx, p, 1); err != nil {
		t.Fatal(err)
	}
	start := logSize(t, dir)

	p.Hold()
	for _, n := range []int{2, 3} {
		if _, err := submitNote(ctx, p, n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := submitNote(ctx, p, -1); !errors.Is(err, errNegative) {
		t.Fatalf("a negative note while holding: %v, want %v", err, errNegative)
	}
	if got := logSize(t, dir); got != start {
		t.Fatalf("holding, the log grew from %d to %d bytes before Unhold or a read", start, got)
	}
	if lockFree(t, dir) {
		t.Fatal("holding, another writer took the log's lock")
	}
	p.Read(func(pos Position) {
		if pos.Seq != 3 || m.sum != 6 {
			t.Fatalf("read at %d with sum %d, want 3 lines summing 6", pos.Seq, m.sum)
		}
	})
	if got := logSize(t, dir); got != p.Durable().Offset || got == start {
		t.Fatalf("after a read the log is %d bytes, durable at %d (was %d): the read did not get the held lines written", got, p.Durable().Offset, start)
	}
	if _, err := submitNote(ctx, p, 4); err != nil {
		t.Fatal(err)
	}
	if err := p.Unhold(); err != nil {
		t.Fatal(err)
	}
	if !lockFree(t, dir) {
		t.Fatal("after Unhold the log's lock is still held")
	}
	if got := logSize(t, dir); got != p.Durable().Offset {
		t.Fatalf("after Unhold the log is %d bytes, durable at %d", got, p.Durable().Offset)
	}
	if st := p.Stats(); st.Appended != 4 || st.Refused != 1 {
		t.Fatalf("stats %+v, want 4 appended and 1 refused", st)
	}
	other := &counter{}
	newPipeline(t, testCommitConfig(), openLog(t, dir), other)
	if other.lines != 4 || other.sum != 10 {
		t.Fatalf("another pipeline folds %d lines summing %d, want 4 summing 10", other.lines, other.sum)
	}
	// Not holding, a write takes the lock and lets go of it again.
	if _, err := submitNote(ctx, p, 5); err != nil {
		t.Fatal(err)
	}
	if !lockFree(t, dir) {
		t.Fatal("a write after Unhold kept the lock")
	}
}
