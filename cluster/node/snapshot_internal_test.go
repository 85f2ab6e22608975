package node

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"tally/cluster/raftlog"
)

// restored is one Restore the nopSM saw.
type restored struct {
	index uint64
	man   Manifest
	body  string
}

// nopSM applies nothing but indexes; its snapshot is one entry, "body".
type nopSM struct {
	applied  map[uint64]uint64
	restores []restored
}

func newNopSM() *nopSM { return &nopSM{applied: map[uint64]uint64{}} }

func (s *nopSM) Applied(g uint64) (uint64, error) { return s.applied[g], nil }
func (s *nopSM) Apply(g uint64, ents []Entry) ([][]byte, error) {
	s.applied[g] = ents[len(ents)-1].Index
	return make([][]byte, len(ents)), nil
}

var nopBody = []byte("body")

func (s *nopSM) Snapshot(g uint64) (uint64, Manifest, error) {
	return s.applied[g], Manifest{Inline: []byte("head"), Entries: []ManifestEntry{{Kind: "x", Name: "a", Length: uint64(len(nopBody))}}}, nil
}

func (s *nopSM) WriteSnapshot(g uint64, m Manifest, w io.Writer) error {
	_, err := w.Write(nopBody)
	return err
}

func (s *nopSM) Restore(g uint64, index uint64, m Manifest, r io.Reader) error {
	b, err := io.ReadAll(r)
	s.applied[g] = index
	s.restores = append(s.restores, restored{index, m, string(b)})
	return err
}

// capture is a transport that keeps what the node sends.
type capture struct {
	msgs  []*pb.Message
	snaps []OutboundSnapshot
}

func (c *capture) Send(_ uint64, batch []Envelope) {
	for _, e := range batch {
		c.msgs = append(c.msgs, e.Msg)
	}
}

func (c *capture) SendSnapshot(_ uint64, s OutboundSnapshot) { c.snaps = append(c.snaps, s) }

type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.Unix(100, 0) }

