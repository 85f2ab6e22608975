// Package store is tally's durable log: one append-only file of JSON lines
// per session, each line hash-chained to the one before, appended under an
// OS file lock and acknowledged only after fsync, with group commit
// (Pipeline), checkpoints and recovery. It knows nothing of what the records
// mean: a Machine (the ledger's folded state) decides and folds them.
package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/zeebo/blake3"
)

// File names inside a session directory. Part of the on-disk format: do not rename.
const (
	logName        = "log.jsonl"
	lockName       = "lock"
	waitName       = "lock.wait" // held shared by writers waiting for lock
	checkpointName = "checkpoint"
)

// Position is a verified point in a log: the end of the line with sequence
// Seq and the chain hash after it. The zero Position is the empty log.
type Position struct {
	Offset int64
	Seq    uint64
	Hash   [32]byte
}

// Entry is one line of the log as Scan hands it over. Line (without its
// newline) is valid only during the callback.
type Entry struct {
	Line   []byte
	Env    Envelope
	Offset int64 // where the line starts in the log
}

// CorruptError reports damage in a log: a line that is not what the format
// promises. tally never repairs it silently.
type CorruptError struct {
	Path   string
	Line   uint64 // 1-based line number (equal to the line's sequence number)
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s: line %d: %s", e.Path, e.Line, e.Reason)
}

// RefusalCode is a damaged log's refusal code, "corrupt" (service.Coded:
// the bindings answer it without importing store).
func (e *CorruptError) RefusalCode() string { return "corrupt" }

// Log is one session's log file. It is safe for concurrent use; appends from
// this process are serialised by a mutex and appends from other processes by
// an exclusive flock on the session's lock file.
type Log struct {
	dir    string
	file   *os.File
	lock   *os.File
	wait   *os.File // a shared flock on it says "a writer waits for lock"
	logger *slog.Logger
	txHash *blake3.Hasher // the chain hasher of the Tx under way (one at a time: mu)
	txBuf  []byte         // the line buffer the last Tx left, for the next (mu)
	mu     sync.Mutex     // held for the life of a Tx
}

// Open opens (creating if need be) the session log in dir.
func Open(dir string, logger *slog.Logger) (*Log, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	path := filepath.Join(dir, logName)
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		// Make the new file's directory entry durable before anything in
		// it is acknowledged.
		if err := SyncDir(dir); err != nil {
			f.Close()
			return nil, fmt.Errorf("open log: %w", err)
		}
	}
	lf, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open log lock: %w", err)
	}
	wf, err := os.OpenFile(filepath.Join(dir, waitName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		f.Close()
		lf.Close()
		return nil, fmt.Errorf("open log lock: %w", err)
	}
	return &Log{dir: dir, file: f, lock: lf, wait: wf, logger: logger, txHash: newChainHasher()}, nil
}

// Close releases the log's files.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.file.Close(), l.lock.Close(), l.wait.Close())
}

// Dir is the session directory.
func (l *Log) Dir() string { return l.dir }

// Path is the log file's path.
func (l *Log) Path() string { return filepath.Join(l.dir, logName) }

// Torn describes an incomplete final line: bytes after the last newline.
type Torn struct {
	Offset int64 // where the incomplete line starts
	Size   int64
}

// Scan reads whole lines after from, verifying each line's envelope,
// sequence and chain hash, and calls fn for each. It needs no lock: an
// incomplete final line (a write in progress, or a crash) is not read and is
// reported as torn. It returns the position after the last line read.
func (l *Log) Scan(from Position, fn func(Entry) error) (Position, *Torn, error) {
	fi, err := l.file.Stat()
	if err != nil {
		return from, nil, fmt.Errorf("stat log: %w", err)
	}
	return scan(l.file, fi.Size(), l.Path(), from, fn)
}

// ScanUntil is Scan over the lines that end at or before end: a reader that
// must not see lines written but not yet durable stops at the durable end.
func (l *Log) ScanUntil(from Position, end int64, fn func(Entry) error) (Position, *Torn, error) {
	fi, err := l.file.Stat()
	if err != nil {
		return from, nil, fmt.Errorf("stat log: %w", err)
	}
	return scan(l.file, min(end, fi.Size()), l.Path(), from, fn)
}

