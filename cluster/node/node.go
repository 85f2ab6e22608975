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
//
// The files, one job each: node.go opens the groups; requests.go takes
// proposals, reads and membership changes; waiters.go holds them until
// they are answered or expire; loop.go is Process; compact.go picks the
// logs to compact; snapshot.go streams snapshots; status.go reports;
// logging.go carries raft's logging; run.go drives the loop in
// production.
package node

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"tally/cluster/internal/fault"
	"tally/cluster/raftlog"
)

// MultiRaft is the raft groups one cluster node hosts, over one store, one
// transport and one loop (cluster.Node is the node around it: its HTTP,
// its replica, its operators' requests). Its methods must be called from
// one goroutine, the loop's (the simulator's single goroutine, or Run's).
type MultiRaft struct {
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
	// faults are the faults the simulator injected (Inject); none in
	// production.
	faults fault.Faults
	// unsynced is set when faults.SendBeforePersist committed a batch
	// without fsync; the next iteration syncs it.
	unsynced bool
	ticks    uint64
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

// Peers gives each group's initial voters, for a group with no state yet.
type Peers func(group uint64) []uint64

// New starts a node over an open store. A group with no saved state starts
// with the voters peers gives it; a group with saved state resumes.
func New(cfg Config, db *raftlog.DB, sm StateMachine, tr Transport, clock Clock, peers Peers, log *slog.Logger) (*MultiRaft, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := db.Claim(cfg.ClusterID, cfg.ID); err != nil {
		return nil, fmt.Errorf("node %d: %w", cfg.ID, err)
	}
	n := &MultiRaft{
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

func (n *MultiRaft) openGroup(gid uint64, peers Peers) (*group, error) {
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
func (n *MultiRaft) Failed() error { return n.failed }

// ID is the node's id.
func (n *MultiRaft) ID() uint64 { return n.cfg.ID }

func (n *MultiRaft) fail(err error) {
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

// Inject gives the node faults to show, before its loop first runs: the
// simulator's way to prove its checks catch them. Only the cluster's
// packages can name a fault (package fault is internal).
func (n *MultiRaft) Inject(f fault.Faults) { n.faults = f }

// AddGroup opens a group made after the node started (a data group the
// meta group added), as New opens the node's groups: with no saved
// state it starts with the voters peers gives it (none: it waits for the
// group's leader to add the node). A group already open is left as is.
// Call it on the node's loop.
func (n *MultiRaft) AddGroup(gid uint64, peers Peers) error {
	if _, ok := n.byID[gid]; ok {
		return nil
	}
	g, err := n.openGroup(gid, peers)
	if err != nil {
		return fmt.Errorf("node %d: group %d: %w", n.cfg.ID, gid, err)
	}
	n.groups = append(n.groups, g)
	slices.SortFunc(n.groups, func(a, b *group) int { return cmp.Compare(a.id, b.id) })
	n.byID[gid] = g
	return nil
}

// HasGroup reports whether the node has the group open.
func (n *MultiRaft) HasGroup(gid uint64) bool {
	_, ok := n.byID[gid]
	return ok
}
