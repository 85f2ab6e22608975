package sim

// The failure detector under faults. On a run with Options.Liveness (a
// placement run), no node is marked dead by hand: the meta group's leader
// runs the deciding table the cluster runs (liveness.Detector) over the
// members' reports, which the simulator models rather than running
// memberlist: every livePeriod each node that is up reports to the
// decider, if the network carries it there (a partition or the loss rate
// drops it), with its incarnation, its witness (the periods it ran) and
// the members it could not probe (down, or cut off from it either way);
// told it is suspected or dead at its incarnation, it refutes with a
// higher one if the answer comes back. The decider commits settled facts
// in the meta group (node.liveness, decided by the replicas' own rule),
// and the placer reads the dead ones from the meta replica at each group's
// leader, as the placement driver does. A node's incarnation is kept
// across crashes and raised at each start.
//
// Checked: a committed fact's incarnation never goes below one committed
// before for its node; the placer's input marks dead exactly the nodes
// its replica holds committed dead, so a suspicion alone changes no
// placement, and a change that replaces a node as dead follows a dead
// fact the decider committed; once the faults stop, every node is settled
// alive again (a node settled dead that restarts is re-admitted) and every
// group is back at its goal.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"tally/cluster/liveness"
	"tally/cluster/node"
	"tally/cluster/placement"
	"tally/cluster/replica"
)

// livePeriod is the modelled probe period: the seed's 1 s scaled down, so
// that a crash of a few hundred milliseconds runs a suspicion to its end
// within the simulator's few seconds of faults.
const livePeriod = 100 * time.Millisecond

// liveWorld is the failure detector's part of the world.
type liveWorld struct {
	// inc is each node's incarnation (kept on its disk); witness the
	// periods it ran.
	inc, witness map[uint64]uint64
	// decider is the node whose table det is (0: none yet).
	decider uint64
	det     *liveness.Detector
	// pending is each node's fact in flight, by the decider node and
	// restart epoch that proposed it: a proposal lost to its proposer's
	// crash never calls back, and must not hold the node's next fact.
	pending map[uint64][2]int
	// committed is each node's last fact the meta group committed, as its
	// proposer took the outcome; deadAt, the incarnations the decider
	// proposed each node dead at (a proposal whose proposer lost its
	// outcome, to a crash or a lost leadership, may still commit).
	committed map[uint64]replica.LivenessFact
	deadAt    map[uint64][]uint64
	members   bool // every node recorded a member of the meta group
}

// LiveStats count the failure detector's work on liveness runs.
type LiveStats struct {
	// Suspicions started; Deaths and Alive facts committed; Refutations
	// the nodes made; Grants of late homework; WhileSuspect, the
	// placement changes made while the decider held a node suspect that
	// was not committed dead.
	Suspicions, Deaths, Alive, Refutations, Grants, WhileSuspect int
}

func (w *World) startLiveness() {
	w.live = &liveWorld{inc: map[uint64]uint64{}, witness: map[uint64]uint64{}, pending: map[uint64][2]int{},
		committed: map[uint64]replica.LivenessFact{}, deadAt: map[uint64][]uint64{}}
	for _, sn := range w.nodes {
		w.live.inc[sn.id] = 1
	}
	w.after(300*time.Millisecond, w.liveStep)
}

// liveRestarted raises a restarted node's incarnation, as its start does.
func (w *World) liveRestarted(sn *simNode) {
	if w.live != nil {
		w.live.inc[sn.id]++
	}
}

// metaLeader is the up node leading the meta group, if any.
func (w *World) metaLeader() *simNode {
	for _, sn := range w.upNodes() {
		if slices.ContainsFunc(sn.n.Leading(), func(gt node.GroupTerm) bool { return gt.Group == node.MetaGroup }) {
			return sn
		}
	}
	return nil
}

// carries says whether a message from one node reaches another now.
func (w *World) carries(from, to uint64) bool {
	return from == to || !w.blocked[[2]uint64{from, to}] && w.rng.IntN(100) >= w.lossPct
}

