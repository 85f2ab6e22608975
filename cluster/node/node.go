// Package node is a cluster node's engine: it hosts several raft groups (the
// meta group and the data groups), each a raft.RawNode over one shared
// raftlog store, and drives them all from one loop with one tick. Its clock,
// transport and disk (the file system under the raftlog store) are
// injected, so the same code runs in production and in the simulator.
//
// One iteration of the loop (Process) follows the order raft's README gives:
// collect every group's Ready; restore a snapshot it carries into the
// StateMachine; write all their entries, HardStates and snapshots in one
// synced batch; send the messages (a snapshot on a stream of its own,
// reported to raft when the stream ends: snapshot.go); apply the committed
// entries through the StateMachine (ApplyConfChange for configuration
// changes); Advance. A node whose disk fails stops: it sends nothing, votes
// for nobody and refuses every request until it is restarted.
package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"tally/cluster/raftlog"
)

var (
	// ErrFailed: the node's disk failed; it serves nothing until restarted.
	ErrFailed = errors.New("node: stopped after a disk failure")
	// ErrTimeout: no outcome within ProposalTimeout. A proposal that timed
	// out after raft took it (ProposeResult.Proposed) may still commit;
	// retry it under the same request id.
	ErrTimeout = errors.New("node: timed out waiting for the group")
	// ErrBusy: MaxPending requests already wait at this node.
	ErrBusy = errors.New("node: too many pending requests")
	// ErrTooLarge: the command exceeds MaxEntrySize.
	ErrTooLarge = errors.New("node: command exceeds the maximum entry size")
	// ErrUnknownGroup: this node does not host the group.
	ErrUnknownGroup = errors.New("node: group not hosted here")
	// ErrNotMember: this node hosts the group but is not (or no longer) in
	// its configuration, so it cannot serve it. Retry at another node.
	ErrNotMember = errors.New("node: not a member of the group")
	// ErrLeaderChanged: the group's leader changed while a proposal handed
	// to the old one waited. It may still commit: retry it under the same
	// request id.
	ErrLeaderChanged = errors.New("node: the group's leader changed while the proposal waited")
	// ErrNoLeader: the group has no leader known here; a read cannot be
	// confirmed. Retry shortly.
	ErrNoLeader = errors.New("node: the group has no known leader")
	// ErrNotLeader: membership changes are proposed at the group's leader.
	ErrNotLeader = errors.New("node: not the group's leader")
	// ErrConfChangePending: one membership change at a time per group.
	ErrConfChangePending = errors.New("node: a membership change of the group is still pending")
	// ErrLastVoter: the change would leave the group without a voter.
	ErrLastVoter = errors.New("node: the change would remove the group's last voter")
	// ErrWouldLoseQuorum: the voters after the change that this leader
	// has heard from recently are not a majority of them.
	ErrWouldLoseQuorum = errors.New("node: the change would leave too few reachable voters for a quorum")
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

type proposal struct {
	id       uint64
	group    uint64
	data     []byte
	deadline time.Time
	done     func(ProposeResult)
	handed   bool   // raft took it
	lead     uint64 // the leader raft knew of when it took it
}

// ConfResult is a membership change's outcome: the group's configuration
// once it applied.
type ConfResult struct {
	Index uint64
	Conf  *pb.ConfState
	Err   error
}

type confProposal struct {
	id       uint64
	group    uint64
	deadline time.Time
	done     func(ConfResult)
}

type read struct {
	id        uint64
	group     uint64
	deadline  time.Time
	done      func(ReadResult)
	index     uint64
	haveIndex bool
}

type group struct {
	id          uint64
	rn          *raft.RawNode
	store       *raftlog.Storage
	applied     uint64 // last entry handed through the loop (raft's applied)
	appliedTerm uint64
	smApplied   uint64 // the state machine's durable applied index
	conf        *pb.ConfState
	confDirty   bool // conf changed since last written
	leader      uint64
	state       raft.StateType
	inbound     *inbound          // the received snapshot body raft took, if any
	streams     map[uint64]uint64 // peer → the latest snapshot stream to it not yet reported
	// heard is, once the node failed, the group's leader as it last heard
	// from another node (0: none): raft's own view stops then, and may
	// still name this node, which leads nothing any more.
	heard uint64
}

// Node is one cluster node. Its methods must be called from one goroutine,
// the loop's (the simulator's single goroutine, or Run's).
type Node struct {
	cfg   Config
	db    *raftlog.DB
	sm    StateMachine
	tr    Transport
	clock Clock
	log   *slog.Logger

	groups []*group
	byID   map[uint64]*group

	nextID    uint64
	proposals map[uint64]*proposal
	queue     []*proposal // not yet accepted by raft (no leader yet, dropped)
	reads     map[uint64]*read
	readQueue []*read
	confs     map[uint64]*confProposal

	// nextExpiry is the earliest deadline of a proposal, read or change
	// waiting (zero: none), so the loop scans them only when one may be due.
	nextExpiry time.Time
	reports    reports // snapshot streams' outcomes, from the transport

	failed error
	// unsynced is set when TestingSendBeforePersist committed a batch
	// without fsync; the next iteration syncs it.
	unsynced bool
	ticks    uint64
}

// Peers gives each group's initial voters, for a group with no state yet.
type Peers func(group uint64) []uint64

// New starts a node over an open store. A group with no saved state starts
// with the voters peers gives it; a group with saved state resumes.
func New(cfg Config, db *raftlog.DB, sm StateMachine, tr Transport, clock Clock, peers Peers, log *slog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := db.Claim(cfg.ClusterID, cfg.ID); err != nil {
		return nil, fmt.Errorf("node %d: %w", cfg.ID, err)
	}
	n := &Node{
		cfg: cfg, db: db, sm: sm, tr: tr, clock: clock, log: log,
		byID:      make(map[uint64]*group),
		proposals: make(map[uint64]*proposal),
		reads:     make(map[uint64]*read),
		confs:     make(map[uint64]*confProposal),
		reports:   reports{wake: make(chan struct{}, 1)},
		// Ids start at the clock so a restarted node never reuses one its
		// previous run may have left in the log.
		nextID: uint64(clock.Now().UnixNano()),
	}
	gids := slices.Clone(cfg.Groups)
	slices.Sort(gids)
	for _, gid := range gids {
		g, err := n.openGroup(gid, peers)
		if err != nil {
			return nil, fmt.Errorf("node %d: group %d: %w", cfg.ID, gid, err)
		}
		n.groups = append(n.groups, g)
		n.byID[gid] = g
	}
	return n, nil
}

func (n *Node) openGroup(gid uint64, peers Peers) (*group, error) {
	st, err := n.db.Group(gid)
	if err != nil {
		return nil, err
	}
	g := &group{id: gid, store: st, streams: map[uint64]uint64{}}
	hs, cs, err := st.InitialState()
	if err != nil {
		return nil, err
	}
	last, _ := st.LastIndex()
	first, _ := st.FirstIndex()
	// A group with no state starts with the voters given; with none given
	// the node is joining and waits for the leader to add it. The voters
	// start from a snapshot at index 1 (raft's advice) rather than from
	// conf-change entries, so a node added later receives that snapshot and
	// with it the configuration.
	if raft.IsEmptyHardState(hs) && last == 0 && len(cs.GetVoters()) == 0 && len(peers(gid)) > 0 {
		cs = &pb.ConfState{Voters: slices.Clone(peers(gid))}
		if err := n.sm.Restore(gid, 1, Manifest{}, strings.NewReader("")); err != nil {
			return nil, fmt.Errorf("bootstrap state machine: %w", err)
		}
		b := n.db.NewBatch()
		snap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(1)), Term: new(uint64(1)), ConfState: cs}}
		if err := b.ApplySnapshot(st, snap); err != nil {
			return nil, err
		}
		if err := b.SetHardState(st, &pb.HardState{Term: new(uint64(1)), Commit: new(uint64(1))}); err != nil {
			return nil, err
		}
		if err := b.Commit(); err != nil {
			return nil, err
		}
		hs = st.HardState()
		first, _ = st.FirstIndex()
	}
	g.conf = proto.Clone(cs).(*pb.ConfState)
	smApplied, err := n.sm.Applied(gid)
	if err != nil {
		return nil, fmt.Errorf("state machine applied index: %w", err)
	}
	g.smApplied = smApplied
	// Raft re-delivers every entry after applied: the configuration is
	// saved as of ConfIndex, so conf changes after it must apply again; the
	// state machine skips what it already holds.
	applied := min(smApplied, st.ConfIndex(), hs.GetCommit())
	if applied < first-1 {
		return nil, fmt.Errorf("applied index %d is below the log's start %d: state machine or configuration lost", applied, first-1)
	}
	g.applied = applied
	if applied > 0 {
		if g.appliedTerm, err = st.Term(applied); err != nil {
			return nil, fmt.Errorf("term of applied index %d: %w", applied, err)
		}
	}
	rc := &raft.Config{
		ID:                        n.cfg.ID,
		ElectionTick:              n.cfg.ElectionTicks,
		HeartbeatTick:             n.cfg.HeartbeatTicks,
		Storage:                   &groupStorage{Storage: st, n: n, g: g},
		Applied:                   applied,
		MaxSizePerMsg:             n.cfg.MaxMsgSize,
		MaxInflightMsgs:           n.cfg.MaxInflightMsgs,
		MaxUncommittedEntriesSize: n.cfg.MaxUncommittedBytes,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{l: n.log.With("node", n.cfg.ID, "group", gid)},
	}
	rn, err := raft.NewRawNode(rc)
	if err != nil {
		return nil, err
	}
	g.rn = rn
	return g, nil
}

