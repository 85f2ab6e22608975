package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"

	"tally/claim"
	"tally/expect"
	"tally/jsonline"
	"tally/promise"
	"tally/store"
)

// State is everything folded from one session's log: one state per record
// family, and the lines kept but not folded.
type State struct {
	Promises *promise.State
	Claims   *claim.State
	Expects  *expect.State
	// Skipped counts lines kept in the log but not folded, by record type:
	// types this version does not know, and known types in a shape it
	// cannot read (written by a newer or foreign tool).
	Skipped map[string]*SkipCount

	// requests is the idempotency table: (principal, request id) → the
	// command's digest and recorded response.
	requests map[string]*requestEntry

	// refolds locates the lines of families whose state has no snapshot
	// codec, so a checkpoint can re-fold just those lines on load instead
	// of the whole log.
	refolds []lineRef
}

type lineRef struct {
	Offset int64
	Size   uint32
	Seq    uint64
}

// SkipCount records how many lines of a type were skipped, and the first.
type SkipCount struct {
	Count     uint64
	FirstLine uint64
	Reason    string
}

func newState(cfg Config) *State {
	return &State{
		Promises: promise.NewState(),
		Claims:   claim.NewStateConfig(claim.Config{Timekeeper: cfg.Timekeeper}),
		Expects:  expect.NewState(cfg.expectConfig()),
		Skipped:  map[string]*SkipCount{},
	}
}

// apply folds one verified log line. A line that is not JSON, or whose
// envelope is damaged, is an error with its line number; a line that is JSON
// but unknown or unreadable to this version is kept and counted.
func (s *State) apply(e store.Entry) error {
	typ, err := promise.PeekType(e.Line)
	if err != nil {
		return fmt.Errorf("line %d: %w", e.Env.Seq, err)
	}
	for _, f := range s.folders() {
		if !f.Known(typ) {
			continue
		}
		if err := f.ApplyLine(metaOf(e), e.Line); err != nil {
			return s.decodeFailed(typ, e, err)
		}
		if f.refold {
			s.refolds = append(s.refolds, lineRef{Offset: e.Offset, Size: uint32(len(e.Line)), Seq: e.Env.Seq})
		}
		return nil
	}
	switch {
	case typ == TypeRequest:
		if err := s.applyRequest(e); err != nil {
			return fmt.Errorf("line %d: %w", e.Env.Seq, err)
		}
		s.refolds = append(s.refolds, lineRef{Offset: e.Offset, Size: uint32(len(e.Line)), Seq: e.Env.Seq})
	default:
		if !jsonline.Valid(e.Line) {
			return fmt.Errorf("line %d: not a JSON object", e.Env.Seq)
		}
		s.skip(typ, e.Env.Seq, "unknown record type")
	}
	return nil
}

// decodeFailed sorts a family decoder's error: bad JSON is damage; a record
// of a known type in a shape this version cannot read is kept and counted,
// never fatal (a newer writer may have added to it).
func (s *State) decodeFailed(typ string, e store.Entry, err error) error {
	var se *jsonline.SyntaxError
	if errors.As(err, &se) || !jsonline.Valid(e.Line) {
		return fmt.Errorf("line %d: %w", e.Env.Seq, err)
	}
	s.skip(typ, e.Env.Seq, err.Error())
	return nil
}

func (s *State) skip(typ string, seq uint64, reason string) {
	c := s.Skipped[typ]
	if c == nil {
		c = &SkipCount{FirstLine: seq, Reason: reason}
		s.Skipped[typ] = c
	}
	c.Count++
}

// SkippedSummary is the one-line warning for skipped lines, or "".
func (s *State) SkippedSummary() string {
	if len(s.Skipped) == 0 {
		return ""
	}
	types := make([]string, 0, len(s.Skipped))
	var total uint64
	for t, c := range s.Skipped {
		types = append(types, fmt.Sprintf("%q ×%d (first at line %d: %s)", t, c.Count, c.FirstLine, c.Reason))
		total += c.Count
	}
	sort.Strings(types)
	return fmt.Sprintf("the log holds %d record(s) this tally cannot fold, kept as they are: %s; see `tally verify`", total, strings.Join(types, ", "))
}

