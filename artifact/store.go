// Package artifact is the content-addressed store of evidence bytes under a
// ledger directory's objects/ folder, named by their content digest (package
// digest holds the digests themselves, which do no I/O).
package artifact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/zeebo/blake3"

	"tally/digest"
)

// ErrNotFound is returned for a content digest the store does not hold.
var ErrNotFound = errors.New("artifact content not found")

// IsNoSpace reports whether err is the disk refusing more bytes: full, over
// a quota, or past the file size a process may write.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG)
}

// DamagedError reports a stored copy whose bytes no longer match its digest.
// The bytes of a damaged copy are never returned.
type DamagedError struct {
	Want digest.ContentDigest
	Got  digest.ContentDigest
	Path string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("artifact content damaged: %s holds %s, want %s", e.Path, e.Got, e.Want)
}

// IsDamaged reports whether err (or its chain) is a *DamagedError.
func IsDamaged(err error) bool {
	var d *DamagedError
	return errors.As(err, &d)
}

// copyBufferSize is the chunk in which content is streamed; large enough for
// BLAKE3's SIMD paths, small enough to never buffer a whole object.
const copyBufferSize = 1 << 20

// Store is a content-addressed object store over one directory (a ledger's
// objects/ folder). Objects live at dir/ab/cdef… (fan-out by the first byte of
// the content digest); writes go to dir/tmp and are renamed into place after
// fsync, so a reader sees a whole object or none.
//
// Invariant: every file under a fan-out directory is named by the content
// digest of its bytes, unless the disk damaged it; every read verifies that.
type Store struct {
	dir string
}

// OpenStore returns the store rooted at dir, creating the directory if needed.
func OpenStore(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("open artifact store: empty directory")
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, fmt.Errorf("open artifact store: %w", err)
	}
	return &Store{dir: dir}, nil
}

// Dir is the store's root directory.
func (s *Store) Dir() string { return s.dir }

// Path is where the object with digest d lives (whether or not it exists).
func (s *Store) Path(d digest.ContentDigest) string { return ObjectPath(s.dir, d) }

// ObjectPath is where the object with digest d lives in the store at dir,
// for a reader that opens no store (OpenStore makes its directories).
func ObjectPath(dir string, d digest.ContentDigest) string {
	h := d.String()
	return filepath.Join(dir, h[:2], h[2:])
}

// WithContext is r, stopping when ctx is done.
func WithContext(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx: ctx, r: r} }

// ctxReader stops a copy when its context is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Put streams r into the store and returns its content digest and size. The
// bytes are hashed while they are written, fsynced, and renamed into place;
// the fan-out directory is fsynced too, so a returned digest is durable. A put
// of content already held (and intact) leaves the existing copy; a damaged
// existing copy is replaced by the new, verified bytes.
func (s *Store) Put(ctx context.Context, r io.Reader) (digest.ContentDigest, int64, error) {
	return s.put(ctx, r, nil)
}

// PutVerified is Put of bytes that must be content want, of size bytes
// (a copy fetched from another node): bytes that are not are discarded
// before they are named, and the error is a *DamagedError (or says the
// size), so that no copy that did not verify is ever stored under want.
func (s *Store) PutVerified(ctx context.Context, r io.Reader, want digest.ContentDigest, size int64) error {
	_, _, err := s.put(ctx, r, func(got digest.ContentDigest, n int64) error {
		switch {
		case n != size:
			return fmt.Errorf("put artifact: %d bytes arrived for content %s, which is %d bytes: discarded", n, want, size)
		case got != want:
			return &DamagedError{Want: want, Got: got, Path: "the bytes fetched"}
		}
		return nil
	})
	return err
}

