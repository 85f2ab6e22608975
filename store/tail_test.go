package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Tail finds the last whole line at or before any end, past a torn tail
// and past a line longer than its first read, and says nothing of the
// chain.
func TestTail(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	var ends []Position
	pos := Position{}
	for i := 0; i < 3; i++ {
		pos = appendN(t, l, pos, 1)
		ends = append(ends, pos)
	}
	long := Record{Body: []byte(`{"type":"note","pad":"` + strings.Repeat("x", 20000) + `"}`)}
	tx, _ := l.Begin(context.Background())
	tx.CatchUp(pos, func(Entry) error { return nil })
	tx.Append(long)
	pos, err := tx.Commit()
	if err != nil {
		t.Fatal(err)
	}
	ends = append(ends, pos)
	f, _ := os.OpenFile(l.Path(), os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte(`{"type":"note","tally":{"v":1,"se`))
	f.Close()

	lf, err := os.Open(l.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	fi, _ := lf.Stat()
	for _, c := range []struct {
		end  int64
		want Position
	}{
		{0, Position{}},
		{ends[0].Offset - 1, Position{}},
		{ends[0].Offset, ends[0]},
		{ends[1].Offset + 5, ends[1]},
		{ends[2].Offset, ends[2]},
		{ends[3].Offset - 1, ends[2]}, // inside the long line
		{ends[3].Offset, ends[3]},
		{fi.Size(), ends[3]}, // the torn tail is not a line
	} {
		got, err := Tail(lf, c.end)
		if err != nil || got != c.want {
			t.Errorf("Tail(%d) = %+v, %v; want %+v", c.end, got, err, c.want)
		}
	}
	// A line whose envelope is damaged is refused, naming where it ends.
	corruptAt(t, l.Path(), func(b []byte) []byte {
		b[bytes.Index(b, []byte(`"hash":"`))+len(`"hash":"`)] = 'z'
		return b
	})
	if _, err := Tail(lf, ends[0].Offset); err == nil {
		t.Fatal("a damaged last line was taken")
	}
}

// Chain verifies a stream of lines as Scan does, and refuses the same
// damage.
func TestChainMatchesScan(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	end := appendN(t, l, Position{}, 5)
	b, _ := os.ReadFile(l.Path())
	ch := ChainFrom(Position{})
	for _, line := range bytes.SplitAfter(b, []byte{'\n'}) {
		if len(line) == 0 {
			continue
		}
		if _, err := ch.Next(line[:len(line)-1]); err != nil {
			t.Fatal(err)
		}
	}
	if ch.Position() != end {
		t.Fatalf("chain ends at %+v, the log at %+v", ch.Position(), end)
	}
	lines := bytes.SplitAfter(b, []byte{'\n'})
	ch = ChainFrom(Position{})
	ch.Next(lines[0][:len(lines[0])-1])
	if _, err := ch.Next(lines[2][:len(lines[2])-1]); err == nil || !strings.Contains(err.Error(), "sequence 3 where 2 was due") {
		t.Fatalf("a skipped line: %v", err)
	}
}

// Settled waits for a writer between its write and its fsync and then
// names the end of what it wrote; it holds the lock only for a stat.
func TestSettledWaitsForTheWriter(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	pos := appendN(t, l, Position{}, 2)
	w := openLog(t, dir) // another writer, as another process would be
	tx, err := w.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tx.CatchUp(pos, func(Entry) error { return nil })
	tx.Append(rec(9))
	written, err := tx.Write() // written, not yet synced: not settled
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan Position, 1)
	go func() {
		p, err := l.Settled(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- p
	}()
	// It waits for the writer's lock, and says so (Contended), or has
	// (wrongly) settled already.
	for deadline := time.Now().Add(10 * time.Second); !w.Contended(); time.Sleep(time.Millisecond) {
		select {
		case p := <-got:
			t.Fatalf("settled at %+v while a write awaited its fsync", p)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("Settled neither waits for the writer nor returns")
		}
	}
	select {
	case p := <-got:
		t.Fatalf("settled at %+v while a write awaited its fsync", p)
	default:
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	tx.Release()
	if p := <-got; p != written {
		t.Fatalf("settled at %+v, want %+v", p, written)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tx, _ = w.Begin(context.Background())
	defer tx.Abort()
	if _, err := l.Settled(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait: %v", err)
	}
}

// WriteLog installs a log whole and refuses a short source.
func TestWriteLog(t *testing.T) {
	src := openLog(t, t.TempDir())
	end := appendN(t, src, Position{}, 3)
	b, _ := os.ReadFile(src.Path())
	dir := filepath.Join(t.TempDir(), "sessions", "acme", "main")
	if err := WriteLog(dir, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, dir)
	if _, pos, torn, err := readAll(t, l); err != nil || torn != nil || pos != end {
		t.Fatalf("installed log reads to %+v (torn %v): %v", pos, torn, err)
	}
	if err := WriteLog(dir, bytes.NewReader(b[:10]), int64(len(b))); err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("a short source: %v", err)
	}
}