// snapshotTag versions the whole checkpoint payload.
const snapshotTag = "tally ledger state v2"

// snapshotHead is what a checkpoint holds besides the promise state, copied
// so that it can be encoded without the session lock.
type snapshotHead struct {
	skipped []namedSkip
	refolds []lineRef
}

type namedSkip struct {
	typ string
	SkipCount
}

func (s *State) snapshotHead() snapshotHead {
	h := snapshotHead{skipped: make([]namedSkip, 0, len(s.Skipped))}
	for t, c := range s.Skipped {
		h.skipped = append(h.skipped, namedSkip{t, *c})
	}
	sort.Slice(h.skipped, func(i, j int) bool { return h.skipped[i].typ < h.skipped[j].typ })
	// Refolds only ever grow: the lines up to here never change.
	h.refolds = s.refolds[:len(s.refolds):len(s.refolds)]
	return h
}

func (h snapshotHead) append(b []byte) []byte {
	b = appendStr(b, snapshotTag)
	b = binary.AppendUvarint(b, uint64(len(h.skipped)))
	for _, c := range h.skipped {
		b = appendStr(b, c.typ)
		b = binary.AppendUvarint(b, c.Count)
		b = binary.AppendUvarint(b, c.FirstLine)
		b = appendStr(b, c.Reason)
	}
	b = binary.AppendUvarint(b, uint64(len(h.refolds)))
	var prev int64
	for _, r := range h.refolds {
		b = binary.AppendUvarint(b, uint64(r.Offset-prev))
		b = binary.AppendUvarint(b, uint64(r.Size))
		b = binary.AppendUvarint(b, r.Seq)
		prev = r.Offset
	}
	return b
}

func appendStr(b []byte, v string) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

var errSnapshot = errors.New("ledger snapshot is malformed")

// readSnapshot restores a state from a checkpoint payload, re-folding the
// lines of families without a snapshot codec from the log.
func readSnapshot(cfg Config, b []byte, lg *store.Log) (*State, error) {
	str := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", false
		}
		v := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return v, true
	}
	num := func() (uint64, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 {
			return 0, false
		}
		b = b[k:]
		return n, true
	}
	if tag, ok := str(); !ok || tag != snapshotTag {
		return nil, errSnapshot
	}
	s := newState(cfg)
	nt, ok := num()
	if !ok || nt > uint64(len(b)) {
		return nil, errSnapshot
	}
	for i := uint64(0); i < nt; i++ {
		t, ok1 := str()
		c, ok2 := num()
		f, ok3 := num()
		r, ok4 := str()
		if !(ok1 && ok2 && ok3 && ok4) {
			return nil, errSnapshot
		}
		s.Skipped[t] = &SkipCount{Count: c, FirstLine: f, Reason: r}
	}
	nr, ok := num()
	if !ok || nr > uint64(len(b)) {
		return nil, errSnapshot
	}
	refs := make([]lineRef, 0, nr)
	var off int64
	for i := uint64(0); i < nr; i++ {
		d, ok1 := num()
		size, ok2 := num()
		seq, ok3 := num()
		if !(ok1 && ok2 && ok3) || size > store.LineMax {
			return nil, errSnapshot
		}
		off += int64(d)
		refs = append(refs, lineRef{Offset: off, Size: uint32(size), Seq: seq})
	}
	ps, rest, err := promise.ReadSnapshot(b)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, errSnapshot
	}
	s.Promises = ps
	for _, r := range refs {
		line, err := lg.ReadLine(r.Offset, int(r.Size), r.Seq)
		if err != nil {
			return nil, err
		}
		env, err := store.ParseEnvelope(line)
		if err != nil {
			return nil, err
		}
		if err := s.apply(store.Entry{Line: line, Env: env, Offset: r.Offset}); err != nil {
			return nil, err
		}
	}
	return s, nil
}
