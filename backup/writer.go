package backup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/zeebo/blake3"

	"tally/digest"
	"tally/store"
)

// Writer writes a backup file as a stream: the header, then each session,
// then each object its sessions name, then the end. It checks what it is
// given as a reader would: a session's lines must chain up to its cut, an
// object's bytes must hash to its digest; a source that fails a check is
// an error, and the stream is then unusable (the caller discards it).
type Writer struct {
	dst     io.Writer      // the end line goes straight here, outside the digest
	bw      *bufio.Writer  // everything before it, through the digest
	h       *blake3.Hasher // the file's digest
	count   counter        // the bytes before the end line
	sum     Summary
	refs    map[digest.ContentDigest]string // object → the first session naming it
	objects bool                            // an object was written: no more sessions
	lastObj *digest.ContentDigest
	err     error // sticky: the first failure
}

// NewWriter writes the magic line and the header to dst. Format and
// LogFormat are filled in.
func NewWriter(dst io.Writer, h Header) (*Writer, error) {
	h.Format, h.LogFormat = Format, store.FormatVersion
	h.Created = h.Created.UTC()
	if err := h.check(); err != nil {
		return nil, fmt.Errorf("backup header: %w", err)
	}
	w := &Writer{dst: dst, h: newDigest(), refs: map[digest.ContentDigest]string{}}
	w.bw = bufio.NewWriterSize(io.MultiWriter(dst, w.h, &w.count), 1<<16)
	w.bw.WriteString(Magic)
	w.bw.Write(headerLine(h))
	w.sum.Header = h
	return w, nil
}

// Session writes one session: c names it and its cut, log yields its
// first c.Bytes bytes. Sessions come in order (tenant, then session) and
// before every object.
func (w *Writer) Session(c Cut, log io.Reader) error {
	if w.err != nil {
		return w.err
	}
	var prev *Cut
	if n := len(w.sum.Sessions); n > 0 {
		prev = &w.sum.Sessions[n-1]
	}
	if err := c.check(prev); err != nil {
		return w.fail(fmt.Errorf("backup session %s: %w", c.Name(), err))
	}
	if w.objects {
		return w.fail(fmt.Errorf("backup session %s: after an object: sessions come first", c.Name()))
	}
	w.bw.Write(appendFrame(nil, kindSession, c.frame()))
	br := bufio.NewReaderSize(io.LimitReader(log, c.Bytes), int(min(max(c.Bytes+1, 4096), store.LineMax+1)))
	chain := store.ChainFrom(store.Position{})
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 && err == nil {
			if _, cerr := chain.Next(line[:len(line)-1]); cerr != nil {
				return w.fail(fmt.Errorf("backup session %s: line %d: %w", c.Name(), chain.Position().Seq+1, cerr))
			}
			if d, ok := contentRef(line); ok {
				if _, seen := w.refs[d]; !seen {
					w.refs[d] = c.Name()
				}
			}
			if _, err := w.bw.Write(line); err != nil {
				return w.fail(fmt.Errorf("backup: write: %w", err))
			}
			continue
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return w.fail(fmt.Errorf("backup session %s: line %d: longer than %d bytes", c.Name(), chain.Position().Seq+1, store.LineMax))
		case err == io.EOF && len(line) > 0:
			return w.fail(fmt.Errorf("backup session %s: its cut at byte %d is inside line %d", c.Name(), c.Bytes, chain.Position().Seq+1))
		case err != io.EOF:
			return w.fail(fmt.Errorf("backup session %s: read: %w", c.Name(), err))
		}
		break
	}
	if end := chain.Position(); end.Offset != c.Bytes || end.Seq != c.Seq || end.Hash != c.Hash {
		return w.fail(fmt.Errorf("backup session %s: its log ends at line %d (byte %d), not at its cut, line %d (byte %d)", c.Name(), end.Seq, end.Offset, c.Seq, c.Bytes))
	}
	w.sum.Sessions = append(w.sum.Sessions, c)
	return nil
}

// Pending lists, in order, the objects the sessions written so far name
// and that are not written yet.
func (w *Writer) Pending() []digest.ContentDigest {
	out := slices.SortedFunc(maps.Keys(w.refs), compareDigests)
	if w.lastObj != nil {
		out = slices.DeleteFunc(out, func(d digest.ContentDigest) bool { return compareDigests(d, *w.lastObj) <= 0 })
	}
	return out
}

func compareDigests(a, b digest.ContentDigest) int { return slices.Compare(a[:], b[:]) }

// Object writes one object, size bytes from r, which must hash to d. Only
// the objects a session names are written, in order, after the sessions.
func (w *Writer) Object(d digest.ContentDigest, size int64, r io.Reader) error {
	if w.err != nil {
		return w.err
	}
	switch {
	case w.refs[d] == "":
		return w.fail(fmt.Errorf("backup object %s: no session names it", d))
	case w.lastObj != nil && compareDigests(d, *w.lastObj) <= 0:
		return w.fail(fmt.Errorf("backup object %s: comes after %s: objects are in order, each once", d, *w.lastObj))
	case size < 0:
		return w.fail(fmt.Errorf("backup object %s: size %d", d, size))
	}
	w.objects, w.lastObj = true, &d
	w.bw.Write(appendFrame(nil, kindObject, objectFrame{Content: d.String(), Bytes: size}))
	h := digest.NewContentHasher()
	n, err := io.Copy(io.MultiWriter(w.bw, h), io.LimitReader(r, size))
	switch {
	case err != nil:
		return w.fail(fmt.Errorf("backup object %s: read: %w", d, err))
	case n != size:
		return w.fail(fmt.Errorf("backup object %s: %d bytes, not %d", d, n, size))
	case digest.ContentSum(h) != d:
		return w.fail(fmt.Errorf("backup object %s: its bytes hash to %s: the stored copy is damaged", d, digest.ContentSum(h)))
	}
	w.sum.Objects++
	w.sum.ObjectBytes += size
	return nil
}

// Close writes the end line, once every object a session names is
// written, and returns what the backup holds.
func (w *Writer) Close() (Summary, error) {
	if w.err != nil {
		return Summary{}, w.err
	}
	if p := w.Pending(); len(p) > 0 {
		return Summary{}, w.fail(fmt.Errorf("backup object %s: named by session %s, not written", p[0], w.refs[p[0]]))
	}
	if err := w.bw.Flush(); err != nil {
		return Summary{}, w.fail(fmt.Errorf("backup: write: %w", err))
	}
	w.sum.Digest = sum(w.h)
	end := appendFrame(nil, kindEnd, endFrame{Sessions: len(w.sum.Sessions), Objects: w.sum.Objects, Digest: fmt.Sprintf("%x", w.sum.Digest)})
	if _, err := w.dst.Write(end); err != nil {
		return Summary{}, w.fail(fmt.Errorf("backup: write: %w", err))
	}
	w.sum.Size = w.count.n + int64(len(end))
	w.err = errors.New("backup: the writer is closed")
	return w.sum, nil
}

// counter counts the bytes written through it.
type counter struct{ n int64 }

func (c *counter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = err
	}
	return w.err
}
