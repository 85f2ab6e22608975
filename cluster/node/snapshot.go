package node

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"tally/cluster/raftlog"
)

// Snapshots. A MsgSnap carries only the group's Manifest; its body goes on
// the transport's snapshot stream (SendSnapshot), written from the
// manifest by the state machine on the transport's goroutine, and arrives
// received whole (Envelope.Snapshot). The loop keeps, per group, the one
// body raft took, restores from it when the Ready carries that snapshot,
// and closes every other.
//
// Raft is told a snapshot finished only when the receiver acknowledged
// the whole body, and failed when the stream failed: reporting it
// finished as soon as it is handed over would make the leader probe the
// follower, find it still behind, and send a second snapshot while the
// first is in flight.

// groupStorage answers raft's snapshot requests with the state machine's
// manifest as of the group's applied index. Raft asks while stepping
// messages, which happens between loop iterations, so the state cannot
// move between the manifest being taken and the message carrying it being
// sent.
type groupStorage struct {
	*raftlog.Storage
	n *MultiRaft
	g *group
}

func (s *groupStorage) Snapshot() (*pb.Snapshot, error) {
	idx, m, err := s.n.sm.Snapshot(s.g.id)
	if err != nil {
		return nil, fmt.Errorf("node: snapshot group %d: %w", s.g.id, err)
	}
	if idx != s.g.applied {
		// The state machine is not where the loop is (a restart replay in
		// progress); raft retries later.
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	return &pb.Snapshot{
		Data: m.Marshal(),
		Metadata: &pb.SnapshotMetadata{
			Index:     new(idx),
			Term:      new(s.g.appliedTerm),
			ConfState: pb.EnsureConfState(proto.Clone(s.g.conf).(*pb.ConfState)),
		},
	}, nil
}

// inbound is a received body raft took, waiting for the Ready that
// carries its snapshot.
type inbound struct {
	index uint64
	body  io.ReadCloser
}

// snapshotReport is a stream's outcome, handed to the loop.
type snapshotReport struct {
	group, to, stream uint64
	err               error
}

// reports collects stream outcomes from the transport's goroutines for
// the loop; wake tells Run there are some. Invariant: at most one report
// per stream started, so the slice is bounded by the streams started
// since the last iteration.
type reports struct {
	mu   sync.Mutex
	list []snapshotReport
	wake chan struct{}
}

func (r *reports) add(rep snapshotReport) {
	r.mu.Lock()
	r.list = append(r.list, rep)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *reports) take() []snapshotReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.list
	r.list = nil
	return out
}

// deliverSnapshot steps a MsgSnap that came with its body and keeps the
// body if raft took the snapshot. Raft takes one by restoring from it,
// which sets its commit index to the snapshot's; the one exception,
// a snapshot whose index the log already holds, fast-forwards the commit
// the same way without a snapshot in the Ready: its body is closed once
// applied passes it.
func (n *MultiRaft) deliverSnapshot(g *group, env Envelope) {
	in := env.Snapshot
	idx := env.Msg.GetSnapshot().GetMetadata().GetIndex()
	before := g.rn.BasicStatus().HardState.GetCommit()
	err := g.rn.Step(env.Msg)
	taken := err == nil && env.Msg.GetType() == pb.MessageType_MsgSnap &&
		before < idx && g.rn.BasicStatus().HardState.GetCommit() == idx
	if taken {
		// Raft holds one pending snapshot: a newer one replaces the last.
		n.closeInbound(g)
		g.inbound = &inbound{index: idx, body: in.Body}
	}
	n.settle(g.id, in, taken)
}

// settle tells the transport whether raft took a received snapshot, and
// releases the body if not.
func (n *MultiRaft) settle(gid uint64, in *InboundSnapshot, taken bool) {
	if !taken {
		n.closeBody(gid, in.Body)
	}
	if in.Stepped != nil {
		in.Stepped(taken)
	}
}

