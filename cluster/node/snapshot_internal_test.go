package node

import (
	"io"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster/raftlog"
)

type nopSM struct{ applied map[uint64]uint64 }

func (s *nopSM) Applied(g uint64) (uint64, error) { return s.applied[g], nil }
func (s *nopSM) Apply(g uint64, ents []Entry) ([][]byte, error) {
	s.applied[g] = ents[len(ents)-1].Index
	return make([][]byte, len(ents)), nil
}
func (s *nopSM) Snapshot(g uint64, w io.Writer) (uint64, error) { return s.applied[g], nil }
func (s *nopSM) Restore(g uint64, index uint64, r io.Reader) error {
	s.applied[g] = index
	return nil
}

type nopTransport struct{}

func (nopTransport) Send(uint64, []Envelope) {}

type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.Unix(100, 0) }

// TestSnapshotOverridesPendingConfState: a configuration applied in the
// last iteration, not yet written, must not overwrite the configuration a
// snapshot installed in this iteration saves; otherwise the saved
// configuration index falls below the log's start and the node cannot
// restart.
func TestSnapshotOverridesPendingConfState(t *testing.T) {
	fs := vfs.NewMem()
	db, err := raftlog.Open("/d", raftlog.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(3)
	cfg.Groups = []uint64{2}
	sm := &nopSM{applied: map[uint64]uint64{}}
	n, err := New(cfg, db, sm, nopTransport{}, fixedClock{}, func(uint64) []uint64 { return []uint64{1, 2, 3} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	n.byID[2].confDirty = true // as after applying a conf change
	cs := &pb.ConfState{Voters: []uint64{1, 2, 3}}
	n.Deliver(Envelope{Group: 2, Msg: &pb.Message{
		Type: pb.MessageType_MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(3)), Term: new(uint64(5)),
		Snapshot: &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(50)), Term: new(uint64(5)), ConfState: cs}},
	}})
	for n.Process() {
	}
	if err := n.Failed(); err != nil {
		t.Fatal(err)
	}
	st, _ := db.Group(2)
	if ci := st.ConfIndex(); ci != 50 {
		t.Fatalf("saved configuration index %d after a snapshot at 50", ci)
	}
	db.Close()
	db, err = raftlog.Open("/d", raftlog.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := New(cfg, db, sm, nopTransport{}, fixedClock{}, func(uint64) []uint64 { return nil }, nil); err != nil {
		t.Fatalf("restart after the snapshot: %v", err)
	}
}
