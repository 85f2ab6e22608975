package artifact

// Custody of the stored objects over time: a walk of every object, the
// scrubber that re-reads them at a bounded rate to find rot, and the
// collection of objects no record references, which never races a
// publication (the lock below).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"tally/digest"
)

// Object is one stored object: its content digest, size and the instant
// it was last put (its file's modification time).
type Object struct {
	Content digest.ContentDigest
	Size    int64
	Put     time.Time
}

// Objects lists the store's objects in digest order. A file in a fan-out
// directory whose name is not a content digest is not an object and is
// skipped (nothing tally writes).
func (s *Store) Objects() ([]Object, error) {
	fans, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list artifacts: %w", err)
	}
	var out []Object
	for _, fan := range fans {
		if !fan.IsDir() || len(fan.Name()) != 2 {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(s.dir, fan.Name()))
		if err != nil {
			return nil, fmt.Errorf("list artifacts: %w", err)
		}
		for _, e := range ents {
			d, err := digest.ParseContentDigest(fan.Name() + e.Name())
			if err != nil || !e.Type().IsRegular() {
				continue
			}
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the listing
			}
			if err != nil {
				return nil, fmt.Errorf("list artifacts: %w", err)
			}
			out = append(out, Object{Content: d, Size: fi.Size(), Put: fi.ModTime()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Content.String() < out[j].Content.String() })
	return out, nil
}

// paced reads r no faster than rate bytes a second (0: unbounded),
// sleeping between reads and stopping when ctx ends.
type paced struct {
	ctx   context.Context
	r     io.Reader
	rate  int64
	start time.Time
	n     int64
}

func (p *paced) Read(b []byte) (int, error) {
	if err := p.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := p.r.Read(b)
	p.n += int64(n)
	if p.rate > 0 {
		due := p.start.Add(time.Duration(float64(p.n) / float64(p.rate) * float64(time.Second)))
		if wait := time.Until(due); wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-t.C:
			case <-p.ctx.Done():
				return n, p.ctx.Err()
			}
		}
	}
	return n, err
}

// VerifyPaced is Verify reading no faster than rate bytes a second (0:
// unbounded), so that a scrub leaves the disk to the writes.
func (s *Store) VerifyPaced(ctx context.Context, d digest.ContentDigest, rate int64) error {
	f, err := os.Open(s.Path(d))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("verify artifact: %s: %w", d, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("verify artifact: %w", err)
	}
	defer f.Close()
	h := digest.NewContentHasher()
	if _, err := io.CopyBuffer(h, &paced{ctx: ctx, r: f, rate: rate, start: time.Now()}, make([]byte, copyBufferSize)); err != nil {
		return fmt.Errorf("verify artifact: %w", err)
	}
	if got := digest.ContentSum(h); got != d {
		return &DamagedError{Want: d, Got: got, Path: s.Path(d)}
	}
	return nil
}

// Checked is one object's verification: State is ok, damaged or missing
// (removed since it was listed); Err says why when it is not ok.
type Checked struct {
	Object
	State string
	Err   error
}

// The states of a checked object.
const (
	StateOK      = "ok"
	StateDamaged = "damaged"
	StateMissing = "missing"
)

// Check verifies one object at rate (0: unbounded): its state, or the
// error that kept it from being read (a disk failing).
func (s *Store) Check(ctx context.Context, o Object, rate int64) (Checked, error) {
	err := s.VerifyPaced(ctx, o.Content, rate)
	switch {
	case err == nil:
		return Checked{Object: o, State: StateOK}, nil
	case IsDamaged(err):
		return Checked{Object: o, State: StateDamaged, Err: err}, nil
	case errors.Is(err, ErrNotFound):
		return Checked{Object: o, State: StateMissing, Err: err}, nil
	}
	return Checked{Object: o}, err
}

// collectLock is the file whose lock orders collections and publications
// (in every process writing the directory): a publication holds it shared
// from its bytes' put until its record is appended (Hold), a collection
// exclusively while it decides and removes, so a collection never removes
// bytes a publication is about to reference.
const collectLock = "collect.lock"

func (s *Store) lock(how int) (func(), error) {
	f, err := os.OpenFile(filepath.Join(s.dir, collectLock), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("artifact store lock: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("artifact store lock: %w", err)
	}
	return func() { f.Close() }, nil // closing the file releases its lock
}

// Hold keeps collections out until release is called: a publication
// holds it from its put until its record is appended.
func (s *Store) Hold() (release func(), err error) { return s.lock(syscall.LOCK_SH) }

// Collected is what a collection removed: the objects, and the abandoned
// staging files (a put cut off by a crash) with their bytes.
type Collected struct {
	Objects []Object
	Staged  int
	Bytes   int64
}

// Collect removes, under the collection lock, every object that
// referenced (read under the lock: the records committed by then) does not
// name and that was last put more than grace before now, and staging files
// older than grace. Bytes put within the grace stay: an upload whose
// record is still being written.
func (s *Store) Collect(ctx context.Context, now time.Time, grace time.Duration, referenced func() (map[digest.ContentDigest]bool, error)) (Collected, error) {
	release, err := s.lock(syscall.LOCK_EX)
	if err != nil {
		return Collected{}, err
	}
	defer release()
	refs, err := referenced()
	if err != nil {
		return Collected{}, fmt.Errorf("collect artifacts: %w", err)
	}
	objs, err := s.Objects()
	if err != nil {
		return Collected{}, err
	}
	var out Collected
	cutoff := now.Add(-grace)
	for _, o := range objs {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		if refs[o.Content] || !o.Put.Before(cutoff) {
			continue
		}
		if err := os.Remove(s.Path(o.Content)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return out, fmt.Errorf("collect artifact %s: %w", o.Content, err)
		}
		out.Objects = append(out.Objects, o)
		out.Bytes += o.Size
	}
	tmp := filepath.Join(s.dir, "tmp")
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return out, fmt.Errorf("collect artifacts: %w", err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			continue
		}
		if err := os.Remove(filepath.Join(tmp, e.Name())); err == nil {
			out.Staged++
			out.Bytes += fi.Size()
		}
	}
	if len(out.Objects) > 0 {
		err = syncDir(s.dir)
	}
	return out, err
}
