package timekeeper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// JournalName is the delivery journal's file name inside the watch
// directory beside a session's log. Part of the on-disk format: do not rename.
const JournalName = "journal.jsonl"

// JournalLineMax bounds one journal line; a longer line is skipped as damage.
const JournalLineMax = 64 << 10

// JournalEntry is one line of the delivery journal: a notice or lapse that
// was delivered to every sink. Stored: do not rename the members.
//
//	{"key":"ntc:pnk_1a2b3c:h1:r0","kind":"promise.notice","dueAt":"2026-09-01T17:00:00Z","sentAt":"2026-09-01T17:00:04Z"}
type JournalEntry struct {
	Key    string    `json:"key"`    // lapse id or notice key: what makes a delivery unique
	Kind   string    `json:"kind"`   // lapse | promise.notice
	DueAt  time.Time `json:"dueAt"`  // when it fell due
	SentAt time.Time `json:"sentAt"` // when every sink acknowledged it
	// Outcome is set when a sink gave the delivery up instead of making it
	// (OutcomeAbandoned, OutcomeUndeliverable): it is never tried again.
	Outcome string `json:"outcome,omitempty"`
	Reason  string `json:"reason,omitempty"`
	// Sweeps and Next are set on a retry line (Key "retry:" + the
	// delivery's key): the failed sweeps so far and the earliest next try,
	// so a restarted timekeeper keeps counting toward giving up. A retry line
	// does not mark its delivery's key as sent; a reader that does not know
	// it sees a key no delivery has.
	Sweeps int        `json:"sweeps,omitempty"`
	Next   *time.Time `json:"next,omitempty"`
}

// retryPrefix marks a retry line's key.
const retryPrefix = "retry:"

// Retry is what the journal knows of a delivery's failed sweeps.
type Retry struct {
	Sweeps int
	Next   time.Time
}

// Journal is the delivery journal: which notices and lapses were delivered,
// kept beside the ledger and never in it. Appends are O_APPEND and fsynced;
// an OS file lock on the journal serialises timekeepers, so a key is delivered
// by one of them. A torn final line (a timekeeper killed mid-write) is
// tolerated: it is never read as an entry, and the next append starts on a
// fresh line.
//
// Invariant: sent holds every key of every whole line in [0, off).
type Journal struct {
	f      *os.File
	sent   map[string]struct{}
	off    int64 // bytes of whole lines read so far
	torn   bool  // the file ends in a partial line at off
	locked bool
	epoch  uint64 // times the lock was taken
	// notes are outcomes a sink gave (Annotate) for the next Record of a key.
	notes    map[string][2]string
	outcomes map[string]string // key → outcome, of the entries read
	retries  map[string]Retry  // key → its failed sweeps, until it is sent or given up
	// Damaged counts lines that were not journal entries (torn or foreign).
	Damaged int
}

// OpenJournal opens (creating if need be) the journal in dir and reads it.
func OpenJournal(dir string) (*Journal, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, JournalName), os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	j := &Journal{f: f, sent: map[string]struct{}{}}
	if err := j.catchUp(); err != nil {
		f.Close()
		return nil, err
	}
	return j, nil
}

// Close releases the journal (and its lock).
func (j *Journal) Close() error { return j.f.Close() }

// Path is the journal file's path.
func (j *Journal) Path() string { return j.f.Name() }

// Len is the number of keys delivered.
func (j *Journal) Len() int { return len(j.sent) }

// Sent reports whether key was delivered, as of the last read.
func (j *Journal) Sent(key string) bool {
	_, ok := j.sent[key]
	return ok
}

// Annotate marks the next Record of key with a sink's outcome and reason:
// the delivery was given up, not made. The caller holds the lock.
func (j *Journal) Annotate(key, outcome, reason string) {
	if j.notes == nil {
		j.notes = map[string][2]string{}
	}
	j.notes[key] = [2]string{outcome, reason}
}

// Epoch counts the times this handle took the lock: a timekeeper takes it once
// per sweep that delivers, so a sink called under it can tell sweeps apart.
func (j *Journal) Epoch() uint64 { return j.epoch }

