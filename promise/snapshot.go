package promise

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"
)

// snapshotTag names the fold rules a snapshot was taken under. Change it
// whenever Apply or the Promise layout changes meaning, so an old
// checkpoint is rebuilt rather than trusted.
const snapshotTag = "tally promise fold v3" // v3: times packed by instant.Pack, exact over years 1–9999

// AppendSnapshot encodes the state for a checkpoint. Identities are written
// once in a table and referenced by index.
func (s *State) AppendSnapshot(b []byte) []byte {
	b, _ = appendSnapshot(b, s.order, len(s.names), nil)
	return b
}

// StreamSnapshot encodes the state as AppendSnapshot does, after what b
// holds, passing it to emit whenever it reaches chunk bytes and at the end,
// so a large state is never encoded whole in memory. It stops at emit's
// first error.
func (s *State) StreamSnapshot(b []byte, chunk int, emit func([]byte) error) error {
	return streamSnapshot(b, chunk, emit, s.order, len(s.names))
}

// Frozen is the state as it was when Freeze was called, for encoding a
// snapshot without holding the state's lock: while one is out, Apply copies
// a promise before it changes it, so nothing a Frozen holds ever changes.
// Encoding a large state takes long (about a second at a million promises),
// and writers need not wait for it.
type Frozen struct {
	s     *State
	order []*Promise
	names int
}

// Freeze takes a Frozen view of the state. It copies the declaration order
// (a pointer a promise) and nothing else. Call it, and Release, under the
// same exclusion as Apply.
func (s *State) Freeze() *Frozen {
	s.gen++
	s.frozen++
	return &Frozen{s: s, order: append([]*Promise(nil), s.order...), names: len(s.names)}
}

// Release ends the view: Apply stops copying for it once no view is out.
func (f *Frozen) Release() {
	if f.s != nil {
		f.s.frozen--
		f.s = nil
	}
}

// AppendSnapshot encodes the frozen state, as State.AppendSnapshot encodes
// the live one. It may run concurrently with Apply on the state.
func (f *Frozen) AppendSnapshot(b []byte) []byte {
	b, _ = appendSnapshot(b, f.order, f.names, nil)
	return b
}

// StreamSnapshot is State.StreamSnapshot for the frozen state. It may run
// concurrently with Apply on the state.
func (f *Frozen) StreamSnapshot(b []byte, chunk int, emit func([]byte) error) error {
	return streamSnapshot(b, chunk, emit, f.order, f.names)
}

func streamSnapshot(b []byte, chunk int, emit func([]byte) error, order []*Promise, names int) error {
	b, err := appendSnapshot(b, order, names, func(b []byte) ([]byte, error) {
		if len(b) < chunk {
			return b, nil
		}
		return b[:0], emit(b)
	})
	if err != nil {
		return err
	}
	return emit(b)
}

// appendSnapshot encodes a snapshot of order onto b, calling flush (if not
// nil) between promises with what it holds; flush returns the buffer to go
// on with.
func appendSnapshot(b []byte, order []*Promise, names int, flush func([]byte) ([]byte, error)) ([]byte, error) {
	b = appendStr(b, snapshotTag)
	index := make(map[string]uint64, names)
	var table []string
	ref := func(v string) uint64 {
		if v == "" {
			return 0
		}
		i, ok := index[v]
		if !ok {
			table = append(table, v)
			i = uint64(len(table))
			index[v] = i
		}
		return i
	}
	// First pass fills the table so it can precede the records.
	var horizons, assessments, evidence, resolved uint64
	for _, p := range order {
		ref(p.By)
		ref(p.To)
		horizons += uint64(len(p.Horizons))
		assessments += uint64(len(p.Assessments))
		if p.Resolution != nil {
			ref(p.Resolution.By)
			evidence += uint64(len(p.Resolution.Evidence))
			resolved++
		}
		for _, a := range p.Assessments {
			ref(a.Observer)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(table)))
	for _, v := range table {
		b = appendStr(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(order)))
	b = binary.AppendUvarint(b, horizons)
	b = binary.AppendUvarint(b, assessments)
	b = binary.AppendUvarint(b, evidence)
	b = binary.AppendUvarint(b, resolved)
	for _, p := range order {
		if flush != nil {
			var err error
			if b, err = flush(b); err != nil {
				return nil, err
			}
		}
		b = appendStr(b, p.ID)
		b = appendStr(b, p.Text)
		b = binary.AppendUvarint(b, ref(p.By))
		b = binary.AppendUvarint(b, ref(p.To))
		b = appendStr(b, p.On)
		b = appendStr(b, p.Task)
		b = appendStr(b, p.Meta)
		b = binary.AppendUvarint(b, p.Seq)
		b = binary.AppendVarint(b, p.Declared)
		b = binary.AppendUvarint(b, uint64(len(p.Horizons)))
		for _, h := range p.Horizons {
			b = binary.AppendVarint(b, h)
		}
		if r := p.Resolution; r == nil {
			b = append(b, 0)
		} else {
			b = append(b, 1)
			b = appendStr(b, r.As)
			b = binary.AppendUvarint(b, ref(r.By))
			b = binary.AppendUvarint(b, uint64(len(r.Evidence)))
			for _, e := range r.Evidence {
				b = appendStr(b, e)
			}
			b = appendStr(b, r.Reason)
			b = binary.AppendVarint(b, r.At)
			b = binary.AppendUvarint(b, r.Seq)
		}
		b = binary.AppendUvarint(b, uint64(len(p.Assessments)))
		for _, a := range p.Assessments {
			b = binary.AppendUvarint(b, ref(a.Observer))
			b = appendStr(b, a.State)
			b = appendStr(b, a.Note)
			b = appendStr(b, a.Meta)
			b = binary.AppendVarint(b, a.At)
			b = binary.AppendUvarint(b, a.Seq)
		}
	}
	return b, nil
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errSnapshot = errors.New("promise snapshot is malformed")

// minPromiseBytes is the least a promise occupies in a snapshot: nine
// length-prefixed or varint fields, at least one horizon, the resolution
// flag and the assessment count.
const minPromiseBytes = 12

// snapReader reads a snapshot held as one string, so every decoded string
// shares its memory instead of allocating.
type snapReader struct {
	s   string
	i   int
	err error
}

func (r *snapReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	var x uint64
	var shift uint
	for n := 0; n < binary.MaxVarintLen64; n++ {
		if r.i >= len(r.s) {
			r.err = errSnapshot
			return 0
		}
		c := r.s[r.i]
		r.i++
		if c < 0x80 {
			return x | uint64(c)<<shift
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	r.err = errSnapshot
	return 0
}

func (r *snapReader) varint() int64 {
	u := r.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (r *snapReader) str() string {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.s)-r.i) {
		r.err = errSnapshot
		return ""
	}
	v := r.s[r.i : r.i+int(n)]
	r.i += int(n)
	return v
}

func (r *snapReader) byte1() byte {
	if r.err != nil || r.i >= len(r.s) {
		r.err = errSnapshot
		return 0
	}
	c := r.s[r.i]
	r.i++
	return c
}

// count reads a length and bounds it by the bytes left, so a damaged
// snapshot cannot ask for a huge allocation.
func (r *snapReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.s)-r.i)+1 {
		r.err = errSnapshot
		return 0
	}
	return int(n)
}

