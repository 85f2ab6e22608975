package sim

// A seed's run: the world built, run to its end and settled, then checked.

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster/node"
)

// Run executes one seed and returns its stats and the first violation found.
func Run(opt Options) (Stats, error) {
	w, err := runWorld(opt)
	return w.stats, err
}

func runWorld(opt Options) (w *World, err error) {
	w = &World{
		opt:      opt,
		rng:      rand.New(rand.NewPCG(opt.Seed, 0x7a11)),
		blocked:  map[[2]uint64]bool{},
		leaders:  map[[2]uint64]uint64{},
		removed:  map[[2]uint64]bool{},
		dead:     map[uint64]bool{},
		draining: map[uint64]bool{},
		replicas: map[uint64]int{},
		confs:    map[uint64]*pb.ConfState{},
	}
	if opt.Voters == 0 || opt.Voters > opt.Nodes {
		opt.Voters = opt.Nodes
		w.opt.Voters = opt.Nodes
	}
	w.clock = clock{&w.now}
	if w.dir, err = tempDir(); err != nil {
		return w, fmt.Errorf("seed %d: %w", opt.Seed, err)
	}
	defer func() { err = errors.Join(err, w.closeAll()) }()
	w.cfg = node.DefaultConfig(1)
	w.groups = []uint64{node.MetaGroup}
	for g := 0; g < opt.Groups; g++ {
		w.groups = append(w.groups, node.MetaGroup+1+uint64(g))
	}
	w.cfg.Groups = w.groups
	w.cfg.TickInterval = tick
	w.cfg.ProposalTimeout = time.Second
	w.cfg.CompactAfter, w.cfg.CompactKeep = 24, 4
	w.cfg.MaxEntrySize, w.cfg.MaxMsgSize = 4<<10, 64<<10
	w.lossPct, w.dupPct = w.rng.IntN(8), w.rng.IntN(5)
	for i := 1; i <= opt.Nodes; i++ {
		sn := &simNode{id: uint64(i), dir: filepath.Join(w.dir, fmt.Sprintf("node%d", i)), mem: vfs.NewCrashableMem()}
		w.nodes = append(w.nodes, sn)
		if err := w.start(sn); err != nil {
			return w, err
		}
	}
	for _, sn := range w.nodes {
		w.scheduleTick(sn, int64(w.rng.IntN(int(tick))))
		w.scheduleKeep(sn, int64(w.rng.IntN(int(keepEvery))))
	}
	for i := 0; i < opt.Clients; i++ {
		c := &client{id: i, open: map[string][]owned{}}
		w.clients = append(w.clients, c)
		w.after(time.Duration(w.rng.IntN(50))*time.Millisecond, func() { w.clientStep(c) })
	}
	if opt.Place != PlaceNone {
		w.startPlacer()
	}
	w.startTokener()
	if opt.Custody {
		w.startCustody()
	}
	if opt.Move {
		w.startMover()
	}
	chaosEnd := int64(opt.Chaos)
	w.after(200*time.Millisecond, func() { w.chaos(chaosEnd) })
	if opt.Driver {
		w.startDriver()
	} else if opt.Placement {
		w.after(300*time.Millisecond, w.placeStep)
		if opt.Liveness {
			w.startLiveness()
		}
	}
	w.at(chaosEnd, w.heal)
	end := chaosEnd + int64(opt.Quiesce)
	for w.queue.Len() > 0 && w.err == nil {
		e := heap.Pop(&w.queue).(*event)
		if e.at > end {
			break
		}
		w.now = e.at
		w.dispatch(e.fn)
	}
	// The quiet period ends at a fixed instant, which can fall between a
	// commit and the heartbeat that tells a follower of it (the placement
	// driver may have changed a group just before): run on, boundedly,
	// until every replica has applied its group's commit.
	for settleEnd := end + int64(settleMax); w.err == nil && !w.applied() && w.queue.Len() > 0; {
		e := heap.Pop(&w.queue).(*event)
		if e.at > settleEnd {
			break
		}
		w.now = e.at
		w.dispatch(e.fn)
	}
	w.stats.Virtual = time.Duration(w.now)
	if w.err == nil {
		w.err = w.finalChecks() // which adds the sessions' chain heads to the trace
	}
	w.stats.Trace = w.trace
	return w, w.err
}

// settleMax bounds how long past the quiet period the world runs until every
// replica has applied its group's commit.
const settleMax = 5 * time.Second

// applied reports whether every replica of every group, as its leader has
// the group's configuration, has applied the leader's commit index.
func (w *World) applied() bool {
	for i := range w.groups {
		var lead *node.GroupStatus
		for _, sn := range w.nodes {
			if !sn.up {
				return false // a node failed in the quiet period, restarting
			}
			if st := sn.n.Status()[i]; st.State == raft.StateLeader {
				lead = &st
			}
		}
		if lead == nil {
			return false
		}
		for _, id := range append(slices.Clone(lead.Voters), lead.Learners...) {
			if st := w.nodes[id-1].n.Status()[i]; st.Applied < lead.Commit {
				return false
			}
		}
	}
	return true
}

// dispatch runs one event. Raft panics when it finds its own invariants
// broken (a log that lost committed entries, say): that is a violation the
// run reports, not a crash of the test.
func (w *World) dispatch(fn func()) {
	defer func() {
		if r := recover(); r != nil {
			w.fail("raft invariant violated: %v", r)
		}
	}()
	fn()
}