// Failed reports the error that stopped the node, or nil.
func (n *Node) Failed() error { return n.failed }

// ID is the node's id.
func (n *Node) ID() uint64 { return n.cfg.ID }

// Tick advances every group's logical clock by one tick.
func (n *Node) Tick() {
	if n.failed != nil {
		return
	}
	n.ticks++
	if n.unsynced && n.ticks%4 == 0 {
		// The broken ordering's deferred fsync, as a disk written behind
		// the loop would make it.
		if err := n.db.SyncWAL(); err != nil {
			n.fail(err)
			return
		}
		n.unsynced = false
	}
	for _, g := range n.groups {
		g.rn.Tick()
	}
}

// Deliver steps an inbound message into its group. Messages for unknown
// groups, and everything after a failure, are dropped. A MsgSnap comes
// with its body (Snapshot), which the node then owns and closes.
func (n *Node) Deliver(env Envelope) {
	g, ok := n.byID[env.Group]
	if n.failed != nil && ok && env.Msg != nil && fromLeader(env.Msg) && env.Msg.GetFrom() != n.cfg.ID {
		g.heard = env.Msg.GetFrom()
	}
	if n.failed != nil || !ok || env.Msg == nil {
		if env.Snapshot != nil {
			n.settle(env.Group, env.Snapshot, false)
		}
		return
	}
	if env.Snapshot != nil {
		n.deliverSnapshot(g, env)
		return
	}
	if env.Msg.GetType() == pb.MessageType_MsgSnap && !bodiless(env.Msg) {
		return // a snapshot whose body did not come with it cannot be installed
	}
	// Errors here are messages raft ignores (stale, from unknown peers).
	_ = g.rn.Step(env.Msg)
}

