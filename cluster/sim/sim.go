// Package sim is a deterministic simulator for the cluster engine. One seed
// runs several real nodes in one goroutine: cluster/node's loop over
// cluster/raftlog on an in-memory pebble file system behind a
// fault-injecting wrapper, with tally's real state machine, cluster/replica,
// running the Service methods every node registers (cluster.Methods) on each
// node's own session ledgers, which package store writes to a directory of
// the node's on the real file system (tmpfs when there is one). Clients
// write as a node does: the same command (cluster.NewCommand, with the
// proposer's instant from the virtual clock and the id seed from the seed's
// generator) proposed to the group the replica's routing picks
// (replica.SM.GroupOf); they read with ReadIndex and then the replica's
// Service. One operation in five is of the other families, in sessions of
// their own: expectations raised and the facts that satisfy them (in time,
// late, or never), claims created, posted, received and given an artifact
// (its bytes staged, then published). Each node runs the timekeeper as a
// node does (cluster.DueSweeps on the virtual clock, for the groups it
// leads), sometimes proposing a sweep twice, and a tokener creates and
// revokes the cluster's tokens through the meta group. On two seeds in
// three a placer places the first session in another group than its
// hash's, as tally cluster place does (a Fence in its hash's group, then
// placement.set in the meta group), racing the clients' first writes to it
// or before them; clients refused as moved retry. Time is virtual, the network simulated, and faults injected:
// message loss, delay, duplication and reordering; partitions, including
// one-way ones; crashes that lose every unsynced write (the raft store's,
// and the tail a batch wrote to its sessions' logs before their fsync, cut
// anywhere down to what the replica had made durable, mid-line included),
// and restarts; failed disk writes and syncs; leader transfers; membership
// changes. The session logs' own disk does not fail, and a crash keeps
// every file and directory entry the replica made (only their unsynced
// bytes go).
//
// It checks, during the run and at its end, that no term has two leaders;
// that replicas' session logs never diverge (each a prefix of the longest,
// byte for byte) and end identical, with the same chain heads, and whole
// by the Service's verify (what `tally verify` runs); that every
// acknowledged write is in its session exactly once, at the sequence it was
// acknowledged with; that the meta group's replicas hold the same
// directory, a placement recorded has its session fenced on every replica
// of its hash's group and its log held by the group it is placed in; that
// the promise clients' history is linearizable (porcupine, against
// cluster/model's Ledger); and, of the other families, by the state every
// replica ends with: each lapse held once under its deterministic id, none
// of an expectation satisfied before its due and one of each never
// satisfied, each claim in the state its steps left it or Expired by one
// deadline fact, each artifact's bytes on every replica, and the meta
// group's replicas holding the same token table, which authenticates
// exactly the secrets not revoked.
//
// A run depends only on its seed, provided the process's cryptographic
// randomness is seeded too (raft draws its election timeouts from it, and
// the tokener mints its secrets from it; see
// testing/cryptotest.SetGlobalRandom). Nothing the replicas decide reads
// the wall clock: a command is applied at its proposer's instant, the
// replica's session cache runs on the virtual clock, and a command's ids
// come from its seed.
package sim

import (
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"tally/cluster/internal/fault"
	"tally/cluster/node"
	"tally/cluster/raftlog"
	"tally/cluster/replica"
	"tally/store"
)