func scan(f io.ReaderAt, size int64, path string, from Position, fn func(Entry) error) (Position, *Torn, error) {
	pos := from
	remaining := size - from.Offset
	if remaining <= 0 {
		return pos, nil, nil // nothing new: the common case for a writer
	}
	// A buffer no larger than what is left (a line cannot be longer), and
	// never larger than a line may be.
	bufSize := int(min(max(remaining+1, 4096), LineMax+1))
	r := bufio.NewReaderSize(io.NewSectionReader(f, from.Offset, remaining), bufSize)
	ch := ChainFrom(from)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return pos, nil, &CorruptError{Path: path, Line: pos.Seq + 1, Reason: fmt.Sprintf("line longer than %d bytes", LineMax)}
		}
		if err == io.EOF {
			if len(line) > 0 {
				return pos, &Torn{Offset: pos.Offset, Size: int64(len(line))}, nil
			}
			return pos, nil, nil
		}
		if err != nil {
			return pos, nil, fmt.Errorf("read %s: %w", path, err)
		}
		line = line[:len(line)-1]
		env, cerr := ch.Next(line)
		if cerr != nil {
			return pos, nil, &CorruptError{Path: path, Line: pos.Seq + 1, Reason: cerr.Error()}
		}
		if err := fn(Entry{Line: line, Env: env, Offset: pos.Offset}); err != nil {
			return pos, nil, err
		}
		pos = ch.Position()
	}
}

// Chain checks the lines of one log in order, as a reader that streams
// them must (Scan, a backup): each line's envelope, its sequence and its
// chain hash, from a verified position on.
type Chain struct {
	pos Position
	h   *blake3.Hasher
}

// ChainFrom starts a Chain after the line at from (the zero Position: the
// log's start).
func ChainFrom(from Position) *Chain { return &Chain{pos: from, h: newChainHasher()} }

// Next verifies the line that follows (without its newline) and moves past
// it. Its error is the reason, without the log's name or the line number,
// which the caller knows (Position().Seq+1).
func (c *Chain) Next(line []byte) (Envelope, error) {
	env, prefix, err := parseEnvelope(line)
	if err != nil {
		return env, err
	}
	if env.Seq != c.pos.Seq+1 {
		return env, fmt.Errorf("sequence %d where %d was due", env.Seq, c.pos.Seq+1)
	}
	if sum := chain(c.h, c.pos.Hash, prefix); sum != env.Hash {
		return env, errors.New("chain hash does not match the line and the line before it")
	}
	c.pos = Position{Offset: c.pos.Offset + int64(len(line)) + 1, Seq: env.Seq, Hash: env.Hash}
	return env, nil
}

// Position is the end of the last line Next verified.
func (c *Chain) Position() Position { return c.pos }

// Tail is the position of the last whole line of f that ends at or before
// end: where a reader that must not take a line still being written (or a
// torn one) stops. It reads that line's envelope only, in O(1) reads; the
// chain up to it is for whoever reads the lines to verify. No whole line is
// the zero Position.
func Tail(f *os.File, end int64) (Position, error) {
	return lastLine(f, end, f.Name())
}

// lastLine is Tail over any file; path names it in errors.
func lastLine(f io.ReaderAt, end int64, path string) (Position, error) {
	for size := int64(4096); ; size *= 4 {
		size = min(size, end)
		if size <= 0 {
			return Position{}, nil
		}
		buf := make([]byte, size)
		if _, err := f.ReadAt(buf, end-size); err != nil {
			return Position{}, fmt.Errorf("read %s: %w", path, err)
		}
		nl := bytes.LastIndexByte(buf, '\n')
		start := bytes.LastIndexByte(buf[:max(nl, 0)], '\n') + 1
		if (nl < 0 || start == 0) && size < end {
			// A line (or a torn tail) is longer than what was read; never
			// more than a line and a torn line, each at most LineMax.
			if size > 2*(LineMax+1) {
				return Position{}, &CorruptError{Path: path, Reason: fmt.Sprintf("no whole line of at most %d bytes ends in the last %d bytes before offset %d", LineMax, size, end)}
			}
			continue
		}
		if nl < 0 {
			return Position{}, nil // the file holds no whole line
		}
		env, _, err := parseEnvelope(buf[start:nl])
		if err != nil {
			return Position{}, &CorruptError{Path: path, Reason: fmt.Sprintf("the line ending at offset %d: %v", end-size+int64(nl)+1, err)}
		}
		return Position{Offset: end - size + int64(nl) + 1, Seq: env.Seq, Hash: env.Hash}, nil
	}
}

// Settled is the end of the log's durable lines, for a reader that must
// take every acknowledged line and nothing a writer may still cut back (a
// backup): the last whole line once no writer is between a write and its
// fsync. It holds the writers' lock for as long as a stat takes, so it
// delays a writer by at most that; a writer holding the lock through a
// stream of batches lets it go as it does for any waiting writer. A torn
// tail a crash left is not counted.
func (l *Log) Settled(ctx context.Context) (Position, error) {
	tx, err := l.Begin(ctx)
	if err != nil {
		return Position{}, err
	}
	fi, err := l.file.Stat()
	tx.Abort()
	if err != nil {
		return Position{}, fmt.Errorf("stat log: %w", err)
	}
	return lastLine(l.file, fi.Size(), l.Path())
}