func newTestNode(t *testing.T, fs vfs.FS, id uint64, sm StateMachine, tr Transport, voters []uint64) (*MultiRaft, *raftlog.DB) {
	t.Helper()
	db, err := raftlog.Open("/d", raftlog.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(id)
	cfg.Groups = []uint64{2}
	cfg.CompactAfter, cfg.CompactKeep = 20, 5
	n, err := New(cfg, db, sm, tr, fixedClock{}, func(uint64) []uint64 { return voters }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n, db
}

func drain(n *MultiRaft) {
	for n.Process() {
	}
}

// TestSnapshotOverridesPendingConfState: a configuration applied in the
// last iteration, not yet written, must not overwrite the configuration a
// snapshot installed in this iteration saves; otherwise the saved
// configuration index falls below the log's start and the node cannot
// restart.
func TestSnapshotOverridesPendingConfState(t *testing.T) {
	fs := vfs.NewMem()
	sm := newNopSM()
	n, db := newTestNode(t, fs, 3, sm, &capture{}, []uint64{1, 2, 3})
	n.byID[2].confDirty = true // as after applying a conf change
	n.Deliver(snapMsg(50, Manifest{}, nil))
	drain(n)
	if err := n.Failed(); err != nil {
		t.Fatal(err)
	}
	st, _ := db.Group(2)
	if ci := st.ConfIndex(); ci != 50 {
		t.Fatalf("saved configuration index %d after a snapshot at 50", ci)
	}
	db.Close()
	db, err := raftlog.Open("/d", raftlog.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := New(DefaultConfig(3), db, sm, &capture{}, fixedClock{}, func(uint64) []uint64 { return nil }, nil); err != nil {
		t.Fatalf("restart after the snapshot: %v", err)
	}
}

// body is a received snapshot body that says whether it was closed.
type body struct {
	*bytes.Reader
	closed bool
}

func (b *body) Close() error { b.closed = true; return nil }

// snapMsg is a MsgSnap from node 1 to node 3 in group 2 at index, with
// a body if one is given.
func snapMsg(index uint64, m Manifest, b *body) Envelope {
	env := Envelope{Group: 2, Msg: &pb.Message{
		Type: pb.MessageType_MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(3)), Term: new(uint64(5)),
		Snapshot: &pb.Snapshot{Data: m.Marshal(), Metadata: &pb.SnapshotMetadata{Index: new(index), Term: new(uint64(5)),
			ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}},
	}}
	if b != nil {
		env.Snapshot = &InboundSnapshot{Body: b}
	}
	return env
}

// TestReceivedSnapshotRestoresFromItsBody: a MsgSnap raft takes is
// restored from the body it came with, which is then closed; one raft does
// not take (stale, or replaced by a newer one before the loop ran) is
// closed at once and never restored; one whose body did not come is not
// stepped at all.
func TestReceivedSnapshotRestoresFromItsBody(t *testing.T) {
	sm := newNopSM()
	n, db := newTestNode(t, vfs.NewMem(), 3, sm, &capture{}, []uint64{1, 2, 3})
	defer db.Close()
	man := Manifest{Inline: []byte("h"), Entries: []ManifestEntry{{Kind: "x", Name: "a", Length: 5}}}
	deliver := func(index uint64, b *body) (stepped, taken bool) {
		env := snapMsg(index, man, b)
		env.Snapshot.Stepped = func(took bool) { stepped, taken = true, took }
		n.Deliver(env)
		return stepped, taken
	}
	restores := func() int { drain(n); return len(sm.restores) - 1 } // the first is the bootstrap's

	b50 := &body{Reader: bytes.NewReader([]byte("hello"))}
	if stepped, taken := deliver(50, b50); !stepped || !taken {
		t.Fatalf("snapshot at 50: stepped %v, taken %v", stepped, taken)
	}
	if restores() != 1 || !b50.closed || n.Failed() != nil {
		t.Fatalf("restores %+v, body closed %v, failed %v", sm.restores, b50.closed, n.Failed())
	}
	if r := sm.restores[1]; r.index != 50 || r.body != "hello" || !bytes.Equal(r.man.Inline, []byte("h")) {
		t.Fatalf("restored %+v", r)
	}

	stale := &body{Reader: bytes.NewReader([]byte("stale"))}
	if _, taken := deliver(40, stale); taken || !stale.closed || restores() != 1 {
		t.Fatalf("a stale snapshot: taken %v, closed %v, %d restores", taken, stale.closed, len(sm.restores))
	}

	n.Deliver(snapMsg(60, man, nil))
	if restores() != 1 || n.byID[2].applied != 50 {
		t.Fatalf("a snapshot without its body was installed: %+v", sm.restores)
	}

	older, newer := &body{Reader: bytes.NewReader([]byte("older"))}, &body{Reader: bytes.NewReader([]byte("newer"))}
	deliver(70, older)
	deliver(80, newer)
	if !older.closed {
		t.Fatal("a body raft replaced with a newer snapshot's was kept")
	}
	if restores() != 2 || sm.restores[2].index != 80 || sm.restores[2].body != "newer" || !newer.closed {
		t.Fatalf("restores %+v, newer closed %v", sm.restores, newer.closed)
	}
}

// TestSnapshotFinishedOnlyWhenAcknowledged: the leader keeps the follower
// in the snapshot state, sending no second snapshot, until the stream's
// outcome comes back; a success resumes appends after the snapshot, a
// failure probes again (and so sends a new one).
func TestSnapshotFinishedOnlyWhenAcknowledged(t *testing.T) {
	tr := &capture{}
	n, db := newTestNode(t, vfs.NewMem(), 1, newNopSM(), tr, []uint64{1})
	defer db.Close()
	n.Campaign(2)
	drain(n)
	for i := 0; i < 30; i++ {
		n.Propose(2, []byte{byte(i)}, func(ProposeResult) {})
		drain(n)
	}
	var conf *ConfResult
	n.ProposeConfChange(2, &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeType_ConfChangeAddLearnerNode.Enum(), NodeId: new(uint64(3))}}},
		func(r ConfResult) { conf = &r })
	drain(n)
	if conf == nil || conf.Err != nil {
		t.Fatalf("add learner: %+v", conf)
	}
	if first, _ := n.byID[2].store.FirstIndex(); first < 10 {
		t.Fatalf("log not compacted (first index %d)", first)
	}
	progress := func() tracker.Progress { return n.byID[2].rn.Status().Progress[3] }
	// Node 3 answers every append with a rejection (it has nothing) and
	// every heartbeat, as a follower that has not installed a snapshot.
	answer := func() {
		msgs := tr.msgs
		tr.msgs = nil
		for _, m := range msgs {
			resp := &pb.Message{From: new(uint64(3)), To: new(uint64(1)), Term: m.Term}
			switch m.GetType() {
			case pb.MessageType_MsgApp:
				resp.Type, resp.Index, resp.Reject, resp.RejectHint = pb.MessageType_MsgAppResp.Enum(), m.Index, new(true), new(uint64(0))
			case pb.MessageType_MsgHeartbeat:
				resp.Type = pb.MessageType_MsgHeartbeatResp.Enum()
			default:
				continue
			}
			n.Deliver(Envelope{Group: 2, Msg: resp})
		}
		drain(n)
	}
	for i := 0; i < 20; i++ {
		n.Tick()
		drain(n)
		answer()
	}
	if len(tr.snaps) != 1 || progress().State != tracker.StateSnapshot {
		t.Fatalf("%d snapshots sent while the first is in flight; progress %v", len(tr.snaps), progress())
	}
	s := tr.snaps[0]
	var buf bytes.Buffer
	if err := s.Write(&buf); err != nil || uint64(buf.Len()) != s.Size || !bytes.Equal(buf.Bytes(), nopBody) {
		t.Fatalf("body %q (size %d): %v", buf.Bytes(), s.Size, err)
	}
	pending := progress().PendingSnapshot
	s.Done(nil)
	drain(n)
	if pr := progress(); pr.State != tracker.StateProbe || pr.Next != pending+1 {
		t.Fatalf("after the acknowledgment: %v (snapshot at %d)", pr, pending)
	}

	// The follower still rejects: a new snapshot, which fails.
	for i := 0; i < 5 && len(tr.snaps) < 2; i++ {
		n.Tick()
		drain(n)
		answer()
	}
	if len(tr.snaps) != 2 {
		t.Fatalf("%d snapshots after the follower rejected the one acknowledged", len(tr.snaps))
	}
	s.Done(nil) // the first stream's outcome again: not this stream's
	drain(n)
	if progress().State != tracker.StateSnapshot {
		t.Fatalf("a stale outcome ended the second stream: %v", progress())
	}
	tr.snaps[1].Done(errors.New("cut"))
	drain(n)
	if pr := progress(); pr.State != tracker.StateProbe || pr.PendingSnapshot != 0 {
		t.Fatalf("after a failed stream: %v", pr)
	}
}

// A proposal raft carried twice and committed twice in one batch is
// answered once, for its first entry: its caller waits for one answer, and
// a second would block the loop on it.
func TestProposalCommittedTwiceIsAnsweredOnce(t *testing.T) {
	n, db := newTestNode(t, vfs.NewMem(), 1, newNopSM(), &capture{}, []uint64{1})
	defer db.Close()
	var answers []ProposeResult
	n.Propose(2, []byte("x"), func(r ProposeResult) { answers = append(answers, r) })
	p := n.queue[len(n.queue)-1]
	g := n.byID[2]
	first := g.smApplied + 1
	entry := func(i uint64) *pb.Entry {
		return &pb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(1), Type: pb.EntryType_EntryNormal.Enum(), Data: p.data}
	}
	ents := []*pb.Entry{entry(first), entry(first + 1)}
	if err := n.apply(g, ents, entries(ents, g.smApplied)); err != nil {
		t.Fatal(err)
	}
	if len(answers) != 1 || answers[0].Index != first {
		t.Fatalf("answers %+v, want one, for entry %d", answers, first)
	}
}