// Options shape one run.
type Options struct {
	Seed     uint64
	Nodes    int           // 3 or 5
	Voters   int           // initial voters of every group (the rest join later); 0 means all
	Groups   int           // data groups, besides the meta group
	Clients  int           // concurrent clients
	Sessions int           // sessions of tenant "sim", each in the data group the replica's routing gives it
	Chaos    time.Duration // virtual time with faults
	Quiesce  time.Duration // virtual time after, healed, for catch-up
	// SendBeforePersist breaks raft's ordering rule in every node, to show
	// the checks catch it.
	SendBeforePersist bool
	// Place places the first session in another group than its hash's
	// (PlaceRace, PlaceFirst; place.go), or not (PlaceNone).
	Place int
	// Families is the percent of the clients' operations that are of the
	// other families (family.go), half expectations raised, half claims'
	// steps, besides the facts they record when due.
	Families int
	// Pause is the range of a client's pause between two operations.
	Pause [2]time.Duration
	// Placement makes the membership changes placement's, with a node
	// marked dead and one drained among the faults (placement.go).
	Placement bool
	// Liveness, on a placement run, has no node marked dead by hand: the
	// failure detector's deciding table commits dead and alive facts
	// from the members' modelled reports (liveness.go).
	Liveness bool
	// Custody runs evidence custody (custody.go): artifacts published
	// beside the log, fetched, receipted, scrubbed; CustodyPolicy is the
	// required copies (replica.CustodyAll when empty); Corrupt corrupts
	// stored copies among the faults.
	Custody       bool
	CustodyPolicy string
	Corrupt       bool
	// beginWithoutCustody breaks the rule that a check begins only once
	// custody is whole, to show the custody checks catch it.
	beginWithoutCustody bool
	// receiptUnverified breaks the rule that a node receipts only a copy
	// that verified, to show the custody checks catch it.
	receiptUnverified bool
	// Move moves the first session to another data group through the
	// faults (move.go).
	Move bool
	// moveSkipFence breaks the move: the mover records the source's end
	// without fencing it, to show the checks catch it.
	moveSkipFence bool
	// Driver, on a placement run, has the real placement driver make the
	// membership changes, with the operator's requests (members added, a
	// node marked dead, one drained) among the faults (driver.go).
	Driver bool
	// driverDropsRecords breaks the driver: no group's configuration is
	// recorded in the meta group, to show the driver's checks catch it.
	driverDropsRecords bool
	// placeOnSuspicion breaks the rule that a suspicion alone changes no
	// placement: the placer also takes a node the decider suspects for
	// dead, to show the liveness checks catch it.
	placeOnSuspicion bool
}

// DefaultOptions is the run the test suite uses per seed.
func DefaultOptions(seed uint64) Options {
	return Options{Seed: seed, Nodes: 3, Groups: 2, Clients: 4, Sessions: 4, Chaos: 3 * time.Second, Quiesce: 4 * time.Second,
		Place: []int{PlaceFirst, PlaceNone, PlaceRace}[seed%3], Families: 20, Pause: [2]time.Duration{50 * time.Millisecond, 200 * time.Millisecond}}
}

// Stats describe a finished run.
type Stats struct {
	Virtual    time.Duration
	Ops        int // completed client operations
	Writes     int // acknowledged declarations and resolutions
	Reads      int
	Crashes    int
	Unsynced   int // crashes between a batch's session writes and their fsync
	Torn       int // session logs those crashes cut mid-line
	DiskFaults int
	Partitions int
	Transfers  int
	Membership int // membership changes applied
	// Decisions are the placement rule's changes applied; MarkedDead and
	// Drained the nodes so marked (placement runs).
	Decisions, MarkedDead, Drained int
	// Added counts the nodes recorded as members in the middle of the
	// faults (driver runs).
	Added int
	// Joint counts the driver's joint changes made (a learner promoted
	// and the voter it replaces removed at once).
	Joint     int
	Messages  int
	Snapshots int // snapshot streams started
	// SnapshotsFailed counts the streams lost on the way, cut, or whose
	// acknowledgment was lost, each reported to its sender as a failure;
	// SnapshotsStale, those of them whose manifest named a staged upload
	// used (its file removed) before the body was written.
	SnapshotsFailed, SnapshotsStale int
	// Placements recorded, and refused (the session had records first);
	// Moved counts the clients' attempts refused as moved.
	Placements, PlacementsRefused, Moved int
	// Expectations raised and Facts recorded (acknowledged); Lapses
	// committed, as the replicas end; Sweeps committed that committed
	// something, and SweepsEmpty that found nothing left to commit (a
	// repeat, or a race with another).
	Expectations, Facts, Lapses, Sweeps, SweepsEmpty int
	// Claims created; ClaimsRefused, a step refused once the claim's
	// deadline passed; Expired, the claims the timekeeper expired;
	// Artifacts published, their bytes staged first.
	Claims, ClaimsRefused, Expired, Artifacts int
	// Tokens created, and TokensRevoked, in the meta group; MetaSnapshots
	// of the meta group sent.
	Tokens, TokensRevoked, MetaSnapshots int
	// MovesActivated and MovesAborted end the mover's move (move runs);
	// MoveStreamsLost are the installs' fetches the faults lost.
	MovesActivated, MovesAborted, MoveStreamsLost int
	// Live counts the failure detector's work (liveness runs).
	Live  LiveStats
	Trace uint64 // a hash of the run's events, equal for equal runs

	// Custody counts evidence custody's work (custody runs).
	Custody CustodyStats
}

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

