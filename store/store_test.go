package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func rec(i int) Record {
	return Record{Body: []byte(fmt.Sprintf(`{"ts":"2026-09-01T00:00:00Z","type":"note","n":%d}`, i))}
}

// openLog opens the log in dir for a test and closes it when the test ends.
func openLog(t testing.TB, dir string) *Log {
	t.Helper()
	l, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func appendN(t testing.TB, l *Log, from Position, n int) Position {
	t.Helper()
	tx, err := l.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.CatchUp(from, func(Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := tx.Append(rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	pos, err := tx.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

func readAll(t testing.TB, l *Log) ([]Entry, Position, *Torn, error) {
	var out []Entry
	pos, torn, err := l.Scan(Position{}, func(e Entry) error {
		e.Line = append([]byte(nil), e.Line...)
		out = append(out, e)
		return nil
	})
	return out, pos, torn, err
}

func TestAppendLineWire(t *testing.T) {
	h := newChainHasher()
	line, sum, err := appendLine(nil, h, [32]byte{}, 1, Record{Body: []byte(`{"type":"x"}`), Actor: "a\"b", RequestID: "r1", Import: true})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`{"type":"x","tally":{"v":1,"seq":1,"actor":"a\"b","rid":"r1","import":true,"hash":"%x"}}`+"\n", sum)
	if string(line) != want {
		t.Fatalf("line:\n got %s\nwant %s", line, want)
	}
	env, prefix, err := parseEnvelope(line[:len(line)-1])
	if err != nil || env.Seq != 1 || env.Actor != "a\"b" || env.RequestID != "r1" || !env.Import || env.Hash != sum {
		t.Fatalf("parseEnvelope: %+v %v", env, err)
	}
	if chain(h, [32]byte{}, prefix) != sum {
		t.Fatal("hash does not cover the prefix")
	}
	if got := string(Body(line[:len(line)-1])); got != `{"type":"x"}` {
		t.Fatalf("Body = %s", got)
	}
	// Whitespace inside the record survives the round trip byte for byte.
	line, _, _ = appendLine(nil, h, sum, 2, Record{Body: []byte(`{"type":"x" , "k" : [1, 2] }`)})
	if got := string(Body(line[:len(line)-1])); got != `{"type":"x" , "k" : [1, 2] }` {
		t.Fatalf("Body = %s", got)
	}
	for _, bad := range []string{`[1]`, "{\"a\":\n1}", ``} {
		if _, _, err := appendLine(nil, h, sum, 3, Record{Body: []byte(bad)}); err == nil {
			t.Errorf("appended %q", bad)
		}
	}
}

func TestAppendScanAndChain(t *testing.T) {
	l := openLog(t, t.TempDir())
	pos := appendN(t, l, Position{}, 3)
	pos = appendN(t, l, pos, 2)
	es, end, torn, err := readAll(t, l)
	if err != nil || torn != nil || len(es) != 5 || end != pos || end.Seq != 5 {
		t.Fatalf("scan: %d entries, %+v, torn %v, err %v", len(es), end, torn, err)
	}
	// Resuming a scan from a position reads only what follows it.
	n := 0
	if _, _, err := l.Scan(Position{Offset: int64(len(es[0].Line) + 1), Seq: 1, Hash: es[0].Env.Hash}, func(Entry) error { n++; return nil }); err != nil || n != 4 {
		t.Fatalf("resume: %d, %v", n, err)
	}
}

// A log hands the line buffer of one transaction to the next (a writer that
// locks for every batch would otherwise grow one each time), but never
// what was in it, and not one grown past txBufKeep.
func TestTxReusesItsLineBuffer(t *testing.T) {
	l := openLog(t, t.TempDir())
	pos := appendN(t, l, Position{}, 3)
	tx, err := l.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Abort() // a failed check must not leave the lock held (Close waits for it)
	if len(tx.Lines()) != 0 || cap(tx.Lines()) == 0 {
		t.Fatalf("second tx: buffer len %d cap %d, want empty with the first's capacity", len(tx.Lines()), cap(tx.Lines()))
	}
	if _, err := tx.CatchUp(pos, func(Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Append(rec(7)); err != nil {
		t.Fatal(err)
	}
	tx.Abort() // appended, never written: the next tx must not write it
	pos = appendN(t, l, pos, 1)
	es, end, torn, err := readAll(t, l)
	if err != nil || torn != nil || len(es) != 4 || end != pos {
		t.Fatalf("after an aborted tx: %d lines, %+v, torn %v, err %v", len(es), end, torn, err)
	}

	// A buffer grown past the bound is let go.
	big, err := l.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	big.Grow(txBufKeep + 1)
	big.Abort()
	next, err := l.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer next.Abort()
	if c := cap(next.Lines()); c > txBufKeep {
		t.Fatalf("a %d-byte buffer was kept (bound %d)", c, txBufKeep)
	}
}

func corruptAt(t *testing.T, path string, f func([]byte) []byte) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDamageIsRefusedWithLineNumber(t *testing.T) {
	cases := map[string]func([]byte) []byte{
		"flipped byte": func(b []byte) []byte {
			lines := bytes.SplitAfter(b, []byte{'\n'})
			lines[1][10] ^= 1
			return bytes.Join(lines, nil)
		},
		"deleted line": func(b []byte) []byte {
			lines := bytes.SplitAfter(b, []byte{'\n'})
			return bytes.Join(append(lines[:1], lines[2:]...), nil)
		},
		"swapped lines": func(b []byte) []byte {
			lines := bytes.SplitAfter(b, []byte{'\n'})
			lines[1], lines[2] = lines[2], lines[1]
			return bytes.Join(lines, nil)
		},
		"envelope stripped": func(b []byte) []byte {
			lines := bytes.SplitAfter(b, []byte{'\n'})
			lines[1] = []byte(`{"type":"note"}` + "\n")
			return bytes.Join(lines, nil)
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir)
			appendN(t, l, Position{}, 4)
			corruptAt(t, l.Path(), damage)
			_, _, _, err := readAll(t, l)
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Line != 2 {
				t.Fatalf("want damage at line 2, got %v", err)
			}
			// A writer refuses too, and appends nothing.
			before, _ := os.ReadFile(l.Path())
			tx, _ := l.Begin(context.Background())
			if _, err := tx.CatchUp(Position{}, func(Entry) error { return nil }); !errors.As(err, &ce) {
				t.Fatalf("writer accepted a damaged log: %v", err)
			}
			tx.Abort()
			after, _ := os.ReadFile(l.Path())
			if !bytes.Equal(before, after) {
				t.Fatal("a refused write changed the log")
			}
		})
	}
}

func TestTornTailIsCutOnNextWrite(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	l := openLog(t, dir)
	pos := appendN(t, l, Position{}, 3)
	f, _ := os.OpenFile(l.Path(), os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte(`{"type":"note","n":99,"tally":{"v":1,"se`))
	f.Close()
	es, end, torn, err := readAll(t, l)
	if err != nil || torn == nil || len(es) != 3 || end != pos {
		t.Fatalf("reader: %d entries, torn %v, err %v", len(es), torn, err)
	}
	_ = logs
	pos = appendN(t, l, pos, 1)
	es, _, torn, err = readAll(t, l)
	if err != nil || torn != nil || len(es) != 4 || pos.Seq != 4 {
		t.Fatalf("after the next write: %d entries, torn %v, err %v", len(es), torn, err)
	}
}

func TestConcurrentTransactionsSerialise(t *testing.T) {
	dir := t.TempDir()
	// Two Log values on one directory stand for two processes.
	a, b := openLog(t, dir), openLog(t, dir)
	var wg sync.WaitGroup
	for _, l := range []*Log{a, b, a, b} {
		wg.Add(1)
		go func(l *Log) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				tx, err := l.Begin(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := tx.CatchUp(Position{}, func(Entry) error { return nil }); err != nil {
					t.Error(err)
					tx.Abort()
					return
				}
				tx.Append(rec(i))
				if _, err := tx.Commit(); err != nil {
					t.Error(err)
				}
			}
		}(l)
	}
	wg.Wait()
	es, end, torn, err := readAll(t, a)
	if err != nil || torn != nil || len(es) != 100 || end.Seq != 100 {
		t.Fatalf("%d entries, %v, %v", len(es), torn, err)
	}
}

func TestCheckpointValidation(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	pos := appendN(t, l, Position{}, 5)
	if _, _, err := l.ReadCheckpoint(); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("no checkpoint yet: %v", err)
	}
	if err := l.WriteCheckpoint(pos, []byte("state")); err != nil {
		t.Fatal(err)
	}
	got, payload, err := l.ReadCheckpoint()
	if err != nil || got != pos || string(payload) != "state" {
		t.Fatalf("ReadCheckpoint = %+v %q %v", got, payload, err)
	}
	// A damaged checkpoint file is ignored.
	cp := filepath.Join(dir, checkpointName)
	corruptAt(t, cp, func(b []byte) []byte { b[len(b)/2] ^= 1; return b })
	if _, _, err := l.ReadCheckpoint(); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("damaged checkpoint accepted: %v", err)
	}
	// A checkpoint that does not match the log is ignored.
	bogus := pos
	bogus.Hash[0] ^= 1
	l.WriteCheckpoint(bogus, []byte("state"))
	if _, _, err := l.ReadCheckpoint(); !errors.Is(err, ErrNoCheckpoint) || !strings.Contains(err.Error(), "another line") {
		t.Fatalf("mismatched checkpoint accepted: %v", err)
	}
	bogus = pos
	bogus.Offset -= 3
	l.WriteCheckpoint(bogus, []byte("state"))
	if _, _, err := l.ReadCheckpoint(); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("checkpoint at a non-line offset accepted: %v", err)
	}
}