// put is Put, with check (if set) deciding on the bytes' digest and size
// before they are synced and named.
func (s *Store) put(ctx context.Context, r io.Reader, check func(digest.ContentDigest, int64) error) (digest.ContentDigest, int64, error) {
	tmp, err := os.CreateTemp(filepath.Join(s.dir, "tmp"), "put-*")
	if err != nil {
		return digest.ContentDigest{}, 0, fmt.Errorf("put artifact: %w", err)
	}
	tmpName := tmp.Name()
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()

	d, size, err := s.copyHashing(ctx, tmp, r)
	if err != nil {
		return digest.ContentDigest{}, 0, fmt.Errorf("put artifact: %w", err)
	}
	if check != nil {
		if err := check(d, size); err != nil {
			return digest.ContentDigest{}, 0, err
		}
	}
	if err := tmp.Sync(); err != nil {
		return digest.ContentDigest{}, 0, fmt.Errorf("put artifact: sync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return digest.ContentDigest{}, 0, fmt.Errorf("put artifact: close: %w", err)
	}

	final := s.Path(d)
	if _, err := os.Stat(final); err == nil {
		if verr := s.Verify(ctx, d); verr == nil {
			os.Remove(tmpName)
			committed = true
			// Put again now: a collection's grace runs from here.
			now := time.Now()
			if err := os.Chtimes(final, now, now); err != nil {
				return digest.ContentDigest{}, 0, fmt.Errorf("put artifact: %w", err)
			}
			return d, size, nil
		}
	}
	fan := filepath.Dir(final)
	if err := os.MkdirAll(fan, 0o755); err != nil {
		return digest.ContentDigest{}, 0, fmt.Errorf("put artifact: %w", err)
	}
	if err := os.Rename(tmpName, final); err != nil {
		return digest.ContentDigest{}, 0, fmt.Errorf("put artifact: %w", err)
	}
	committed = true
	if err := syncDir(fan); err != nil {
		return digest.ContentDigest{}, 0, fmt.Errorf("put artifact: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		return digest.ContentDigest{}, 0, fmt.Errorf("put artifact: %w", err)
	}
	return d, size, nil
}

// Put's pipeline: the caller's goroutine reads chunks and writes them to the
// file while a second goroutine hashes the same chunks, so hashing and writing
// overlap; writeback of each written stretch starts at once so the closing
// fsync waits for little.
const (
	pipelineBuffers   = 4       // chunks in flight between reader, writer and hasher
	writebackInterval = 8 << 20 // bytes written between writeback hints
)

// copyHashing streams r into f and returns the content digest and size.
func (s *Store) copyHashing(ctx context.Context, f *os.File, r io.Reader) (digest.ContentDigest, int64, error) {
	free := make(chan []byte, pipelineBuffers)
	for i := 0; i < pipelineBuffers; i++ {
		free <- make([]byte, copyBufferSize)
	}
	toHash := make(chan []byte, pipelineBuffers)
	done := make(chan digest.ContentDigest, 1)
	go func() {
		h := digest.NewContentHasher()
		for chunk := range toHash {
			_, _ = h.Write(chunk)
			free <- chunk[:cap(chunk)]
		}
		done <- digest.ContentSum(h)
	}()

	var size, hinted int64
	var failure error
	src := ctxReader{ctx: ctx, r: r}
	for failure == nil {
		buf := <-free
		n, rerr := io.ReadFull(src, buf)
		if n > 0 {
			// Invariant: a buffer is reused only after the hasher returns it,
			// and this write finishes before the next buffer is taken.
			toHash <- buf[:n]
			if _, werr := f.Write(buf[:n]); werr != nil {
				failure = werr
				break
			}
			size += int64(n)
			if size-hinted >= writebackInterval {
				startWriteback(f, hinted, size-hinted)
				hinted = size
			}
		} else {
			free <- buf
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			failure = fmt.Errorf("read: %w", rerr)
		}
	}
	close(toHash)
	d := <-done
	if failure != nil {
		return digest.ContentDigest{}, 0, failure
	}
	return d, size, nil
}

// Declared stands for bytes a caller vouches for by their content and
// size without reading them here: a cluster replica applying a write
// whose bytes were verified at the node that took them, and reach this
// node's store beside the log. A reader of it gets an error: whoever
// stores bytes checks for it first (ledgerservice).
type Declared struct {
	Content digest.ContentDigest
	Size    int64
}

func (Declared) Read([]byte) (int, error) {
	return 0, errors.New("artifact: declared content: its bytes are not read here")
}

func (Declared) Close() error { return nil }

// PutBytes is Put for content already in memory.
func (s *Store) PutBytes(ctx context.Context, b []byte) (digest.ContentDigest, error) {
	d, _, err := s.Put(ctx, bytes.NewReader(b))
	return d, err
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// Has reports whether an object file exists for d (without verifying it).
func (s *Store) Has(d digest.ContentDigest) bool {
	_, err := os.Stat(s.Path(d))
	return err == nil
}

// hashFile streams the object for d through the content hasher and returns
// its digest and size.
func (s *Store) hashFile(ctx context.Context, d digest.ContentDigest) (digest.ContentDigest, int64, error) {
	f, err := os.Open(s.Path(d))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return digest.ContentDigest{}, 0, fmt.Errorf("%s: %w", d, ErrNotFound)
		}
		return digest.ContentDigest{}, 0, err
	}
	defer f.Close()
	h := digest.NewContentHasher()
	n, err := io.CopyBuffer(h, ctxReader{ctx: ctx, r: f}, make([]byte, copyBufferSize))
	if err != nil {
		return digest.ContentDigest{}, 0, err
	}
	return digest.ContentSum(h), n, nil
}

// Verify re-hashes the stored copy of d: nil if intact, ErrNotFound if
// absent, a *DamagedError if its bytes no longer match.
func (s *Store) Verify(ctx context.Context, d digest.ContentDigest) error {
	got, _, err := s.hashFile(ctx, d)
	if err != nil {
		return fmt.Errorf("verify artifact: %w", err)
	}
	if got != d {
		return &DamagedError{Want: d, Got: got, Path: s.Path(d)}
	}
	return nil
}

// Get returns the bytes of d after verifying them. A damaged copy is an
// error, never bytes. Use Open for large objects.
func (s *Store) Get(ctx context.Context, d digest.ContentDigest) ([]byte, error) {
	b, err := os.ReadFile(s.Path(d))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("get artifact %s: %w", d, ErrNotFound)
		}
		return nil, fmt.Errorf("get artifact: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if got := digest.HashContent(b); got != d {
		return nil, &DamagedError{Want: d, Got: got, Path: s.Path(d)}
	}
	return b, nil
}

