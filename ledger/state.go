package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"

	"tally/promise"
	"tally/store"
)

// State is everything folded from one session's log.
type State struct {
	Promises *promise.State
	// Skipped counts lines kept in the log but not folded, by record type:
	// types this version does not know, and known types in a shape it
	// cannot read (written by a newer or foreign tool).
	Skipped map[string]*SkipCount
}

// SkipCount records how many lines of a type were skipped, and the first.
type SkipCount struct {
	Count     uint64
	FirstLine uint64
	Reason    string
}

func newState() *State {
	return &State{Promises: promise.NewState(), Skipped: map[string]*SkipCount{}}
}

// apply folds one verified log line. A line that is not JSON, or whose
// envelope is damaged, never reaches here (the store refuses it); a line
// that is JSON but unknown or unreadable to this version is kept and counted.
func (s *State) apply(e store.Entry) error {
	ev, err := promise.Decode(e.Line)
	if err != nil {
		var de *promise.DecodeError
		switch {
		case errors.Is(err, promise.ErrUnknownType):
			s.skip(ev.Type, e.Env.Seq, "unknown record type")
			return nil
		case errors.As(err, &de):
			s.skip(typeOf(e.Line), e.Env.Seq, de.Error())
			return nil
		default:
			return fmt.Errorf("line %d: %w", e.Env.Seq, err)
		}
	}
	s.Promises.Apply(promise.Meta{Seq: e.Env.Seq, Actor: e.Env.Actor}, &ev)
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
const snapshotTag = "tally ledger state v1"

func (s *State) appendSnapshot(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(snapshotTag)))
	b = append(b, snapshotTag...)
	types := make([]string, 0, len(s.Skipped))
	for t := range s.Skipped {
		types = append(types, t)
	}
	sort.Strings(types)
	b = binary.AppendUvarint(b, uint64(len(types)))
	for _, t := range types {
		c := s.Skipped[t]
		b = appendStr(b, t)
		b = binary.AppendUvarint(b, c.Count)
		b = binary.AppendUvarint(b, c.FirstLine)
		b = appendStr(b, c.Reason)
	}
	return s.Promises.AppendSnapshot(b)
}

func appendStr(b []byte, v string) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func readSnapshot(b []byte) (*State, error) {
	bad := errors.New("ledger snapshot is malformed")
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
		return nil, bad
	}
	s := newState()
	nt, ok := num()
	if !ok || nt > uint64(len(b)) {
		return nil, bad
	}
	for i := uint64(0); i < nt; i++ {
		t, ok1 := str()
		c, ok2 := num()
		f, ok3 := num()
		r, ok4 := str()
		if !(ok1 && ok2 && ok3 && ok4) {
			return nil, bad
		}
		s.Skipped[t] = &SkipCount{Count: c, FirstLine: f, Reason: r}
	}
	ps, rest, err := promise.ReadSnapshot(b)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, bad
	}
	s.Promises = ps
	return s, nil
}

// typeOf pulls the "type" member out of a line for reporting.
func typeOf(line []byte) string {
	t, _ := promise.PeekType(line)
	return t
}
