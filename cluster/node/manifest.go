package node

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Manifest says what a group's snapshot holds at its index. It travels as
// the MsgSnap's Data, so it stays small: the state machine's small state
// inline, and a list of entries whose bytes (the body) follow on a stream
// of their own, produced from the manifest later (StateMachine.
// WriteSnapshot) and never held whole. The body is the entries' bytes in
// manifest order, each exactly its Length, so the body's size is known
// before it is written and can be checked when it arrives.
//
// An entry names what its bytes are by its kind, which the state machine
// defines ("log": a session's log up to Length). A kind the restoring
// state machine does not know is refused, never skipped.
type Manifest struct {
	// Inline is the state machine's state carried whole (an applied head,
	// the meta group's membership).
	Inline  []byte
	Entries []ManifestEntry
}

// ManifestEntry is one part of a snapshot's body.
type ManifestEntry struct {
	Kind   string
	Name   string
	Length uint64
}

// manifestMagic opens an encoded manifest; manifestVersion is its layout.
// Stored and sent between nodes: do not renumber.
const (
	manifestMagic   = "TSM"
	manifestVersion = 1
)

// Bounds on a decoded manifest's fields, so a bad one cannot ask for a
// huge allocation.
const (
	maxManifestKind = 64
	maxManifestName = 4096
)

// BodySize is the length of the body: the entries' lengths summed.
// UnmarshalManifest refuses a manifest whose sum exceeds an int64.
func (m Manifest) BodySize() uint64 {
	var n uint64
	for _, e := range m.Entries {
		n += e.Length
	}
	return n
}

// IsEmpty reports a manifest of nothing: the state of a group that has
// none yet (the snapshot a new group starts from).
func (m Manifest) IsEmpty() bool { return len(m.Inline) == 0 && len(m.Entries) == 0 }

// Marshal encodes the manifest: magic, version, the inline state, the
// entry count, then per entry its kind, name and length (byte strings
// length-prefixed, numbers uvarints). The empty manifest is no bytes.
func (m Manifest) Marshal() []byte {
	if m.IsEmpty() {
		return nil
	}
	b := append([]byte(manifestMagic), manifestVersion)
	b = appendBytes(b, m.Inline)
	b = binary.AppendUvarint(b, uint64(len(m.Entries)))
	for _, e := range m.Entries {
		b = appendBytes(b, []byte(e.Kind))
		b = appendBytes(b, []byte(e.Name))
		b = binary.AppendUvarint(b, e.Length)
	}
	return b
}

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// UnmarshalManifest decodes what Marshal encoded; no bytes are the empty
// manifest.
func UnmarshalManifest(data []byte) (Manifest, error) {
	var m Manifest
	if len(data) == 0 {
		return m, nil
	}
	if len(data) < len(manifestMagic)+1 || string(data[:len(manifestMagic)]) != manifestMagic {
		return m, errors.New("snapshot manifest: not a manifest")
	}
	if v := data[len(manifestMagic)]; v != manifestVersion {
		return m, fmt.Errorf("snapshot manifest: version %d, this node reads %d", v, manifestVersion)
	}
	r := bytes.NewReader(data[len(manifestMagic)+1:])
	var err error
	if m.Inline, err = readBytes(r, uint64(len(data))); err != nil {
		return m, fmt.Errorf("snapshot manifest: inline state: %w", err)
	}
	count, err := binary.ReadUvarint(r)
	if err != nil || count > uint64(r.Len()) {
		return m, errors.New("snapshot manifest: bad entry count")
	}
	m.Entries = make([]ManifestEntry, 0, count)
	var total uint64
	for i := range count {
		e, err := readEntry(r)
		if err != nil {
			return m, fmt.Errorf("snapshot manifest: entry %d: %w", i, err)
		}
		if e.Length > math.MaxInt64-total {
			return m, errors.New("snapshot manifest: body size overflows")
		}
		total += e.Length
		m.Entries = append(m.Entries, e)
	}
	if r.Len() != 0 {
		return m, fmt.Errorf("snapshot manifest: %d bytes after the entries", r.Len())
	}
	if m.IsEmpty() {
		// The empty manifest (a new group's state) is no bytes and nothing
		// else: encoded any other way it would restore a group to nothing.
		return Manifest{}, errors.New("snapshot manifest: an empty manifest written as bytes")
	}
	return m, nil
}

func readEntry(r *bytes.Reader) (ManifestEntry, error) {
	kind, err := readBytes(r, maxManifestKind)
	if err != nil {
		return ManifestEntry{}, fmt.Errorf("kind: %w", err)
	}
	name, err := readBytes(r, maxManifestName)
	if err != nil {
		return ManifestEntry{}, fmt.Errorf("name: %w", err)
	}
	length, err := binary.ReadUvarint(r)
	if err != nil {
		return ManifestEntry{}, fmt.Errorf("length: %w", err)
	}
	return ManifestEntry{Kind: string(kind), Name: string(name), Length: length}, nil
}

func readBytes(r *bytes.Reader, limit uint64) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > limit || n > uint64(r.Len()) {
		return nil, fmt.Errorf("%d bytes, limit %d, %d left", n, limit, r.Len())
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}

// WriteEntries writes a body: for each entry, in order, write is given a
// writer that takes exactly the entry's Length bytes; fewer or more is an
// error naming the entry (a log shorter than its manifest says, say).
func (m Manifest) WriteEntries(w io.Writer, write func(e ManifestEntry, w io.Writer) error) error {
	for _, e := range m.Entries {
		ew := &entryWriter{w: w, left: e.Length}
		if err := write(e, ew); err != nil {
			return fmt.Errorf("snapshot entry %s %q: %w", e.Kind, e.Name, err)
		}
		if ew.left != 0 {
			return fmt.Errorf("snapshot entry %s %q: %d of its %d bytes written", e.Kind, e.Name, e.Length-ew.left, e.Length)
		}
	}
	return nil
}

// errEntryOverrun: an entry's writer was given more than its Length.
var errEntryOverrun = errors.New("more bytes than the manifest's length")

type entryWriter struct {
	w    io.Writer
	left uint64
}

func (e *entryWriter) Write(p []byte) (int, error) {
	if uint64(len(p)) > e.left {
		return 0, errEntryOverrun
	}
	n, err := e.w.Write(p)
	e.left -= uint64(n)
	return n, err
}

// ReadEntries reads a body: for each entry, in order, read is given a
// reader of exactly the entry's Length bytes, and must consume them all.
// A body shorter than the manifest says is an error.
func (m Manifest) ReadEntries(body io.Reader, read func(e ManifestEntry, r io.Reader) error) error {
	for _, e := range m.Entries {
		lr := &io.LimitedReader{R: body, N: int64(e.Length)}
		if err := read(e, lr); err != nil {
			return fmt.Errorf("snapshot entry %s %q: %w", e.Kind, e.Name, err)
		}
		if lr.N != 0 {
			return fmt.Errorf("snapshot entry %s %q: %d of its %d bytes read", e.Kind, e.Name, int64(e.Length)-lr.N, e.Length)
		}
	}
	return nil
}