func (n *MultiRaft) closeInbound(g *group) {
	if g.inbound != nil {
		n.closeBody(g.id, g.inbound.body)
		g.inbound = nil
	}
}

func (n *MultiRaft) closeBody(gid uint64, body io.ReadCloser) {
	if err := body.Close(); err != nil {
		n.log.Warn("node: release a snapshot body", "group", gid, "err", err)
	}
}

// bodiless reports a MsgSnap whose manifest has no body (a new group's).
func bodiless(m *pb.Message) bool {
	man, err := UnmarshalManifest(m.GetSnapshot().GetData())
	return err == nil && man.BodySize() == 0
}

// closeStaleInbound closes a kept body that applied has passed without its
// snapshot being restored (the fast-forward case).
func (n *MultiRaft) closeStaleInbound() {
	for _, g := range n.groups {
		if g.inbound != nil && g.inbound.index <= g.applied {
			n.closeInbound(g)
		}
	}
}

// restoreSnapshot installs the snapshot a Ready carries into the state
// machine, from the body raft took with it, and closes the body.
func (n *MultiRaft) restoreSnapshot(g *group, snap *pb.Snapshot) error {
	md := snap.GetMetadata()
	m, err := UnmarshalManifest(snap.GetData())
	if err != nil {
		return err
	}
	var body io.Reader = strings.NewReader("")
	if in := g.inbound; in != nil && in.index == md.GetIndex() {
		body = in.body
		defer n.closeInbound(g)
	} else if m.BodySize() > 0 {
		// Deliver steps no MsgSnap with a body to come without it.
		return fmt.Errorf("snapshot at index %d has no body", md.GetIndex())
	}
	if err := n.sm.Restore(g.id, md.GetIndex(), m, body); err != nil {
		return err
	}
	// Pair with the transport's check on arrival: the state machine read
	// the whole body and nothing more (a spooled body checks its sum as it
	// is read to its end).
	if k, err := body.Read(make([]byte, 1)); k != 0 || !errors.Is(err, io.EOF) {
		return fmt.Errorf("snapshot at index %d: the body was not read to its end (%v)", md.GetIndex(), err)
	}
	return nil
}

// sendSnapshot hands a MsgSnap and its body to the transport. The stream's
// outcome comes back through reports; only the latest stream to a peer
// in a group reports to raft, since raft's report names no snapshot.
func (n *MultiRaft) sendSnapshot(g *group, m *pb.Message) {
	to := m.GetTo()
	man, err := UnmarshalManifest(m.GetSnapshot().GetData())
	if err != nil {
		n.log.Error("node: own snapshot manifest unreadable", "group", g.id, "err", err)
		g.rn.ReportSnapshot(to, raft.SnapshotFailure)
		return
	}
	n.nextID++
	stream, gid, sm := n.nextID, g.id, n.sm
	g.streams[to] = stream
	n.tr.SendSnapshot(to, OutboundSnapshot{
		Envelope: Envelope{Group: gid, Msg: m},
		Size:     man.BodySize(),
		Write:    func(w io.Writer) error { return sm.WriteSnapshot(gid, man, w) },
		Done: func(err error) {
			n.reports.add(snapshotReport{group: gid, to: to, stream: stream, err: err})
		},
	})
}

// reportSnapshots tells raft how the streams that ended did.
func (n *MultiRaft) reportSnapshots() {
	for _, r := range n.reports.take() {
		g := n.byID[r.group]
		if g.streams[r.to] != r.stream {
			continue // a later stream to the peer supersedes it
		}
		delete(g.streams, r.to)
		status := raft.SnapshotFinish
		if r.err != nil {
			// The transport said why, as it happened; raft tries again.
			status = raft.SnapshotFailure
			n.log.Debug("node: snapshot not sent", "group", r.group, "to", r.to, "err", r.err)
		}
		g.rn.ReportSnapshot(r.to, status)
	}
}