// Outcome is the outcome journaled for key ("" when it was delivered or
// is not in the journal), as of the last read.
func (j *Journal) Outcome(key string) string { return j.outcomes[key] }

// Retry is the failed sweeps journaled for key, as of the last read.
func (j *Journal) Retry(key string) (Retry, bool) {
	r, ok := j.retries[key]
	return r, ok
}

// RecordRetry journals that key's delivery has failed on r.Sweeps sweeps
// and is not tried again before r.Next. The caller holds the lock.
func (j *Journal) RecordRetry(key, kind string, dueAt time.Time, r Retry) error {
	next := r.Next.UTC()
	return j.Record(JournalEntry{Key: retryPrefix + key, Kind: kind, DueAt: dueAt, SentAt: time.Now().UTC(), Sweeps: r.Sweeps, Next: &next})
}

// Lock takes the journal's file lock (waiting for another timekeeper, until ctx
// ends) and reads what other timekeepers appended since the last read.
func (j *Journal) Lock(ctx context.Context) error {
	wait := 100 * time.Microsecond
	for {
		err := syscall.Flock(int(j.f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return fmt.Errorf("journal lock: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("journal lock: %w", ctx.Err())
		case <-time.After(wait):
		}
		if wait < 10*time.Millisecond {
			wait *= 2
		}
	}
	j.locked = true
	j.epoch++
	if err := j.catchUp(); err != nil {
		j.Unlock()
		return err
	}
	return nil
}

// Unlock releases the file lock.
func (j *Journal) Unlock() {
	if j.locked {
		_ = syscall.Flock(int(j.f.Fd()), syscall.LOCK_UN)
		j.locked = false
	}
}

// Record appends e and fsyncs it. The caller holds the lock.
func (j *Journal) Record(e JournalEntry) error {
	if !j.locked {
		panic("watch: journal Record without the lock")
	}
	if n, ok := j.notes[e.Key]; ok {
		delete(j.notes, e.Key)
		if e.Outcome == "" {
			e.Outcome, e.Reason = n[0], n[1]
		}
	}
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	buf := make([]byte, 0, len(line)+2)
	if j.torn {
		buf = append(buf, '\n') // close the torn line: it stays unreadable, ours starts clean
	}
	buf = append(append(buf, line...), '\n')
	if _, err := j.f.Write(buf); err != nil {
		return fmt.Errorf("journal append: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal fsync: %w", err)
	}
	// Re-read from off so the torn fragment is counted and our line is folded.
	return j.catchUp()
}

// catchUp reads whole lines after off.
func (j *Journal) catchUp() error {
	st, err := j.f.Stat()
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	size := st.Size()
	if size < j.off {
		return fmt.Errorf("journal %s shrank from %d to %d bytes", j.f.Name(), j.off, size)
	}
	if size == j.off {
		j.torn = false
		return nil
	}
	b := make([]byte, size-j.off)
	if _, err := j.f.ReadAt(b, j.off); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("journal read: %w", err)
	}
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		j.fold(b[:i])
		j.off += int64(i) + 1
		b = b[i+1:]
	}
	j.torn = len(b) > 0
	return nil
}

func (j *Journal) fold(line []byte) {
	if len(line) == 0 {
		return
	}
	var e JournalEntry
	if len(line) > JournalLineMax || json.Unmarshal(line, &e) != nil || e.Key == "" {
		j.Damaged++
		return
	}
	if key, ok := strings.CutPrefix(e.Key, retryPrefix); ok {
		if _, sent := j.sent[key]; !sent {
			if j.retries == nil {
				j.retries = map[string]Retry{}
			}
			r := Retry{Sweeps: e.Sweeps}
			if e.Next != nil {
				r.Next = *e.Next
			}
			j.retries[key] = r
		}
		return
	}
	j.sent[e.Key] = struct{}{}
	delete(j.retries, e.Key)
	if e.Outcome != "" {
		if j.outcomes == nil {
			j.outcomes = map[string]string{}
		}
		j.outcomes[e.Key] = e.Outcome
	}
}