// liveStep is one period: the decider (the meta group's leader) hears
// every report that reaches it, settles the suspicions past their
// deadlines, and commits what follows.
func (w *World) liveStep() {
	defer w.after(livePeriod, w.liveStep)
	lw := w.live
	d := w.metaLeader()
	if d == nil {
		return
	}
	if !lw.members {
		w.recordMembers(d)
		return
	}
	if lw.decider != d.id || lw.det == nil {
		lw.decider, lw.det = d.id, liveness.NewDetector(d.id, livePeriod)
		lw.det.Members(w.nodeIDs())
	}
	// As the cluster's decider does each period: the facts committed
	// meanwhile, and each death the table settled that the meta group has
	// not recorded (its proposal lost) proposed again.
	for _, f := range d.sm.LivenessFacts() {
		lw.det.Settle(f.Node, f.Incarnation, liveness.State(f.State))
	}
	for _, p := range lw.det.Peers() {
		if p.State != liveness.Dead {
			continue
		}
		if f, ok := d.sm.Liveness(p.Node); !ok || f.Incarnation < p.Incarnation || f.Incarnation == p.Incarnation && f.State != replica.LivenessDead {
			w.commitFact(d, replica.LivenessFact{Node: p.Node, Incarnation: p.Incarnation, State: replica.LivenessDead, Source: replica.LivenessDetector,
				Reason: "suspected, unrefuted past its deadline"})
		}
	}
	now := time.Unix(0, w.now)
	n := len(w.nodes)
	for _, r := range w.upNodes() {
		lw.witness[r.id]++
		if !w.carries(r.id, d.id) {
			continue
		}
		before, _ := lw.det.Peer(r.id)
		inc := lw.inc[r.id]
		h := lw.det.Hear(r.id, inc, lw.witness[r.id], liveness.Load{}, now)
		w.checkTable(r.id, before)
		if h.Refuted {
			w.mix(20, r.id, inc)
		}
		if h.Homework != nil && h.Homework.Denial == liveness.Granted {
			w.stats.Live.Grants++
		}
		if r.id == d.id || !h.Stale && h.State == liveness.Alive {
			if f, ok := d.sm.Liveness(r.id); !ok || f.State == replica.LivenessDead && inc > f.Incarnation {
				w.commitFact(d, replica.LivenessFact{Node: r.id, Incarnation: inc, State: replica.LivenessAlive, Source: replica.LivenessDetector, Reason: "answered"})
			}
		}
		// Told it is suspected or dead at its incarnation, it refutes, if
		// the answer comes back.
		if p, _ := lw.det.Peer(r.id); r.id != d.id && (p.Incarnation > inc || p.State != liveness.Alive && p.Incarnation == inc) && w.carries(d.id, r.id) {
			lw.inc[r.id] = max(inc, p.Incarnation) + 1
			w.stats.Live.Refutations++
		}
		for _, p := range w.nodes {
			if p.id == r.id || p.up && !w.blocked[[2]uint64{r.id, p.id}] && !w.blocked[[2]uint64{p.id, r.id}] {
				continue
			}
			before, _ := lw.det.Peer(p.id)
			if lw.det.Accuse(p.id, lw.inc[p.id], r.id, n, now) == liveness.AccuseStarted {
				w.stats.Live.Suspicions++
				w.mix(21, p.id, lw.inc[p.id], r.id)
			}
			w.checkTable(p.id, before)
		}
	}
	for _, v := range lw.det.Expire(now) {
		w.commitFact(d, replica.LivenessFact{Node: v.Node, Incarnation: v.Incarnation, State: replica.LivenessDead, Source: replica.LivenessDetector,
			Reason: "suspected, unrefuted past its deadline"})
	}
}

func (w *World) nodeIDs() []uint64 {
	ids := make([]uint64, len(w.nodes))
	for i, sn := range w.nodes {
		ids[i] = sn.id
	}
	return ids
}

// checkTable fails the run if the decider's row of node went back to a
// lower incarnation.
func (w *World) checkTable(id uint64, before liveness.Peer) {
	if after, _ := w.live.det.Peer(id); after.Incarnation < before.Incarnation {
		w.fail("liveness: the deciding table took node %d from incarnation %d back to %d", id, before.Incarnation, after.Incarnation)
	}
}

// recordMembers proposes, through the meta group's leader d, every node
// not yet a member (a fact is recorded only of a member).
func (w *World) recordMembers(d *simNode) {
	have := d.sm.Members()
	if len(have) == len(w.nodes) {
		w.live.members = true
		return
	}
	for _, sn := range w.nodes {
		if slices.ContainsFunc(have, func(m replica.Member) bool { return m.ID == sn.id }) {
			continue
		}
		m := replica.Member{ID: sn.id, RaftAddr: fmt.Sprintf("sim-%d:1", sn.id), Addr: fmt.Sprintf("sim-%d:2", sn.id)}
		data, _ := json.Marshal(replica.MetaCommand{Op: replica.OpMemberAdd, Member: &m, TS: w.now})
		d.n.Propose(node.MetaGroup, data, func(node.ProposeResult) {})
	}
}