// readRun reads a count and that many items into the slab, a slice whose
// capacity the snapshot's header gave, and returns them as a full slice
// expression of it, so a later append (an amend) copies instead of writing
// into the next promise's items; nil when there are none. A count past the
// slab's capacity is damage: it sets r.err and reads nothing.
func readRun[T any](r *snapReader, slab *[]T, item func() T) []T {
	n := r.count()
	if len(*slab)+n > cap(*slab) {
		r.err = errSnapshot
		return nil
	}
	if n == 0 {
		return nil
	}
	start := len(*slab)
	for range n {
		*slab = append(*slab, item())
	}
	return (*slab)[start:len(*slab):len(*slab)]
}

// ReadSnapshot decodes a snapshot written by AppendSnapshot, returning the
// state and the bytes after it. The state keeps references into data: the
// caller must not modify data afterwards.
func ReadSnapshot(data []byte) (*State, []byte, error) {
	// The payload is read once from the checkpoint file and never written
	// again, so the state's strings may share its memory instead of a copy
	// (74 MB for a million promises).
	r := &snapReader{s: unsafe.String(unsafe.SliceData(data), len(data))}
	if tag := r.str(); tag != snapshotTag {
		return nil, nil, fmt.Errorf("promise snapshot is %q, not %q", tag, snapshotTag)
	}
	table := make([]string, r.count()+1)
	for i := 1; i < len(table); i++ {
		table[i] = r.str()
	}
	name := func() string {
		i := r.uvarint()
		if i >= uint64(len(table)) {
			r.err = errSnapshot
			return ""
		}
		return table[i]
	}
	n := r.count()
	// Every promise takes at least minPromiseBytes of the snapshot, which
	// bounds what a damaged count can make us allocate.
	if n > (len(r.s)-r.i)/minPromiseBytes+1 {
		r.err = errSnapshot
	}
	horizons := make([]int64, 0, r.count())
	assessments := make([]Assessment, 0, r.count())
	evidence := make([]string, 0, r.count())
	resolutions := make([]Resolution, 0, r.count())
	slab := make([]Promise, n)
	s := &State{order: make([]*Promise, 0, n), names: make(map[string]string, len(table))}
	s.indexStale = true // built on first use: many reads never look an id up
	for _, v := range table[1:] {
		s.names[v] = v
	}
	for k := 0; k < n && r.err == nil; k++ {
		p := &slab[k]
		p.ID, p.Text, p.By, p.To = r.str(), r.str(), name(), name()
		p.On, p.Task, p.Meta = r.str(), r.str(), r.str()
		p.Seq, p.Declared = r.uvarint(), r.varint()
		if p.Horizons = readRun(r, &horizons, r.varint); len(p.Horizons) == 0 {
			r.err = errSnapshot // every promise has a deadline
			break
		}
		if r.byte1() == 1 {
			if len(resolutions) == cap(resolutions) {
				r.err = errSnapshot
				break
			}
			resolutions = append(resolutions, Resolution{As: r.str(), By: name()})
			res := &resolutions[len(resolutions)-1]
			res.Evidence = readRun(r, &evidence, r.str)
			res.Reason, res.At, res.Seq = r.str(), r.varint(), r.uvarint()
			p.Resolution = res
		}
		p.Assessments = readRun(r, &assessments, func() Assessment {
			return Assessment{Observer: name(), State: r.str(), Note: r.str(), Meta: r.str(), At: r.varint(), Seq: r.uvarint()}
		})
		s.order = append(s.order, p)
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	return s, data[r.i:], nil
}
