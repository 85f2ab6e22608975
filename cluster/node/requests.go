package node

import (
	"encoding/binary"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// headerLen is the proposer's id and the proposal's id, prefixed to every
// command so the proposer can find its waiter when the entry applies.
const headerLen = 1 + 8 + 8

const headerVersion = 1

// ProposeResult is a proposal's outcome.
type ProposeResult struct {
	Index  uint64 // the entry's index, if applied
	Result []byte // the state machine's result
	Err    error
	// Proposed: raft took the entry before Err, so it may still commit
	// (its outcome is unknown); without it, nothing of it can commit.
	Proposed bool
}

// ReadResult is a linearizable read's outcome: the state machine has applied
// at least Index, which the group's leader confirmed with a quorum, so the
// caller may read the state machine now, within the same loop iteration.
type ReadResult struct {
	Index uint64
	Err   error
}

// ConfResult is a membership change's outcome: the group's configuration
// once it applied.
type ConfResult struct {
	Index uint64
	Conf  *pb.ConfState
	Err   error
}

// Propose submits a command to a group; done is called from the loop with
// its outcome.
func (n *MultiRaft) Propose(gid uint64, cmd []byte, done func(ProposeResult)) {
	if err := n.admit(gid); err != nil {
		done(ProposeResult{Err: err})
		return
	}
	if len(cmd) > n.cfg.MaxEntrySize {
		done(ProposeResult{Err: fmt.Errorf("%w: %d bytes, limit %d (MaxEntrySize)", ErrTooLarge, len(cmd), n.cfg.MaxEntrySize)})
		return
	}
	n.nextID++
	p := &proposal{id: n.nextID, group: gid, deadline: n.clock.Now().Add(n.cfg.ProposalTimeout), done: done}
	n.expiresAt(p.deadline)
	p.data = append(n.header(p.id), cmd...)
	n.proposals[p.id] = p
	n.queue = append(n.queue, p)
}

func (n *MultiRaft) header(id uint64) []byte {
	h := make([]byte, headerLen)
	h[0] = headerVersion
	binary.BigEndian.PutUint64(h[1:9], n.cfg.ID)
	binary.BigEndian.PutUint64(h[9:17], id)
	return h
}

// mine returns the proposal id in a header this node wrote.
func (n *MultiRaft) mine(d []byte) (uint64, bool) {
	if len(d) < headerLen || d[0] != headerVersion || binary.BigEndian.Uint64(d[1:9]) != n.cfg.ID {
		return 0, false
	}
	return binary.BigEndian.Uint64(d[9:17]), true
}

// ProposeConfChange proposes a membership change of one group at its
// leader: add a learner, promote it to voter, remove a node, or several
// at once (a joint configuration, which raft leaves by itself once it has
// applied it). It refuses a change while another of this group is pending
// here or the group is still joint, one that would
// remove the last voter, and one that would leave fewer recently heard-from
// voters than a quorum. done is called from the loop once the change
// applied, or with the refusal.
func (n *MultiRaft) ProposeConfChange(gid uint64, cc *pb.ConfChangeV2, done func(ConfResult)) {
	if err := n.admit(gid); err != nil {
		done(ConfResult{Err: err})
		return
	}
	g := n.byID[gid]
	st := g.rn.Status()
	if st.RaftState != raft.StateLeader {
		done(ConfResult{Err: fmt.Errorf("%w: group %d's leader is node %d", ErrNotLeader, gid, st.Lead)})
		return
	}
	for _, c := range n.confs {
		if c.group == gid {
			done(ConfResult{Err: ErrConfChangePending})
			return
		}
	}
	if len(g.conf.GetVotersOutgoing()) > 0 {
		// A joint configuration raft has not left yet: raft would drop a
		// change proposed now, and the caller would wait out its deadline.
		done(ConfResult{Err: fmt.Errorf("%w: the group is in a joint configuration (voters %v, leaving %v)", ErrConfChangePending, g.conf.GetVoters(), g.conf.GetVotersOutgoing())})
		return
	}
	voters := map[uint64]bool{}
	for _, v := range g.conf.GetVoters() {
		voters[v] = true
	}
	for _, ch := range cc.GetChanges() {
		switch ch.GetType() {
		case pb.ConfChangeType_ConfChangeAddNode:
			voters[ch.GetNodeId()] = true
		case pb.ConfChangeType_ConfChangeRemoveNode, pb.ConfChangeType_ConfChangeAddLearnerNode:
			delete(voters, ch.GetNodeId())
		}
	}
	if len(voters) == 0 {
		done(ConfResult{Err: ErrLastVoter})
		return
	}
	reachable := func(voters map[uint64]bool) int {
		r := 0
		for v := range voters {
			if pr, ok := st.Progress[v]; v == n.cfg.ID || (ok && pr.RecentActive) {
				r++
			}
		}
		return r
	}
	if r := reachable(voters); r <= len(voters)/2 {
		done(ConfResult{Err: fmt.Errorf("%w: %d of %d", ErrWouldLoseQuorum, r, len(voters))})
		return
	}
	if len(cc.GetChanges()) > 1 {
		// Several changes enter a joint configuration, which commits with
		// a quorum of the voters now and one of the voters after: both
		// must be reachable.
		now := map[uint64]bool{}
		for _, v := range g.conf.GetVoters() {
			now[v] = true
		}
		if r := reachable(now); r <= len(now)/2 {
			done(ConfResult{Err: fmt.Errorf("%w: %d of %d voters now", ErrWouldLoseQuorum, r, len(now))})
			return
		}
	}
	n.nextID++
	c := &confProposal{id: n.nextID, group: gid, deadline: n.clock.Now().Add(n.cfg.ProposalTimeout), done: done}
	n.expiresAt(c.deadline)
	cc = proto.Clone(cc).(*pb.ConfChangeV2)
	cc.Context = n.header(c.id)
	if err := g.rn.ProposeConfChange(cc); err != nil {
		done(ConfResult{Err: fmt.Errorf("propose conf change: %w", err)})
		return
	}
	n.confs[c.id] = c
}

// ReadIndex starts a linearizable read of a group; done is called from the
// loop once this replica has applied the confirmed read index.
func (n *MultiRaft) ReadIndex(gid uint64, done func(ReadResult)) {
	if err := n.admit(gid); err != nil {
		done(ReadResult{Err: err})
		return
	}
	n.nextID++
	r := &read{id: n.nextID, group: gid, deadline: n.clock.Now().Add(n.cfg.ProposalTimeout), done: done}
	n.expiresAt(r.deadline)
	n.reads[r.id] = r
	n.readQueue = append(n.readQueue, r)
}

func (n *MultiRaft) admit(gid uint64) error {
	if n.failed != nil {
		return ErrFailed
	}
	g, ok := n.byID[gid]
	if !ok {
		return fmt.Errorf("%w: %d", ErrUnknownGroup, gid)
	}
	if !slices.Contains(g.conf.GetVoters(), n.cfg.ID) && !slices.Contains(g.conf.GetLearners(), n.cfg.ID) {
		return fmt.Errorf("%w: group %d, node %d", ErrNotMember, gid, n.cfg.ID)
	}
	if len(n.proposals)+len(n.reads)+len(n.confs) >= n.cfg.MaxPending {
		return fmt.Errorf("%w (MaxPending %d)", ErrBusy, n.cfg.MaxPending)
	}
	return nil
}

// TransferLeader asks a group's leader (if this node) to hand leadership to
// another voter.
func (n *MultiRaft) TransferLeader(gid, to uint64) {
	if g, ok := n.byID[gid]; ok && n.failed == nil {
		g.rn.TransferLeader(to)
	}
}

// Campaign makes this node campaign in a group now.
func (n *MultiRaft) Campaign(gid uint64) {
	if g, ok := n.byID[gid]; ok && n.failed == nil {
		_ = g.rn.Campaign()
	}
}
