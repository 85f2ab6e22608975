package backup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/zeebo/blake3"

	"tally/digest"
	"tally/store"
)

// Reader reads a backup file as a stream, verifying as it goes: the header,
// then each part (a session's log, an object) through Next, whose body
// returns an error in place of io.EOF when its bytes are not what the file
// declares, then the end line, where Next returns io.EOF only once the
// digest, the counts and every named object check out and nothing follows.
// A damaged or truncated file is a *DamageError naming the part and the
// byte.
type Reader struct {
	br      *bufio.Reader
	h       *blake3.Hasher
	off     int64 // bytes consumed
	sum     Summary
	body    io.Reader                       // the part under way: drained before the next
	refs    map[digest.ContentDigest]string // object → the first session naming it
	written map[digest.ContentDigest]bool
	objects bool
	lastObj *digest.ContentDigest
	done    bool
	err     error // sticky
}

// Part is one part of a backup: a session (Session set) or an object
// (Object set), and its bytes.
type Part struct {
	Session *Cut
	Object  *Object
	Body    io.Reader
}

// NewReader reads and checks the magic line and the header.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{br: bufio.NewReaderSize(r, store.LineMax+1), h: newDigest(),
		refs: map[digest.ContentDigest]string{}, written: map[digest.ContentDigest]bool{}}
	magic, err := rd.br.Peek(len(Magic))
	if err != nil || string(magic) != Magic {
		reason := fmt.Sprintf("not a tally backup: it does not begin with %q", strings.TrimSpace(Magic))
		if line, _ := rd.br.Peek(min(rd.br.Buffered(), 32)); strings.HasPrefix(string(line), magicPrefix) && !strings.HasPrefix(string(line), Magic) {
			v, _, _ := strings.Cut(string(line[len(magicPrefix):]), "\n")
			reason = fmt.Sprintf("backup format v%s: this tally reads v%d; use a tally that knows v%s", v, Format, v)
		} else if len(magic) < len(Magic) && strings.HasPrefix(Magic, string(magic)) {
			reason = "the file ends inside its first line: it was cut short"
		}
		return nil, rd.damage("header", reason)
	}
	rd.br.Discard(len(Magic))
	rd.consume([]byte(Magic))
	line, err := rd.line(headerMax, "header")
	if err != nil {
		return nil, err
	}
	at := rd.off
	rd.consume(line)
	var h Header
	if err := decodeExact(line, &h, func() []byte { return headerLine(h) }); err != nil {
		return nil, rd.damageAt(at, "header", err.Error())
	}
	if err := h.check(); err != nil {
		return nil, rd.damageAt(at, "header", err.Error())
	}
	rd.sum.Header = h
	return rd, nil
}

// Header is the backup's header.
func (r *Reader) Header() Header { return r.sum.Header }

// Summary is what the file held; whole once Next has returned io.EOF.
func (r *Reader) Summary() Summary { return r.sum }

// Next returns the next part, after reading what the caller left of the
// last one's body; io.EOF once the end line has verified the whole file.
func (r *Reader) Next() (Part, error) {
	if r.err != nil {
		return Part{}, r.err
	}
	if r.done {
		return Part{}, io.EOF
	}
	if r.body != nil {
		if _, err := io.Copy(io.Discard, r.body); err != nil {
			return Part{}, err
		}
	}
	at := r.off
	line, err := r.line(frameMax, "the part after "+r.lastPart())
	if err != nil {
		return Part{}, err
	}
	kind, doc, _ := bytes.Cut(line, []byte{' '})
	if string(kind) != kindEnd {
		r.consume(line) // the end line is outside the digest
	} else {
		r.off += int64(len(line))
	}
	switch string(kind) {
	case kindSession:
		return r.session(at, doc)
	case kindObject:
		return r.object(at, doc)
	case kindEnd:
		return Part{}, r.end(at, doc)
	}
	return Part{}, r.damageAt(at, "the part after "+r.lastPart(), fmt.Sprintf("%q is not a part of a backup (session, object or end)", truncate(kind)))
}