// Open verifies the whole stored copy of d and then returns a reader of it.
// The reader hashes again as it is read and returns a *DamagedError instead
// of io.EOF if the bytes changed between the check and the read, so a caller
// that reads to EOF without error has read exactly the content d names.
func (s *Store) Open(ctx context.Context, d digest.ContentDigest) (io.ReadCloser, error) {
	if err := s.Verify(ctx, d); err != nil {
		if IsDamaged(err) {
			return nil, err
		}
		return nil, fmt.Errorf("open artifact: %w", err)
	}
	f, err := os.Open(s.Path(d))
	if err != nil {
		return nil, fmt.Errorf("open artifact: %w", err)
	}
	return &verifyingReader{f: f, h: digest.NewContentHasher(), want: d, path: s.Path(d)}, nil
}

// OpenChecked returns a reader of the stored copy of d and its size
// without reading it first: the reader hashes as it is read and returns a
// *DamagedError instead of io.EOF if the bytes are not the content d
// names. For a reader that checks the digest itself as well (a node
// fetching a copy), which is then read once rather than twice.
func (s *Store) OpenChecked(d digest.ContentDigest) (io.ReadCloser, int64, error) {
	f, err := os.Open(s.Path(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, fmt.Errorf("open artifact %s: %w", d, ErrNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("open artifact: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("open artifact: %w", err)
	}
	return &verifyingReader{f: f, h: digest.NewContentHasher(), want: d, path: s.Path(d)}, fi.Size(), nil
}

type verifyingReader struct {
	f    *os.File
	h    *blake3.Hasher
	want digest.ContentDigest
	path string
	err  error
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.f.Read(p)
	if n > 0 {
		_, _ = v.h.Write(p[:n])
	}
	if err == io.EOF {
		if got := digest.ContentSum(v.h); got != v.want {
			v.err = &DamagedError{Want: v.want, Got: got, Path: v.path}
			return n, v.err
		}
		v.err = io.EOF
	}
	return n, err
}

func (v *verifyingReader) Close() error { return v.f.Close() }
