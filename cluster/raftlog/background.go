package raftlog

// Pebble's background work (flushes, compactions) on a disk that fails
// it. Pebble retries a failed flush at once and for ever, logging each
// failure: on a full disk that is thousands of lines a second and a core
// burned, and a store that never opens. The store's listener slows the
// retries down (each failure in a row waits longer, up to
// backgroundWaitMax, before pebble goes on), logs a repeated error once
// and then a count, and fails the store on a full disk, as a failed write
// does: the node stops rather than take writes it cannot flush.

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The waits after failed background work: the first, and the most.
const (
	backgroundWaitMin = 10 * time.Millisecond
	backgroundWaitMax = 5 * time.Second
)

// repeatEvery is how often an error that goes on repeating is logged
// again, with its count.
const repeatEvery = time.Minute

// repeats logs an error once, then counts its repeats: the count is logged
// when another error comes, or every repeatEvery while it goes on. Two
// messages that differ only in their digits (file numbers) are the same
// error.
type repeats struct {
	l   *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	shape   string
	last    string
	count   int // repeats of shape not logged yet
	logged  time.Time
	started time.Time
}

func newRepeats(l *slog.Logger) *repeats { return &repeats{l: l, now: time.Now} }

// errorf logs msg at Error, unless it repeats the last one.
func (r *repeats) errorf(msg string, attrs ...any) {
	if r.l == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	shape := digitless(msg)
	if shape == r.shape {
		r.count++
		r.last = msg
		if now.Sub(r.logged) < repeatEvery {
			return
		}
		r.flush(now, attrs)
		return
	}
	if r.count > 0 {
		r.flush(now, attrs)
	}
	r.shape, r.last, r.count, r.logged, r.started = shape, msg, 0, now, now
	r.l.Error(msg, attrs...)
}

// flush logs the count of the repeats not logged yet. r.mu is held.
func (r *repeats) flush(now time.Time, attrs []any) {
	r.l.Error(r.last, append(attrs, "repeated", r.count, "since", r.started)...)
	r.count, r.logged = 0, now
}

// digitless is msg with every run of digits made one '#'.
func digitless(msg string) string {
	b := make([]byte, 0, len(msg))
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c < '0' || c > '9' {
			b = append(b, c)
		} else if len(b) == 0 || b[len(b)-1] != '#' {
			b = append(b, '#')
		}
	}
	return string(b)
}

// backoff is the wait after failures in a row of background work.
type backoff struct {
	mu    sync.Mutex
	fails int
	sleep func(time.Duration)
}

// failed counts a failure and waits the longer for it.
func (b *backoff) failed() {
	b.mu.Lock()
	b.fails++
	d := backgroundWaitMin << min(b.fails-1, 20)
	b.mu.Unlock()
	b.sleep(min(d, backgroundWaitMax))
}

// ok ends a run of failures.
func (b *backoff) ok() {
	b.mu.Lock()
	b.fails = 0
	b.mu.Unlock()
}

// listener is the store's pebble event listener: background errors logged
// through log (once, then counted), waited after (backoff), and a full
// disk failing the store; onError, if set, hears each of them.
func (d *DB) listener(log *repeats, onError func(error)) *pebble.EventListener {
	b := &backoff{sleep: time.Sleep}
	return &pebble.EventListener{
		BackgroundError: func(err error) {
			log.errorf("background error: "+err.Error(), "component", "pebble")
			if diskFull(err) {
				d.mu.Lock()
				if d.failed == nil {
					d.failed = fmt.Errorf("raftlog: background work: %w: %w", err, ErrFailed)
				}
				d.mu.Unlock()
			}
			if onError != nil {
				onError(err)
			}
			// Pebble holds its mutex here and retries a flush as soon as
			// this returns: the wait is what slows it down.
			b.failed()
		},
		FlushEnd: func(info pebble.FlushInfo) {
			if info.Err == nil {
				b.ok()
			}
		},
		CompactionEnd: func(info pebble.CompactionInfo) {
			if info.Err == nil {
				b.ok()
			}
		},
	}
}

// diskFull says err is the disk out of space (or quota).
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// checkFree refuses a store whose file system has fewer than least bytes
// free: opening it would have pebble flush what its log holds, and fail,
// again and again.
func checkFree(fs vfs.FS, dir string, least uint64) error {
	if least == 0 {
		return nil
	}
	probe := dir
	for {
		u, err := fs.GetDiskUsage(probe)
		if err == nil {
			if u.AvailBytes < least {
				return fmt.Errorf("raftlog: %s: %s free on its file system, fewer than the %s a node needs to start: %w", dir, bytesOf(u.AvailBytes), bytesOf(least), syscall.ENOSPC)
			}
			return nil
		}
		if errors.Is(err, vfs.ErrUnsupported) {
			return nil
		}
		parent := fs.PathDir(probe)
		if parent == probe {
			return nil // nothing to ask: let pebble say
		}
		probe = parent // the store's directory is not made yet
	}
}

// bytesOf is n bytes in words.
func bytesOf(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
