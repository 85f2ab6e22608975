package sim

// The world and its virtual clock: the event queue, the nodes, the
// failure a run reports and the trace that fingerprints it.

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster/node"
	"tally/cluster/raftlog"
	"tally/cluster/replica"
	"tally/store"
)

type event struct {
	at  int64
	seq uint64
	fn  func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// epoch is the virtual clock's zero, 2026-01-01T00:00:00Z, so the records
// the replicas write carry instants of this century.
const epoch = 1767225600 * int64(time.Second)

type clock struct{ now *int64 }

func (c clock) Now() time.Time { return time.Unix(0, epoch+*c.now).UTC() }

type simNode struct {
	id    uint64
	dir   string // its replica's ledger directory, on the real file system
	mem   *vfs.MemFS
	ffs   *raftlog.FaultFS
	db    *raftlog.DB
	sm    *replica.SM
	n     *node.MultiRaft
	up    bool
	epoch int // bumps on every restart, so stale events for a node are ignored
	// unsynced is, when a crash comes between a batch's session writes and
	// their fsync, where each session the batch wrote stood before it
	// (durably): the crash may cut each of those logs back to there.
	unsynced map[string]store.Position
}

// World is one run.
type World struct {
	opt    Options
	rng    *rand.Rand
	now    int64
	clock  clock
	dir    string // the nodes' directories, removed at the end of the run
	seq    uint64
	queue  eventQueue
	nodes  []*simNode
	cfg    node.Config
	groups []uint64

	// network
	lossPct, dupPct int
	blocked         map[[2]uint64]bool

	clients []*client
	expects []*simExpect
	claims  []*simClaim
	placer  *placer      // nil unless Options.Place
	mover   *mover       // nil unless Options.Move
	live    *liveWorld   // nil unless Options.Liveness
	drv     *driverWorld // nil unless Options.Driver
	tokener *tokener
	history []porcupine.Operation
	acked   []ackedWrite

	leaders map[[2]uint64]uint64 // (group, term) -> leader
	removed map[[2]uint64]bool   // (group, node) removed: never added again
	// dead and draining are the nodes placement runs marked; replicas
	// each node's replicas as the placer last counted them.
	dead, draining map[uint64]bool
	replicas       map[uint64]int
	confs          map[uint64]*pb.ConfState // each group's configuration after the placer's last change
	stats          Stats
	trace          uint64
	err            error

	// cust is evidence custody's state, nil unless Options.Custody.
	cust *custodyWorld
}

const tick = 20 * time.Millisecond

func (w *World) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("seed %d at %v: %s", w.opt.Seed, time.Duration(w.now), fmt.Sprintf(format, args...))
	}
}

func (w *World) mix(vals ...uint64) {
	for _, v := range vals {
		w.trace = (w.trace ^ v) * 1099511628211
	}
}

func (w *World) at(t int64, fn func()) {
	w.seq++
	heap.Push(&w.queue, &event{at: t, seq: w.seq, fn: fn})
}

func (w *World) after(d time.Duration, fn func()) { w.at(w.now+int64(d), fn) }

func (w *World) scheduleTick(sn *simNode, delay int64) {
	epoch := sn.epoch
	w.at(w.now+delay, func() {
		if !sn.up || sn.epoch != epoch {
			return
		}
		sn.n.Tick()
		w.process(sn)
		w.scheduleTick(sn, int64(tick))
	})
}

func (w *World) process(sn *simNode) {
	for i := 0; i < 16 && sn.up && sn.n.Process(); i++ {
	}
	if !sn.up {
		return
	}
	if sn.n.Failed() != nil {
		// A failed node (its disk failed, or it crashed in the middle of
		// a batch) stops; the simulator restarts it later, as an operator
		// would after replacing the disk.
		w.crash(sn)
		w.after(time.Duration(200+w.rng.IntN(800))*time.Millisecond, func() { w.restart(sn) })
		return
	}
	for _, gt := range sn.n.Leading() {
		k := [2]uint64{gt.Group, gt.Term}
		if other, ok := w.leaders[k]; ok && other != sn.id {
			w.fail("group %d term %d has two leaders: %d and %d", gt.Group, gt.Term, other, sn.id)
		}
		w.leaders[k] = sn.id
	}
}