// A checkpoint larger than the chunk it is written out in, and one that
// ends exactly on a chunk, read back whole.
func TestCheckpointWrittenInChunks(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	pos := appendN(t, l, Position{}, 3)
	// The file is a head, the payload and a 32-byte trailer.
	for _, size := range []int{3*checkpointChunk + 12345, checkpointChunk - checkpointHead - 32, 0} {
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(i*7 + i>>11)
		}
		if err := l.WriteCheckpoint(pos, payload); err != nil {
			t.Fatal(err)
		}
		got, back, err := l.ReadCheckpoint()
		if err != nil || got != pos || !bytes.Equal(back, payload) {
			t.Fatalf("%d bytes: read back %d bytes at %+v, %v", size, len(back), got, err)
		}
	}
}

// A checkpoint streamed in pieces of any size reads back whole; one whose
// encoder fails leaves the old checkpoint in place; and a version 2 file,
// whose head also holds the payload's length, is still read.
func TestCheckpointStreamedAndVersion2(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	pos := appendN(t, l, Position{}, 4)
	var want []byte
	n, err := l.WriteCheckpointFrom(pos, func(emit func([]byte) error) error {
		for i := 0; i < 300; i++ {
			piece := bytes.Repeat([]byte{byte(i)}, i*37)
			want = append(want, piece...)
			if err := emit(piece); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || n != int64(len(want)) {
		t.Fatalf("WriteCheckpointFrom = %d, %v; want %d bytes", n, err, len(want))
	}
	if got, back, err := l.ReadCheckpoint(); err != nil || got != pos || !bytes.Equal(back, want) {
		t.Fatalf("streamed checkpoint read back %d bytes at %+v, %v", len(back), got, err)
	}
	if _, err := l.WriteCheckpointFrom(pos, func(emit func([]byte) error) error {
		emit([]byte("half a state"))
		return errors.New("encoder failed")
	}); err == nil {
		t.Fatal("a failed encoding was reported written")
	}
	if _, back, err := l.ReadCheckpoint(); err != nil || !bytes.Equal(back, want) {
		t.Fatalf("a failed encoding replaced the checkpoint: %v", err)
	}
	if tmps, _ := filepath.Glob(filepath.Join(dir, checkpointName+".tmp*")); len(tmps) != 0 {
		t.Fatalf("temp files left behind: %v", tmps)
	}

	payload := []byte("a version 2 state")
	v2 := append([]byte(checkpointMagicV2), make([]byte, 8+8+32+8)...)
	binary.LittleEndian.PutUint64(v2[8:], uint64(pos.Offset))
	binary.LittleEndian.PutUint64(v2[16:], pos.Seq)
	copy(v2[24:], pos.Hash[:])
	binary.LittleEndian.PutUint64(v2[56:], uint64(len(payload)))
	v2 = append(v2, payload...)
	sum := checkpointTrailer(crc32.Checksum(v2, castagnoli()), int64(len(v2)), checkpointContextV2)
	if err := os.WriteFile(filepath.Join(dir, checkpointName), append(v2, sum[:]...), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, back, err := l.ReadCheckpoint(); err != nil || got != pos || string(back) != string(payload) {
		t.Fatalf("version 2 checkpoint: %+v %q %v", got, back, err)
	}
	// A version 2 file whose length field disagrees is ignored.
	binary.LittleEndian.PutUint64(v2[56:], uint64(len(payload)+1))
	sum = checkpointTrailer(crc32.Checksum(v2, castagnoli()), int64(len(v2)), checkpointContextV2)
	os.WriteFile(filepath.Join(dir, checkpointName), append(v2, sum[:]...), 0o644)
	if _, _, err := l.ReadCheckpoint(); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("version 2 checkpoint with a wrong length accepted: %v", err)
	}
}

func TestLogShorterThanVerifiedPosition(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	pos := appendN(t, l, Position{}, 3)
	os.Truncate(l.Path(), pos.Offset-10)
	tx, _ := l.Begin(context.Background())
	defer tx.Abort()
	var ce *CorruptError
	if _, err := tx.CatchUp(pos, func(Entry) error { return nil }); !errors.As(err, &ce) {
		t.Fatalf("a shrunken log was accepted: %v", err)
	}
}

// FuzzScan feeds arbitrary bytes as a log file: the scanner never panics,
// and whatever it accepts re-chains exactly.
func FuzzScan(f *testing.F) {
	h := newChainHasher()
	var seed []byte
	var prev [32]byte
	for i := 1; i <= 3; i++ {
		seed, prev, _ = appendLine(seed, h, prev, uint64(i), rec(i))
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-7])
	f.Fuzz(func(t *testing.T, data []byte) {
		var n uint64
		var last [32]byte
		_, _, _ = scan(bytes.NewReader(data), int64(len(data)), "fuzz", Position{}, func(e Entry) error {
			n++
			if e.Env.Seq != n {
				t.Fatalf("accepted seq %d at line %d", e.Env.Seq, n)
			}
			_, prefix, err := parseEnvelope(e.Line)
			if err != nil || chain(newChainHasher(), last, prefix) != e.Env.Hash {
				t.Fatal("accepted a line that does not chain")
			}
			last = e.Env.Hash
			_ = Body(e.Line)
			return nil
		})
	})
}

// FuzzReadCheckpoint feeds arbitrary bytes as a checkpoint file over a log
// of three lines: reading never panics, and a checkpoint it accepts has a
// whole sum, a position the log holds and, read again, the same payload.
func FuzzReadCheckpoint(f *testing.F) {
	dir := f.TempDir()
	l := openLog(f, dir)
	pos := appendN(f, l, Position{}, 3)
	held := map[Position]bool{{}: true} // the empty log, and the end of each line
	if _, _, err := l.Scan(Position{}, func(e Entry) error {
		held[Position{Offset: e.Offset + int64(len(e.Line)) + 1, Seq: e.Env.Seq, Hash: e.Env.Hash}] = true
		return nil
	}); err != nil || len(held) != 4 {
		f.Fatalf("scan: %v, %d positions", err, len(held))
	}
	if err := l.WriteCheckpoint(pos, []byte("a state")); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, checkpointName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-1])
	v2 := append([]byte(checkpointMagicV2), good[len(checkpointMagic):checkpointHead]...)
	v2 = binary.LittleEndian.AppendUint64(v2, uint64(len("a state")))
	v2 = append(v2, "a state"...)
	sum := checkpointTrailer(crc32.Checksum(v2, castagnoli()), int64(len(v2)), checkpointContextV2)
	f.Add(append(v2, sum[:]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, checkpointName)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, payload, err := l.ReadCheckpoint()
		if err != nil {
			if !errors.Is(err, ErrNoCheckpoint) {
				t.Fatalf("a bad checkpoint is not ErrNoCheckpoint: %v", err)
			}
			return
		}
		if !held[got] {
			t.Fatalf("accepted a checkpoint at %+v, a position the log does not hold", got)
		}
		if len(payload) > len(data) {
			t.Fatalf("payload of %d bytes from a file of %d", len(payload), len(data))
		}
	})
}