// Tx is an exclusive append transaction: it holds the session's file lock
// from Begin until Commit or Abort. Everything a writer checks (id
// uniqueness, first resolve) is checked inside one, after CatchUp.
type Tx struct {
	log    *Log
	start  Position // end of the file when the tx began appending
	pos    Position // after the records appended so far
	buf    []byte
	h      *blake3.Hasher
	torn   *Torn // incomplete final line found by CatchUp
	caught bool
	done   bool
}

// txBufKeep bounds the line buffer a Log keeps between transactions.
const txBufKeep = 4 << 20

// Begin takes the in-process mutex and the OS file lock. It waits for other
// writers, giving up when ctx ends.
func (l *Log) Begin(ctx context.Context) (*Tx, error) {
	l.mu.Lock()
	if err := flockContext(ctx, l.lock, l.wait); err != nil {
		l.mu.Unlock()
		return nil, fmt.Errorf("lock log: %w", err)
	}
	// A derive-key hasher costs about 11 KB to make; a Tx holds mu, so the
	// log's one serves every Tx in turn.
	return &Tx{log: l, h: l.txHash, buf: l.txBuf[:0]}, nil
}

func flockContext(ctx context.Context, f, wait *os.File) error {
	waiting := false
	defer func() {
		if waiting {
			_ = syscall.Flock(int(wait.Fd()), syscall.LOCK_UN)
		}
	}()
	delay := 20 * time.Microsecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return err
		}
		if !waiting {
			// Say so: a writer holding the lock through a stream of
			// batches lets it go when someone waits (Contended).
			waiting = syscall.Flock(int(wait.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) == nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		if delay < time.Millisecond {
			delay *= 2
		}
	}
}

// Contended reports whether a writer (in any process) waits for the lock
// this process holds.
func (l *Log) Contended() bool {
	if err := syscall.Flock(int(l.wait.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(l.wait.Fd()), syscall.LOCK_UN)
	return false
}

// CatchUp reads, verifies and hands to fn every line after from (what other
// writers appended since the caller last looked). A torn final line is a
// crash's leftover, since no other writer can be mid-write while we hold the
// lock: Commit cuts it off, with a warning, before appending.
func (tx *Tx) CatchUp(from Position, fn func(Entry) error) (Position, error) {
	fi, err := tx.log.file.Stat()
	if err != nil {
		return from, fmt.Errorf("stat log: %w", err)
	}
	size := fi.Size()
	if size < from.Offset {
		return from, &CorruptError{Path: tx.log.Path(), Line: from.Seq, Reason: fmt.Sprintf("log is %d bytes, shorter than the %d bytes already verified: it was cut or replaced", size, from.Offset)}
	}
	pos, torn, err := scan(tx.log.file, size, tx.log.Path(), from, fn)
	if err != nil {
		return pos, err
	}
	// A torn tail is cut only when this tx commits records, so a refused
	// command leaves the file's bytes exactly as they were.
	tx.torn = torn
	tx.start, tx.pos, tx.caught = pos, pos, true
	return pos, nil
}

// Append adds a record after the last one, returning its sequence number.
// Nothing is written to the file until Commit.
func (tx *Tx) Append(r Record) (uint64, error) {
	if !tx.caught {
		panic("store: Append before CatchUp")
	}
	seq := tx.pos.Seq + 1
	before := len(tx.buf)
	buf, sum, err := appendLine(tx.buf, tx.h, tx.pos.Hash, seq, r)
	if err != nil {
		return 0, fmt.Errorf("append record: %w", err)
	}
	// Pair the write with a read: the line must parse back to what we meant.
	line := buf[before : len(buf)-1]
	env, _, err := parseEnvelope(line)
	if err != nil || env.Seq != seq || env.Hash != sum {
		panic(fmt.Sprintf("store: appended line does not read back (seq %d): %v", seq, err))
	}
	tx.buf = buf
	tx.pos = Position{Offset: tx.pos.Offset + int64(len(buf)-before), Seq: seq, Hash: sum}
	return seq, nil
}

// ReadLine reads the n-byte line at off (without its newline), as recorded
// by an earlier Scan. It verifies the envelope's sequence, not the chain.
func (l *Log) ReadLine(off int64, n int, seq uint64) ([]byte, error) {
	buf := make([]byte, n)
	if _, err := l.file.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("read line %d: %w", seq, err)
	}
	env, _, err := parseEnvelope(buf)
	if err != nil || env.Seq != seq {
		return nil, &CorruptError{Path: l.Path(), Line: seq, Reason: "line is not where the checkpoint recorded it"}
	}
	return buf, nil
}