func (r *Reader) session(at int64, doc []byte) (Part, error) {
	var f sessionFrame
	if err := decodeExact(doc, &f, func() []byte { return frameDoc(f) }); err != nil {
		return Part{}, r.damageAt(at, "the session after "+r.lastPart(), err.Error())
	}
	c := Cut{Tenant: f.Tenant, Session: f.Session, Seq: f.Seq, Bytes: f.Bytes, Group: f.Group}
	part := "session " + c.Name()
	var prev *Cut
	if n := len(r.sum.Sessions); n > 0 {
		prev = &r.sum.Sessions[n-1]
	}
	var err error
	if c.Hash, err = parseHash("hash", f.Hash); err == nil {
		err = c.check(prev)
	}
	if err == nil && r.objects {
		err = errors.New("after an object: sessions come first")
	}
	if err != nil {
		return Part{}, r.damageAt(at, part, err.Error())
	}
	b := &sessionBody{r: r, cut: c, left: c.Bytes, chain: store.ChainFrom(store.Position{}), part: part}
	r.body = b
	return Part{Session: &b.cut, Body: b}, nil
}

func (r *Reader) object(at int64, doc []byte) (Part, error) {
	var f objectFrame
	if err := decodeExact(doc, &f, func() []byte { return frameDoc(f) }); err != nil {
		return Part{}, r.damageAt(at, "the object after "+r.lastPart(), err.Error())
	}
	part := "object " + truncate([]byte(f.Content))
	d, err := digest.ParseContentDigest(f.Content)
	switch {
	case err != nil:
		err = fmt.Errorf("content: %w", err)
	case f.Bytes < 0:
		err = fmt.Errorf("bytes: %d: must not be negative", f.Bytes)
	case r.refs[d] == "":
		err = errors.New("no session names it")
	case r.lastObj != nil && compareDigests(d, *r.lastObj) <= 0:
		err = fmt.Errorf("comes after %s: objects are in order, each once", *r.lastObj)
	}
	if err != nil {
		return Part{}, r.damageAt(at, part, err.Error())
	}
	r.objects, r.lastObj = true, &d
	b := &objectBody{r: r, obj: Object{Content: d, Bytes: f.Bytes}, left: f.Bytes, h: digest.NewContentHasher(), part: part}
	r.body = b
	return Part{Object: &b.obj, Body: b}, nil
}

func (r *Reader) end(at int64, doc []byte) error {
	var f endFrame
	if err := decodeExact(doc, &f, func() []byte { return frameDoc(f) }); err != nil {
		return r.damageAt(at, "end", err.Error())
	}
	want, err := parseHash("digest", f.Digest)
	got := sum(r.h)
	switch {
	case err != nil:
	case f.Sessions != len(r.sum.Sessions) || f.Objects != r.sum.Objects:
		err = fmt.Errorf("it counts %d sessions and %d objects; the file holds %d and %d", f.Sessions, f.Objects, len(r.sum.Sessions), r.sum.Objects)
	case want != got:
		err = fmt.Errorf("the digest of the %d bytes before it is %x, not the %s it records: a byte was altered", at, got, f.Digest)
	}
	if err == nil {
		for _, d := range slices.SortedFunc(maps.Keys(r.refs), compareDigests) {
			if !r.written[d] {
				err = fmt.Errorf("object %s, named by session %s, is missing", d, r.refs[d])
				break
			}
		}
	}
	if err == nil {
		if extra, _ := r.br.Peek(1); len(extra) > 0 {
			err = errors.New("bytes follow it")
		}
	}
	if err != nil {
		return r.damageAt(at, "end", err.Error())
	}
	r.sum.Digest, r.sum.Size, r.done = got, r.off, true
	return io.EOF
}

// line reads a line of at most max bytes (with its newline), unconsumed.
func (r *Reader) line(max int, part string) ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	switch {
	case len(line) > max || errors.Is(err, bufio.ErrBufferFull):
		return nil, r.damage(part, fmt.Sprintf("a line longer than %d bytes where a %s line was due", max, part))
	case err == io.EOF:
		return nil, r.damage(part, "the file ends before its end line: it was cut short")
	case err != nil:
		return nil, r.fail(fmt.Errorf("read backup: %w", err))
	}
	return line, nil
}

// consume counts b as read and hashes it into the file's digest.
func (r *Reader) consume(b []byte) {
	r.h.Write(b)
	r.off += int64(len(b))
}

func (r *Reader) lastPart() string {
	switch {
	case r.lastObj != nil:
		return "object " + r.lastObj.String()
	case len(r.sum.Sessions) > 0:
		return "session " + r.sum.Sessions[len(r.sum.Sessions)-1].Name()
	}
	return "header"
}