// commitFact proposes f in the meta group through the decider d, one at
// a time per node, and checks what the meta group committed: never an
// incarnation below one committed before.
func (w *World) commitFact(d *simNode, f replica.LivenessFact) {
	lw := w.live
	at := [2]int{int(d.id), d.epoch}
	if lw.pending[f.Node] == at {
		return
	}
	lw.pending[f.Node] = at
	f.TS = w.now
	if f.State == replica.LivenessDead && !slices.Contains(lw.deadAt[f.Node], f.Incarnation) {
		lw.deadAt[f.Node] = append(lw.deadAt[f.Node], f.Incarnation)
	}
	data, _ := json.Marshal(replica.MetaCommand{Op: replica.OpLiveness, Liveness: &f, TS: f.TS})
	sm, epoch := d.sm, d.epoch
	d.n.Propose(node.MetaGroup, data, func(r node.ProposeResult) {
		if lw.pending[f.Node] == at {
			delete(lw.pending, f.Node)
		}
		if r.Err != nil || d.epoch != epoch {
			return
		}
		out, ok := sm.Take(node.MetaGroup, r.Index)
		if !ok || out.Err != nil {
			return // refused by the meta group's rule (stale), or not known here
		}
		got, _ := out.Value.(replica.LivenessFact)
		if last, ok := lw.committed[got.Node]; ok && got.Incarnation < last.Incarnation {
			w.fail("liveness: node %d committed %s at incarnation %d after %s at %d", got.Node, got.State, got.Incarnation, last.State, last.Incarnation)
			return
		}
		lw.committed[got.Node] = got
		w.mix(22, got.Node, got.Incarnation)
		if got.State == replica.LivenessDead {
			w.stats.Live.Deaths++
		} else {
			w.stats.Live.Alive++
		}
	})
}

// liveNodes sets the placer's dead marks from the facts sn's meta replica
// holds (as the driver reads them), and checks that a change the placer
// is to make replaces a node as dead only after the decider committed it
// dead.
func (w *World) liveNodes(sn *simNode) {
	clear(w.dead)
	if w.opt.placeOnSuspicion && w.live.det != nil {
		for _, p := range w.live.det.Peers() {
			w.dead[p.Node] = p.State == liveness.Suspect
		}
	}
	for _, f := range sn.sm.LivenessFacts() {
		if f.State == replica.LivenessDead {
			w.dead[f.Node] = true
			if !slices.Contains(w.live.deadAt[f.Node], f.Incarnation) {
				w.fail("liveness: node %d is dead at incarnation %d in node %d's meta replica, which the decider never proposed", f.Node, f.Incarnation, sn.id)
			}
		}
	}
}

// liveChange checks a change the placer takes: a node it replaces as dead
// is committed dead in the replica it read, never only suspected; it
// counts the changes made while a node was suspected and not dead.
func (w *World) liveChange(sn *simNode, ch *placement.Change) {
	lw := w.live
	if lw.det != nil {
		for _, p := range lw.det.Peers() {
			if p.State == liveness.Suspect && !w.dead[p.Node] {
				w.stats.Live.WhileSuspect++
				break
			}
		}
	}
	for _, o := range w.nodes {
		if !strings.Contains(ch.Reason, fmt.Sprintf("node %d is dead", o.id)) {
			continue
		}
		if f, ok := sn.sm.Liveness(o.id); !ok || f.State != replica.LivenessDead {
			w.fail("liveness: node %d's change of group %d treats node %d as dead with no dead fact committed: %s", sn.id, ch.Group, o.id, ch.Reason)
		}
	}
}

// checkLive is the end's check of a liveness run: every node, all up
// again, is settled alive (or has no fact), as the meta group's leader
// has applied it.
func (w *World) checkLive() error {
	d := w.metaLeader()
	if d == nil {
		return fmt.Errorf("liveness: no meta group leader at the end")
	}
	for _, f := range d.sm.LivenessFacts() {
		if f.State == replica.LivenessDead {
			return fmt.Errorf("liveness: node %d is still settled dead at incarnation %d at the end, though up since the faults stopped (its incarnation %d)", f.Node, f.Incarnation, w.live.inc[f.Node])
		}
	}
	return nil
}