// Grow makes room for n more bytes of lines, so a large batch does not
// regrow the buffer line by line.
func (tx *Tx) Grow(n int) { tx.buf = slices.Grow(tx.buf, n) }

// Pending is the position the log will have after Commit.
func (tx *Tx) Pending() Position { return tx.pos }

// Lines returns the bytes appended so far (each line with its newline).
func (tx *Tx) Lines() []byte { return tx.buf }

// Commit writes the appended lines, fsyncs them and releases the lock. Only
// after it returns nil are the records acknowledged. On failure the file is
// cut back to where the tx began, so nothing unacknowledged stays behind.
func (tx *Tx) Commit() (Position, error) {
	defer tx.release()
	from := tx.start
	pos, err := tx.Write()
	if err != nil {
		return pos, err
	}
	if err := tx.log.Sync(); err != nil {
		_ = tx.Cut(from)
		return from, err
	}
	return pos, nil
}

// Write writes the lines appended since the last Write, without fsync, and
// keeps the lock: the tx goes on appending after them. A pipelining writer
// calls Write for one batch, hands it to Sync (from another goroutine if it
// likes) and decides the next batch meanwhile; nothing written is
// acknowledged before a Sync that began after its Write returned. On failure
// the file is cut back to where this write began.
func (tx *Tx) Write() (Position, error) {
	if len(tx.buf) == 0 {
		return tx.pos, nil
	}
	f := tx.log.file
	if tx.torn != nil {
		tx.log.logger.Warn("cutting a torn final line left by an interrupted write",
			"log", tx.log.Path(), "line", tx.start.Seq+1, "offset", tx.torn.Offset, "bytes", tx.torn.Size)
	}
	if _, err := f.WriteAt(tx.buf, tx.start.Offset); err != nil {
		_ = f.Truncate(tx.start.Offset)
		tx.pos = tx.start
		tx.buf = tx.buf[:0]
		return tx.start, fmt.Errorf("write log: %w", err)
	}
	if tx.torn != nil && tx.torn.Offset+tx.torn.Size > tx.pos.Offset {
		// The torn bytes outran what we wrote over them: cut the rest.
		if err := f.Truncate(tx.pos.Offset); err != nil {
			_ = f.Truncate(tx.start.Offset)
			tx.pos = tx.start
			tx.buf = tx.buf[:0]
			return tx.start, fmt.Errorf("cut torn line: %w", err)
		}
	}
	tx.torn = nil
	tx.start = tx.pos
	tx.buf = tx.buf[:0] // the next batch reuses the buffer
	return tx.pos, nil
}

// Cut truncates the log back to p, a position this tx wrote past whose
// lines were not made durable (their Sync failed), and appends after it
// from then on.
func (tx *Tx) Cut(p Position) error {
	if err := tx.log.file.Truncate(p.Offset); err != nil {
		return fmt.Errorf("cut log back to line %d: %w", p.Seq, err)
	}
	tx.start, tx.pos, tx.buf = p, p, tx.buf[:0]
	return nil
}

// Rewind drops the lines appended after p and not yet written: a batch
// that failed halfway leaves nothing in the buffer for the next Write.
func (tx *Tx) Rewind(p Position) {
	if p.Offset < tx.start.Offset || p.Offset > tx.pos.Offset {
		panic(fmt.Sprintf("store: rewind to offset %d outside the unwritten lines [%d, %d]", p.Offset, tx.start.Offset, tx.pos.Offset))
	}
	tx.buf = tx.buf[:p.Offset-tx.start.Offset]
	tx.pos = p
}

// Release ends the tx, releasing the lock; lines appended since the last
// Write are dropped.
func (tx *Tx) Release() { tx.release() }

// Sync makes everything written to the log so far durable (fdatasync). It
// needs no lock: it may run while a Tx writes further lines, and it covers
// every line whose Write returned before it was called.
func (l *Log) Sync() error {
	if err := syscall.Fdatasync(int(l.file.Fd())); err != nil {
		return fmt.Errorf("fsync log: %w", err)
	}
	return nil
}

// Abort releases the lock, writing nothing.
func (tx *Tx) Abort() { tx.release() }

func (tx *Tx) release() {
	if tx.done {
		return
	}
	tx.done = true
	// A writer that takes the lock for every batch would otherwise grow a
	// new buffer each time; one grown past what batches need is let go.
	if cap(tx.buf) <= txBufKeep {
		tx.log.txBuf = tx.buf[:0]
	}
	tx.buf = nil
	_ = syscall.Flock(int(tx.log.lock.Fd()), syscall.LOCK_UN)
	tx.log.mu.Unlock()
}

// SyncDir makes dir's entries durable: a file created, renamed or removed
// in it.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