// fromLeader says m is sent only by a group's leader.
func fromLeader(m *pb.Message) bool {
	switch m.GetType() {
	case pb.MessageType_MsgApp, pb.MessageType_MsgHeartbeat, pb.MessageType_MsgSnap:
		return true
	}
	return false
}

// Propose submits a command to a group; done is called from the loop with
// its outcome.
func (n *Node) Propose(gid uint64, cmd []byte, done func(ProposeResult)) {
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

func (n *Node) header(id uint64) []byte {
	h := make([]byte, headerLen)
	h[0] = headerVersion
	binary.BigEndian.PutUint64(h[1:9], n.cfg.ID)
	binary.BigEndian.PutUint64(h[9:17], id)
	return h
}

// mine returns the proposal id in a header this node wrote.
func (n *Node) mine(d []byte) (uint64, bool) {
	if len(d) < headerLen || d[0] != headerVersion || binary.BigEndian.Uint64(d[1:9]) != n.cfg.ID {
		return 0, false
	}
	return binary.BigEndian.Uint64(d[9:17]), true
}

// ProposeConfChange proposes a membership change of one group at its
// leader: add a learner, promote it to voter, remove a node. It refuses a
// change while another of this group is pending here, one that would
// remove the last voter, and one that would leave fewer recently heard-from
// voters than a quorum. done is called from the loop once the change
// applied, or with the refusal.
func (n *Node) ProposeConfChange(gid uint64, cc *pb.ConfChangeV2, done func(ConfResult)) {
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
	reachable := 0
	for v := range voters {
		if pr, ok := st.Progress[v]; v == n.cfg.ID || (ok && pr.RecentActive) {
			reachable++
		}
	}
	if reachable <= len(voters)/2 {
		done(ConfResult{Err: fmt.Errorf("%w: %d of %d", ErrWouldLoseQuorum, reachable, len(voters))})
		return
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
func (n *Node) ReadIndex(gid uint64, done func(ReadResult)) {
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

func (n *Node) admit(gid uint64) error {
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
func (n *Node) TransferLeader(gid, to uint64) {
	if g, ok := n.byID[gid]; ok && n.failed == nil {
		g.rn.TransferLeader(to)
	}
}

// Campaign makes this node campaign in a group now.
func (n *Node) Campaign(gid uint64) {
	if g, ok := n.byID[gid]; ok && n.failed == nil {
		_ = g.rn.Campaign()
	}
}

// GroupStatus is one group's state at this node.
type GroupStatus struct {
	Group    uint64
	Leader   uint64
	Term     uint64
	Commit   uint64
	Applied  uint64
	State    raft.StateType
	Voters   []uint64
	Learners []uint64
	// Quorum says this node reaches a quorum of the group: as its leader,
	// a majority of the voters (itself included) heard from within the
	// last election timeout; otherwise, it follows a leader (which, with
	// CheckQuorum, steps down once it loses its quorum).
	Quorum bool
}

// Status reports every group, in group order.
func (n *Node) Status() []GroupStatus {
	out := make([]GroupStatus, 0, len(n.groups))
	for _, g := range n.groups {
		bs := g.rn.BasicStatus()
		st := GroupStatus{
			Group: g.id, Leader: bs.Lead, Term: bs.HardState.GetTerm(), Commit: bs.HardState.GetCommit(),
			Applied: g.applied, State: bs.RaftState, Voters: slices.Clone(g.conf.GetVoters()),
			Learners: slices.Clone(g.conf.GetLearners()),
		}
		switch {
		case n.failed != nil:
			// Stopped, it leads nothing and follows nobody: it names the
			// leader others last showed it, never itself.
			st.Leader, st.State = g.heard, raft.StateFollower
		case bs.RaftState == raft.StateLeader:
			active := 0
			for id, pr := range g.rn.Status().Progress {
				if slices.Contains(st.Voters, id) && (id == n.cfg.ID || pr.RecentActive) {
					active++
				}
			}
			st.Quorum = active > len(st.Voters)/2
		default:
			st.Quorum = bs.Lead != 0
		}
		out = append(out, st)
	}
	return out
}

// Progress reports, for a group this node leads, the group's commit index
// and how far each member's log matches the leader's (learners included);
// ok is false if this node does not lead the group.
func (n *Node) Progress(gid uint64) (commit uint64, match map[uint64]uint64, ok bool) {
	g, found := n.byID[gid]
	if !found || n.failed != nil {
		return 0, nil, false
	}
	st := g.rn.Status()
	if st.RaftState != raft.StateLeader {
		return 0, nil, false
	}
	match = make(map[uint64]uint64, len(st.Progress))
	for id, pr := range st.Progress {
		match[id] = pr.Match
	}
	return st.HardState.GetCommit(), match, true
}

// GroupTerm names a group and a term.
type GroupTerm struct{ Group, Term uint64 }

// Leading lists the groups this node leads, with the term of each.
func (n *Node) Leading() []GroupTerm {
	if n.failed != nil {
		return nil
	}
	var out []GroupTerm
	for _, g := range n.groups {
		if g.state == raft.StateLeader {
			out = append(out, GroupTerm{Group: g.id, Term: g.rn.BasicStatus().HardState.GetTerm()})
		}
	}
	return out
}

// Pending counts proposals, reads and membership changes waiting here.
func (n *Node) Pending() int { return len(n.proposals) + len(n.reads) + len(n.confs) }

func (n *Node) fail(err error) {
	if n.failed != nil {
		return
	}
	n.failed = fmt.Errorf("%w: %w", ErrFailed, err)
	n.log.Error("node stopped", "node", n.cfg.ID, "err", err)
	for _, g := range n.groups {
		if lead := g.rn.BasicStatus().Lead; lead != n.cfg.ID {
			g.heard = lead
		}
	}
	for _, id := range sortedKeys(n.proposals) {
		p := n.proposals[id]
		p.done(ProposeResult{Err: n.failed, Proposed: p.handed})
	}
	for _, id := range sortedKeys(n.reads) {
		n.reads[id].done(ReadResult{Err: n.failed})
	}
	for _, id := range sortedKeys(n.confs) {
		n.confs[id].done(ConfResult{Err: n.failed})
	}
	n.proposals, n.reads, n.queue, n.readQueue = map[uint64]*proposal{}, map[uint64]*read{}, nil, nil
	n.confs = map[uint64]*confProposal{}
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	ks := make([]uint64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Process runs one iteration of the loop. It reports whether there was
// anything to do, so a driver can call it again until there is not.
func (n *Node) Process() bool {
	if n.failed != nil {
		return false
	}
	n.submit()
	n.expire()
	n.reportSnapshots()

	type ready struct {
		g  *group
		rd raft.Ready
	}
	var rds []ready
	for _, g := range n.groups {
		if g.rn.HasReady() {
			rds = append(rds, ready{g, g.rn.Ready()})
		}
	}
	compact := n.compactions()
	for i, c := range compact {
		for _, r := range rds {
			if r.g == c.g && !raft.IsEmptySnap(r.rd.Snapshot) {
				compact[i].snapshot = true
			}
		}
	}
	if len(rds) == 0 && len(compact) == 0 && !n.anyConfDirty() {
		n.finishReads()
		return false
	}

	// 1. Install snapshots into the state machine first: a crash after it
	// leaves the state machine ahead of the log, which replay tolerates;
	// the other order could lose the snapshot's entries.
	for _, r := range rds {
		if raft.IsEmptySnap(r.rd.Snapshot) {
			continue
		}
		if err := n.restoreSnapshot(r.g, r.rd.Snapshot); err != nil {
			n.fail(fmt.Errorf("restore snapshot of group %d: %w", r.g.id, err))
			return false
		}
	}

	// 2. Persist every group's entries, HardState and snapshot in one batch.
	// The configuration and compaction records of the last iteration go
	// first, so that a snapshot installed now (which saves its own
	// configuration) overrides them.
	b := n.db.NewBatch()
	for _, g := range n.groups {
		if g.confDirty {
			if err := b.SetConfState(g.store, g.applied, g.conf); err != nil {
				n.fail(err)
				return false
			}
		}
	}
	for _, c := range compact {
		if c.snapshot {
			continue // the snapshot replaces the log anyway
		}
		// The configuration is saved as of applied in the same batch, so a
		// restart never needs entries at or before the compaction point.
		if err := b.SetConfState(c.g.store, c.g.applied, c.g.conf); err != nil {
			n.fail(err)
			return false
		}
		if err := b.Compact(c.g.store, c.to); err != nil {
			n.fail(fmt.Errorf("compact group %d: %w", c.g.id, err))
			return false
		}
	}
	for _, r := range rds {
		var err error
		if !raft.IsEmptySnap(r.rd.Snapshot) {
			err = b.ApplySnapshot(r.g.store, r.rd.Snapshot)
		}
		if err == nil {
			err = b.Append(r.g.store, r.rd.Entries)
		}
		if err == nil && r.rd.HardState != nil {
			err = b.SetHardState(r.g.store, r.rd.HardState)
		}
		if err != nil {
			b.Close()
			n.fail(fmt.Errorf("persist group %d: %w", r.g.id, err))
			return false
		}
	}
	var err error
	if n.cfg.TestingSendBeforePersist {
		err = b.CommitNoSync()
		n.unsynced = true
	} else {
		err = b.Commit()
	}
	if err != nil {
		n.fail(err)
		return false
	}
	for _, g := range n.groups {
		g.confDirty = false
	}

	// 3. Send, batched per peer, in group order; snapshots on their own.
	var peers []uint64
	out := map[uint64][]Envelope{}
	for _, r := range rds {
		for _, m := range r.rd.Messages {
			if m.GetType() == pb.MessageType_MsgSnap {
				n.sendSnapshot(r.g, m)
				continue
			}
			to := m.GetTo()
			if _, ok := out[to]; !ok {
				peers = append(peers, to)
			}
			out[to] = append(out[to], Envelope{Group: r.g.id, Msg: m})
		}
	}
	for _, to := range peers {
		n.tr.Send(to, out[to])
	}

	// 4. Apply, then 5. Advance.
	for _, r := range rds {
		g := r.g
		if r.rd.SoftState != nil {
			if lead := r.rd.SoftState.Lead; lead != g.leader {
				n.leaderChanged(g, lead)
			}
			g.leader, g.state = r.rd.SoftState.Lead, r.rd.SoftState.RaftState
		}
		if !raft.IsEmptySnap(r.rd.Snapshot) {
			md := r.rd.Snapshot.GetMetadata()
			g.applied, g.appliedTerm, g.smApplied = md.GetIndex(), md.GetTerm(), md.GetIndex()
			g.conf = proto.Clone(md.GetConfState()).(*pb.ConfState)
		}
		if err := n.apply(g, r.rd.CommittedEntries); err != nil {
			n.fail(err)
			return false
		}
		for _, rs := range r.rd.ReadStates {
			if len(rs.RequestCtx) != 8 {
				continue
			}
			if rd, ok := n.reads[binary.BigEndian.Uint64(rs.RequestCtx)]; ok {
				rd.index, rd.haveIndex = rs.Index, true
			}
		}
		g.rn.Advance(r.rd)
	}
	n.closeStaleInbound()
	n.finishReads()
	return true
}

// leaderChanged fails the proposals of g handed to another leader than
// lead: the old leader may have dropped them, and waiting out their
// deadline would hold their clients through the whole failover.
func (n *Node) leaderChanged(g *group, lead uint64) {
	for _, id := range sortedKeys(n.proposals) {
		p := n.proposals[id]
		if p.group == g.id && p.handed && p.lead != lead {
			delete(n.proposals, id)
			p.done(ProposeResult{Err: ErrLeaderChanged, Proposed: true})
		}
	}
}

// submit hands queued proposals and reads to raft; those raft drops (no
// leader known yet) stay queued until their deadline.
func (n *Node) submit() {
	keep := n.queue[:0]
	for _, p := range n.queue {
		if _, live := n.proposals[p.id]; !live {
			continue
		}
		g := n.byID[p.group]
		if err := g.rn.Propose(p.data); err != nil {
			keep = append(keep, p)
			continue
		}
		// Raft's own leader: it may know one the loop hears of only in the
		// next Ready.
		p.handed, p.lead = true, g.rn.BasicStatus().Lead
	}
	clear(n.queue[len(keep):])
	n.queue = keep
	for _, r := range n.readQueue {
		if _, live := n.reads[r.id]; !live {
			continue
		}
		g := n.byID[r.group]
		if g.leader == 0 {
			// Raft drops a read it cannot forward, without a word.
			delete(n.reads, r.id)
			r.done(ReadResult{Err: fmt.Errorf("%w: group %d", ErrNoLeader, r.group)})
			continue
		}
		g.rn.ReadIndex(binary.BigEndian.AppendUint64(nil, r.id))
	}
	n.readQueue = nil
}

func (n *Node) expire() {
	now := n.clock.Now()
	if n.nextExpiry.IsZero() || now.Before(n.nextExpiry) {
		return // nothing waiting is due: the loop runs often, deadlines pass rarely
	}
	for _, id := range sortedKeys(n.proposals) {
		if p := n.proposals[id]; !now.Before(p.deadline) {
			delete(n.proposals, id)
			p.done(ProposeResult{Err: ErrTimeout, Proposed: p.handed})
		}
	}
	for _, id := range sortedKeys(n.reads) {
		if r := n.reads[id]; !now.Before(r.deadline) {
			delete(n.reads, id)
			r.done(ReadResult{Err: ErrTimeout})
		}
	}
	for _, id := range sortedKeys(n.confs) {
		if c := n.confs[id]; !now.Before(c.deadline) {
			// Raft turns a change it refuses (another one pending that this
			// node did not know of) into an empty entry: it ends here.
			delete(n.confs, id)
			c.done(ConfResult{Err: ErrTimeout})
		}
	}
	n.nextExpiry = time.Time{}
	for _, p := range n.proposals {
		n.expiresAt(p.deadline)
	}
	for _, r := range n.reads {
		n.expiresAt(r.deadline)
	}
	for _, c := range n.confs {
		n.expiresAt(c.deadline)
	}
}

// expiresAt notes a deadline of something waiting, keeping the earliest.
func (n *Node) expiresAt(d time.Time) {
	if n.nextExpiry.IsZero() || d.Before(n.nextExpiry) {
		n.nextExpiry = d
	}
}

func (n *Node) finishReads() {
	if !n.anyReadDone() {
		return
	}
	for _, id := range sortedKeys(n.reads) {
		r := n.reads[id]
		if r.haveIndex && n.byID[r.group].applied >= r.index {
			delete(n.reads, id)
			r.done(ReadResult{Index: r.index})
		}
	}
}

// anyReadDone reports whether a read's index is applied, without the
// sorting finishReads does to answer them in order.
func (n *Node) anyReadDone() bool {
	for _, r := range n.reads {
		if r.haveIndex && n.byID[r.group].applied >= r.index {
			return true
		}
	}
	return false
}

func (n *Node) anyConfDirty() bool {
	for _, g := range n.groups {
		if g.confDirty {
			return true
		}
	}
	return false
}

type compaction struct {
	g        *group
	to       uint64
	snapshot bool // the group installs a snapshot in this iteration
}

func (n *Node) compactions() []compaction {
	var out []compaction
	for _, g := range n.groups {
		first, _ := g.store.FirstIndex()
		if g.applied >= first-1+n.cfg.CompactAfter && g.smApplied >= g.applied {
			out = append(out, compaction{g: g, to: g.applied - n.cfg.CompactKeep})
		}
	}
	return out
}

func (n *Node) apply(g *group, ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	batch := make([]Entry, 0, len(ents))
	var mine []*proposal
	for _, e := range ents {
		switch e.GetType() {
		case pb.EntryType_EntryConfChange:
			var cc pb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return fmt.Errorf("group %d entry %d: conf change: %w", g.id, e.GetIndex(), err)
			}
			g.conf = g.rn.ApplyConfChange(&cc)
			g.confDirty = true
		case pb.EntryType_EntryConfChangeV2:
			var cc pb.ConfChangeV2
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return fmt.Errorf("group %d entry %d: conf change: %w", g.id, e.GetIndex(), err)
			}
			g.conf = g.rn.ApplyConfChange(&cc)
			g.confDirty = true
			if id, ok := n.mine(cc.GetContext()); ok {
				if c := n.confs[id]; c != nil {
					delete(n.confs, id)
					c.done(ConfResult{Index: e.GetIndex(), Conf: proto.Clone(g.conf).(*pb.ConfState)})
				}
			}
		}
		if e.GetIndex() <= g.smApplied {
			continue // applied before a restart
		}
		ent := Entry{Index: e.GetIndex(), Kind: KindEmpty}
		var p *proposal
		if d := e.GetData(); e.GetType() == pb.EntryType_EntryNormal && len(d) >= headerLen && d[0] == headerVersion {
			ent.Kind, ent.Data = KindCommand, d[headerLen:]
			if id, ok := n.mine(d); ok {
				p = n.proposals[id]
			}
		}
		batch = append(batch, ent)
		mine = append(mine, p)
	}
	last := ents[len(ents)-1]
	if len(batch) > 0 {
		results, err := n.sm.Apply(g.id, batch)
		if err != nil {
			return fmt.Errorf("apply group %d: %w", g.id, err)
		}
		if len(results) != len(batch) {
			return fmt.Errorf("apply group %d: %d results for %d entries", g.id, len(results), len(batch))
		}
		g.smApplied = batch[len(batch)-1].Index
		for i, p := range mine {
			// A proposal raft carried twice may commit twice in one batch:
			// its first entry answers it, once.
			if p != nil && n.proposals[p.id] == p {
				delete(n.proposals, p.id)
				p.done(ProposeResult{Index: batch[i].Index, Result: results[i]})
			}
		}
	}
	g.applied, g.appliedTerm = last.GetIndex(), last.GetTerm()
	return nil
}

// raftLogger sends raft's logging to slog; raft's Panic and Fatal are its
// invariant violations and stay panics.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)                   { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Debugf(format string, v ...any)   { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Info(v ...any)                    { r.l.Debug(fmt.Sprint(v...)) }
func (r raftLogger) Infof(format string, v ...any)    { r.l.Debug(fmt.Sprintf(format, v...)) }
func (r raftLogger) Warning(v ...any)                 { r.l.Warn(fmt.Sprint(v...)) }
func (r raftLogger) Warningf(format string, v ...any) { r.l.Warn(fmt.Sprintf(format, v...)) }
func (r raftLogger) Error(v ...any)                   { r.l.Error(fmt.Sprint(v...)) }
func (r raftLogger) Errorf(format string, v ...any)   { r.l.Error(fmt.Sprintf(format, v...)) }
func (r raftLogger) Fatal(v ...any)                   { panic(fmt.Sprint(v...)) }
func (r raftLogger) Fatalf(format string, v ...any)   { panic(fmt.Sprintf(format, v...)) }
func (r raftLogger) Panic(v ...any)                   { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(format string, v ...any)   { panic(fmt.Sprintf(format, v...)) }

// Run drives the node from the calling goroutine until ctx ends: a tick
// every TickInterval, each batch from inbox stepped in, each call run on
// the node (the way other goroutines Propose or ReadIndex: their callbacks
// run here too), and the loop processed until it is idle. What is waiting
// is taken in together (up to runDrain events) before the loop processes
// it, so concurrent proposals share one Ready, one synced batch and one
// apply.
func (n *Node) Run(ctx context.Context, inbox <-chan []Envelope, calls <-chan func(*Node)) error {
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			n.Tick()
		case batch := <-inbox:
			n.deliverAll(batch)
		case call := <-calls:
			call(n)
		case <-n.reports.wake:
			// Process hands the snapshot streams' outcomes to raft.
		}
	drain:
		for i := 0; i < runDrain; i++ {
			select {
			case batch := <-inbox:
				n.deliverAll(batch)
			case call := <-calls:
				call(n)
			default:
				break drain
			}
		}
		for n.Process() {
		}
	}
}

// runDrain bounds the events Run takes in before it processes them.
const runDrain = 1024

func (n *Node) deliverAll(batch []Envelope) {
	for _, e := range batch {
		n.Deliver(e)
	}
}