func (w *World) start(sn *simNode) error {
	sn.ffs = raftlog.NewFaultFS(sn.mem)
	db, err := raftlog.Open("/data", raftlog.Options{FS: sn.ffs, MemTableSize: 64 << 10, CacheSize: 256 << 10})
	if err != nil {
		return fmt.Errorf("seed %d: node %d: %w", w.opt.Seed, sn.id, err)
	}
	sm, err := w.openReplica(sn, db)
	if err != nil {
		return fmt.Errorf("seed %d: node %d: %w", w.opt.Seed, sn.id, errors.Join(err, db.Close()))
	}
	sn.db, sn.sm = db, sm
	cfg := w.cfg
	cfg.ID = sn.id
	var voters []uint64 // none for a node that joins later
	if int(sn.id) <= w.opt.Voters {
		for i := range w.opt.Voters {
			voters = append(voters, uint64(i+1))
		}
	}
	n, err := node.New(cfg, db, sn.sm, &transport{w: w, from: sn.id}, w.clock, func(uint64) []uint64 { return voters }, nil)
	if err != nil {
		return fmt.Errorf("seed %d: node %d: %w", w.opt.Seed, sn.id, errors.Join(err, sm.Close(), db.Close()))
	}
	n.Inject(fault.Faults{SendBeforePersist: w.opt.SendBeforePersist})
	sn.n, sn.up = n, true
	sn.epoch++
	return nil
}

// crash drops the node and every write it had not synced: the raft
// store's, and the unsynced tail of its sessions' logs.
func (w *World) crash(sn *simNode) {
	if !sn.up {
		return
	}
	w.stats.Crashes++
	w.mix(1, sn.id)
	sn.up = false
	sn.epoch++
	crashed := sn.mem.CrashClone(vfs.CrashCloneCfg{})
	closeStore(sn)
	// The sessions' files are closed before their tails are cut, as the
	// process's would be by its death.
	if err := sn.sm.Close(); err != nil {
		w.fail("crash node %d: close its sessions: %v", sn.id, err)
	}
	w.loseUnsynced(sn)
	sn.mem, sn.db, sn.n, sn.sm = crashed, nil, nil, nil
}

// closeStore closes a node's raft store, a failed one too: raftlog leaves
// a failed pebble open (on a dying disk its close could block), but here
// the disk is the simulator's, healed first, and an abandoned store would
// keep its goroutines and memory for the rest of a long sweep.
func closeStore(sn *simNode) {
	if sn.db.Failed() == nil {
		_ = sn.db.Close()
		return
	}
	sn.ffs.FailWrites(false)
	sn.ffs.FailSyncs(false)
	_ = sn.db.Pebble().Close() // it reports the failure it stopped on
}

func (w *World) restart(sn *simNode) {
	if sn.up {
		return
	}
	w.mix(2, sn.id)
	w.liveRestarted(sn)
	if err := w.start(sn); err != nil {
		w.fail("restart: %v", err)
		return
	}
	w.scheduleTick(sn, 0)
	w.scheduleKeep(sn, int64(keepEvery))
	w.custodyRestarted(sn)
}

// closeAll closes every live node and removes the nodes' directories.
func (w *World) closeAll() error {
	for _, sn := range w.nodes {
		if !sn.up {
			continue
		}
		_ = sn.sm.Close()
		closeStore(sn)
	}
	if err := os.RemoveAll(w.dir); err != nil {
		return fmt.Errorf("seed %d: remove the nodes' directories: %w", w.opt.Seed, err)
	}
	return nil
}

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

type transport struct {
	w    *World
	from uint64
}

func (t *transport) Send(to uint64, batch []node.Envelope) {
	w := t.w
	if !t.reaches(to) {
		return
	}
	// Copy, as a wire would: the receiver must not share the sender's
	// messages.
	cp := make([]node.Envelope, len(batch))
	for i, e := range batch {
		cp[i] = node.Envelope{Group: e.Group, Msg: proto.Clone(e.Msg).(*pb.Message)}
	}
	w.stats.Messages += len(cp)
	if w.now < int64(w.opt.Chaos) && w.rng.IntN(1000) < 2 {
		// Crash at the worst moment: right after sending, before anything
		// else happens at the sender. Whatever the messages promised must
		// already be on its disk.
		sender := w.nodes[t.from-1]
		epoch := sender.epoch
		w.after(0, func() {
			if sender.epoch == epoch {
				w.crash(sender)
				w.after(time.Duration(100+w.rng.IntN(400))*time.Millisecond, func() { w.restart(sender) })
			}
		})
	}
	copies := 1
	if w.rng.IntN(100) < w.dupPct {
		copies = 2
	}
	sn := w.nodes[to-1]
	for range copies {
		delay := time.Duration(1+w.rng.IntN(15)) * time.Millisecond
		epoch := sn.epoch
		w.after(delay, func() {
			if !sn.up || sn.epoch != epoch || w.blocked[[2]uint64{t.from, to}] {
				return
			}
			for _, e := range cp {
				sn.n.Deliver(e)
			}
			w.process(sn)
		})
	}
}

