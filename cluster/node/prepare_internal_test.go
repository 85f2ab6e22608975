package node

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// preparerSM is a nopSM that is a Preparer: it records what Prepare and
// Apply were handed, in order, and writes a key of its own in the raft
// batch at each Prepare. Apply's entries are recorded without Waited,
// which only Apply is given, and the indexes it marks in waited.
type preparerSM struct {
	*nopSM
	calls  []string
	waited []uint64
}

func (s *preparerSM) Prepare(g uint64, ents []Entry, w PrepareWriter) error {
	s.calls = append(s.calls, fmt.Sprintf("prepare %v", ents))
	return w.Set([]byte("Tprepared"), fmt.Appendf(nil, "%d", ents[len(ents)-1].Index))
}

func (s *preparerSM) Apply(g uint64, ents []Entry) ([][]byte, error) {
	bare := make([]Entry, len(ents))
	for i, e := range ents {
		if e.Waited {
			s.waited = append(s.waited, e.Index)
		}
		e.Waited = false
		bare[i] = e
	}
	s.calls = append(s.calls, fmt.Sprintf("apply %v", bare))
	return s.nopSM.Apply(g, ents)
}

// TestPrepareGetsTheBatchApplyGets: a Preparer is handed each batch before
// it applies, the same entries, and what it writes is in the store when
// Apply runs (it went with the iteration's raft writes).
func TestPrepareGetsTheBatchApplyGets(t *testing.T) {
	sm := &preparerSM{nopSM: newNopSM()}
	n, db := newTestNode(t, vfs.NewMem(), 1, sm, &capture{}, []uint64{1})
	defer db.Close()
	n.Campaign(2)
	drain(n)
	var got ProposeResult
	n.Propose(2, []byte("cmd"), func(r ProposeResult) { got = r })
	drain(n)
	if err := n.Failed(); err != nil || got.Err != nil || got.Index == 0 {
		t.Fatalf("proposal: %+v, node failed: %v", got, err)
	}
	if len(sm.calls) == 0 || len(sm.calls)%2 != 0 {
		t.Fatalf("calls %q, want prepare and apply in pairs", sm.calls)
	}
	for i := 0; i < len(sm.calls); i += 2 {
		p, a := sm.calls[i], sm.calls[i+1]
		if p[len("prepare "):] != a[len("apply "):] {
			t.Fatalf("prepared %q, then applied %q", p, a)
		}
	}
	last := sm.calls[len(sm.calls)-1]
	want := fmt.Sprintf("apply %v", []Entry{{Index: got.Index, Kind: KindCommand, Data: []byte("cmd")}})
	if last != want {
		t.Fatalf("last call %q, want %q", last, want)
	}
	v, closer, err := db.Pebble().Get([]byte("Tprepared"))
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if string(v) != fmt.Sprint(got.Index) {
		t.Fatalf("prepared key holds %q, want %d", v, got.Index)
	}
	if sm.applied[2] != got.Index {
		t.Fatalf("applied %d, want %d", sm.applied[2], got.Index)
	}
	// Only the entry this node proposed, and waits for, is marked waited
	// (not the new leader's empty entry).
	if len(sm.waited) != 1 || sm.waited[0] != got.Index {
		t.Fatalf("entries applied as waited for: %v, want only the proposal's %d", sm.waited, got.Index)
	}
}