func (r *Reader) damage(part, reason string) error { return r.damageAt(r.off, part, reason) }

func (r *Reader) damageAt(at int64, part, reason string) error {
	return r.fail(&DamageError{Offset: at, Part: part, Reason: reason})
}

func (r *Reader) fail(err error) error {
	if r.err == nil {
		r.err = err
	}
	return r.err
}

func truncate(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	return string(b)
}

// sessionBody is a session's log as the file holds it: handed out line by
// line, each verified against the chain before it is.
type sessionBody struct {
	r       *Reader
	cut     Cut
	part    string
	left    int64
	chain   *store.Chain
	pending []byte // the rest of the last line verified (in r.br's buffer)
	err     error
}

func (b *sessionBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(b.pending) == 0 {
		if err := b.nextLine(); err != nil {
			b.err = err
			return 0, err
		}
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

func (b *sessionBody) nextLine() error {
	r := b.r
	if b.left == 0 {
		end := b.chain.Position()
		if end.Seq != b.cut.Seq || end.Hash != b.cut.Hash {
			return r.damage(b.part, fmt.Sprintf("its log ends at line %d with hash %x, not at line %d with hash %x as its part line says", end.Seq, end.Hash, b.cut.Seq, b.cut.Hash))
		}
		r.sum.Sessions = append(r.sum.Sessions, b.cut)
		r.body = nil
		return io.EOF
	}
	at := r.off
	lineNo := b.chain.Position().Seq + 1
	line, err := r.br.ReadSlice('\n')
	switch {
	case int64(len(line)) > b.left:
		return r.damageAt(at, b.part, fmt.Sprintf("line %d runs past the session's %d bytes", lineNo, b.cut.Bytes))
	case errors.Is(err, bufio.ErrBufferFull):
		return r.damageAt(at, b.part, fmt.Sprintf("line %d is longer than %d bytes", lineNo, store.LineMax))
	case err == io.EOF:
		return r.damageAt(at, b.part, fmt.Sprintf("the file ends inside line %d: it was cut short", lineNo))
	case err != nil:
		return r.fail(fmt.Errorf("read backup: %w", err))
	}
	r.consume(line)
	b.left -= int64(len(line))
	if _, err := b.chain.Next(line[:len(line)-1]); err != nil {
		return r.damageAt(at, b.part, fmt.Sprintf("line %d: %v", lineNo, err))
	}
	if d, ok := contentRef(line); ok {
		if _, seen := r.refs[d]; !seen {
			r.refs[d] = b.cut.Name()
		}
	}
	b.pending = line
	return nil
}

// objectBody is an object's bytes, hashed as they are read.
type objectBody struct {
	r    *Reader
	obj  Object
	part string
	left int64
	h    *blake3.Hasher
	err  error
}

func (b *objectBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	r := b.r
	if b.left == 0 {
		b.err = io.EOF
		if got := digest.ContentSum(b.h); got != b.obj.Content {
			b.err = r.damage(b.part, fmt.Sprintf("its bytes hash to %s", got))
			return 0, b.err
		}
		r.sum.Objects++
		r.sum.ObjectBytes += b.obj.Bytes
		r.written[b.obj.Content] = true
		r.body = nil
		return 0, b.err
	}
	n, err := r.br.Read(p[:min(int64(len(p)), b.left)])
	r.h.Write(p[:n])
	b.h.Write(p[:n])
	r.off += int64(n)
	b.left -= int64(n)
	switch {
	case err == io.EOF || (n == 0 && err == nil && len(p) > 0):
		b.err = r.damage(b.part, "the file ends inside it: it was cut short")
		return n, b.err
	case err != nil:
		b.err = r.fail(fmt.Errorf("read backup: %w", err))
		return n, b.err
	}
	return n, nil
}

// Verify reads a whole backup file and returns what it holds, or the first
// damage found.
func Verify(r io.Reader) (Summary, error) {
	rd, err := NewReader(r)
	if err != nil {
		return Summary{}, err
	}
	for {
		p, err := rd.Next()
		if err == io.EOF {
			return rd.Summary(), nil
		}
		if err != nil {
			return Summary{}, err
		}
		if _, err := io.Copy(io.Discard, p.Body); err != nil {
			return Summary{}, err
		}
	}
}