// SendSnapshot carries a snapshot's body whole, in memory (a test may),
// on the same lossy, partitionable network. The body is written from the
// manifest when the stream arrives, as a real stream writes it while the
// sender's loop goes on, so the state machine must still produce what its
// manifest named. The stream can be lost on the way there or its
// acknowledgment on the way back, and either failure is told to the
// sender from its own loop, as a real stream's would be; a sender that
// crashed meanwhile took its stream with it.
func (t *transport) SendSnapshot(to uint64, s node.OutboundSnapshot) {
	w := t.w
	w.stats.Snapshots++
	if s.Envelope.Group == node.MetaGroup {
		w.stats.MetaSnapshots++
	}
	if !t.reaches(to) {
		t.report(s, errors.New("snapshot lost on the way"))
		return
	}
	env := node.Envelope{Group: s.Envelope.Group, Msg: proto.Clone(s.Envelope.Msg).(*pb.Message)}
	sender, sn := w.nodes[t.from-1], w.nodes[to-1]
	senderEpoch, epoch := sender.epoch, sn.epoch
	// A body takes longer than a message: a millisecond per 64 KiB more.
	delay := time.Duration(1+w.rng.IntN(15)+int(s.Size>>16)) * time.Millisecond
	w.after(delay, func() {
		if !sender.up || sender.epoch != senderEpoch {
			return
		}
		if !sn.up || sn.epoch != epoch || w.blocked[[2]uint64{t.from, to}] {
			t.report(s, errors.New("snapshot stream cut"))
			return
		}
		var body bytes.Buffer
		err := s.Write(&body)
		if errors.Is(err, fs.ErrNotExist) {
			// A staged upload used since the manifest was taken, its file
			// removed: the stream fails, and raft sends a newer snapshot
			// (replica/snapshot_bytes.go).
			w.stats.SnapshotsStale++
			t.report(s, err)
			return
		}
		if err != nil || uint64(body.Len()) != s.Size {
			w.fail("snapshot of group %d from node %d: %d bytes written, %d in the manifest: %v", env.Group, t.from, body.Len(), s.Size, err)
			return
		}
		env.Snapshot = &node.InboundSnapshot{
			Body: io.NopCloser(&body),
			Stepped: func(bool) {
				back := transport{w: w, from: to}
				if back.reaches(t.from) {
					t.report(s, nil)
				} else {
					t.report(s, errors.New("snapshot acknowledgment lost"))
				}
			},
		}
		sn.n.Deliver(env)
		w.process(sn)
	})
}

// reaches rolls whether a message from t's node to another gets through
// the network as it is now.
func (t *transport) reaches(to uint64) bool {
	w := t.w
	if w.blocked[[2]uint64{t.from, to}] || int(to) > len(w.nodes) || to == 0 {
		return false
	}
	return w.rng.IntN(100) >= w.lossPct
}

// report tells the sender a stream's outcome, from its loop, after a
// network delay; a sender restarted since is a new node that never sent it.
func (t *transport) report(s node.OutboundSnapshot, err error) {
	w := t.w
	sender := w.nodes[t.from-1]
	epoch := sender.epoch
	w.mix(11, t.from, s.Envelope.Group)
	if err != nil {
		w.stats.SnapshotsFailed++
	}
	w.after(time.Duration(1+w.rng.IntN(15))*time.Millisecond, func() {
		if sender.up && sender.epoch == epoch {
			s.Done(err)
			w.process(sender)
		}
	})
}

func (w *World) upNodes() []*simNode {
	var out []*simNode
	for _, sn := range w.nodes {
		if sn.up {
			out = append(out, sn)
		}
	}
	return out
}

// chaos injects one fault and schedules the next.
func (w *World) chaos(end int64) {
	if w.now >= end {
		return
	}
	pick := w.nodes[w.rng.IntN(len(w.nodes))]
	other := w.nodes[w.rng.IntN(len(w.nodes))]
	down := len(w.nodes) - len(w.upNodes())
	switch r := w.rng.IntN(100); {
	case r < 15: // isolate a node both ways
		w.stats.Partitions++
		w.mix(3, pick.id)
		for _, o := range w.nodes {
			w.blocked[[2]uint64{pick.id, o.id}] = true
			w.blocked[[2]uint64{o.id, pick.id}] = true
		}
	case r < 25: // cut one direction only
		if pick != other {
			w.stats.Partitions++
			w.mix(4, pick.id, other.id)
			w.blocked[[2]uint64{pick.id, other.id}] = true
		}
	case r < 45: // heal the network
		w.mix(5)
		clear(w.blocked)
	case r < 48: // power loss: every node crashes at once
		for _, sn := range w.nodes {
			w.crash(sn)
			sn := sn
			w.after(time.Duration(50+w.rng.IntN(300))*time.Millisecond, func() { w.restart(sn) })
		}
	case r < 60: // crash, restart later
		if down < (len(w.nodes)-1)/2 || w.rng.IntN(4) == 0 {
			w.crash(pick)
			w.after(time.Duration(100+w.rng.IntN(900))*time.Millisecond, func() { w.restart(pick) })
		}
	case r < 68: // the disk fails under the next commit
		if pick.up {
			w.stats.DiskFaults++
			w.mix(6, pick.id)
			if w.rng.IntN(2) == 0 {
				pick.ffs.FailSyncs(true)
			} else {
				pick.ffs.FailWrites(true)
			}
		}
	case r < 80: // move a group's leadership mid-stream
		g := w.groups[w.rng.IntN(len(w.groups))]
		for _, sn := range w.upNodes() {
			for _, gt := range sn.n.Leading() {
				if gt.Group == g && other.id != sn.id {
					w.stats.Transfers++
					w.mix(7, g, other.id)
					sn.n.TransferLeader(g, other.id)
				}
			}
		}
	case r < 86:
		w.lossPct, w.dupPct = w.rng.IntN(15), w.rng.IntN(8)
	case r < 92 && w.opt.Placement:
		w.markOrDrain(pick)
	case r < 92:
		w.changeMembership()
	default:
		w.checkPrefixes()
	}
	w.after(time.Duration(50+w.rng.IntN(250))*time.Millisecond, func() { w.chaos(end) })
}

// changeMembership moves one group one step: a node not in it joins as a
// learner, a learner is promoted, or (above the initial size) a voter other
// than the leader is removed, for good.
func (w *World) changeMembership() {
	g := w.groups[w.rng.IntN(len(w.groups))]
	for _, sn := range w.upNodes() {
		if !slices.ContainsFunc(sn.n.Leading(), func(gt node.GroupTerm) bool { return gt.Group == g }) {
			continue
		}
		st := sn.n.Status()[slices.Index(w.groups, g)]
		in := map[uint64]bool{}
		for _, id := range append(slices.Clone(st.Voters), st.Learners...) {
			in[id] = true
		}
		var cc *pb.ConfChangeSingle
		for _, o := range w.nodes {
			if !in[o.id] && !w.removed[[2]uint64{g, o.id}] {
				cc = &pb.ConfChangeSingle{Type: pb.ConfChangeType_ConfChangeAddLearnerNode.Enum(), NodeId: new(o.id)}
				break
			}
		}
		if cc == nil && len(st.Learners) > 0 {
			cc = &pb.ConfChangeSingle{Type: pb.ConfChangeType_ConfChangeAddNode.Enum(), NodeId: new(st.Learners[0])}
		}
		if cc == nil && len(st.Voters) > w.opt.Voters {
			v := st.Voters[w.rng.IntN(len(st.Voters))]
			if v != sn.id {
				cc = &pb.ConfChangeSingle{Type: pb.ConfChangeType_ConfChangeRemoveNode.Enum(), NodeId: new(v)}
			}
		}
		if cc == nil {
			return
		}
		w.mix(10, g, uint64(cc.GetType()), cc.GetNodeId())
		change := cc
		sn.n.ProposeConfChange(g, &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{cc}}, func(r node.ConfResult) {
			if r.Err != nil {
				return
			}
			w.stats.Membership++
			if change.GetType() == pb.ConfChangeType_ConfChangeRemoveNode {
				w.removed[[2]uint64{g, change.GetNodeId()}] = true
			}
		})
		return
	}
}

// heal ends the faults: the network is whole and every node up.
func (w *World) heal() {
	w.mix(8)
	clear(w.blocked)
	w.lossPct, w.dupPct = 0, 0
	for _, sn := range w.nodes {
		if !sn.up {
			w.restart(sn)
		}
	}
}
