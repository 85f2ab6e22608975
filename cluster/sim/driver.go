package sim

// The placement driver under faults (Options.Driver, a placement run of
// five nodes). The membership changes are the real driver's: every node,
// on the virtual clock, runs the driver's steps (cluster.LeaderStep,
// cluster.CarryOutStep, cluster.DecideStep) over what its own replica has
// applied of the meta group, as a node's loop does, and proposes what
// they give through its own raft: the meta leader commits decisions and
// ends them in the meta group (where the replicas' rule refuses a second
// decision in flight for a group), each group's leader carries out its
// group's decision as a raft change (a caught-up learner promoted and the
// voter it replaces removed in one joint change) and records the group's
// configuration. The operator's requests come in the middle of the
// faults, through the meta group's leader: the members and the
// replication factor first (the nodes beyond the first voters are added
// as members later, mid-faults), a node that is down marked dead, and a
// live one drained, each when the rest can hold the groups (as the
// cluster's own checks refuse otherwise).
//
// Checked: each change a group's leader makes keeps a quorum of the
// group's voters not committed dead, unless the configuration before it
// had already lost that (failures, not the driver, lost it); and at the
// end, besides every check of a run (no acknowledged write lost or
// doubled, logs identical), every group is at its goal on live, undrained
// members within the quiet period, no decision is in flight, and the
// meta group's record of each group's configuration is the group's own.

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster"
	"tally/cluster/node"
	"tally/cluster/placement"
	"tally/cluster/replica"
)

// driveEvery bounds the pause between two passes of the nodes' drivers
// (the node's loop runs one every 250 ms).
const driveEvery = 250 * time.Millisecond

// driverWorld is the driver's part of the world.
type driverWorld struct {
	nodes map[uint64]*driverNode
	// marked and drained are the nodes the operator marked dead and
	// drained (0: none yet).
	marked, drained uint64
	// markedEpoch is the marked node's restart epoch when it was killed;
	// readmitting, an alive fact of it in flight.
	markedEpoch int
	readmitting bool
	// dropRecords breaks the driver: a group's configuration is never
	// recorded in the meta group, to show the end's check catches it.
	dropRecords bool
}

// driverNode is one node's driver state, reset when the node restarts
// (its goroutines' proposals died with it).
type driverNode struct {
	epoch   int
	ds      *cluster.DriverState
	pending map[uint64]bool
}

func (w *World) startDriver() {
	w.drv = &driverWorld{nodes: map[uint64]*driverNode{}, dropRecords: w.opt.driverDropsRecords}
	w.after(300*time.Millisecond, w.driverStep)
	for _, op := range []int{opAdd, opMarkDead, opDrain} {
		w.operatorAt(op)
	}
}

// zoneOf is a node's zone in driver runs: three zones by id.
func zoneOf(id uint64) string { return fmt.Sprintf("z%d", id%3) }

// member is a node's record as it joins.
func member(id uint64) replica.Member {
	return replica.Member{ID: id, RaftAddr: fmt.Sprintf("sim-%d:1", id), Addr: fmt.Sprintf("sim-%d:2", id), Zone: zoneOf(id), Region: "r1"}
}

// driverStep runs one pass of every node's driver, after the operator's
// first requests (the first voters as members, the factor) are in.
func (w *World) driverStep() {
	defer w.after(time.Duration(100+w.rng.IntN(int(driveEvery/time.Millisecond)))*time.Millisecond, w.driverStep)
	d := w.metaLeader()
	if d == nil {
		return
	}
	have := d.sm.Members()
	for _, sn := range w.nodes {
		// The first voters are members from the start; the others join
		// in the middle of the faults (driverFault), or as they end.
		if (int(sn.id) <= w.opt.Voters || w.now >= int64(w.opt.Chaos)) && !slices.ContainsFunc(have, func(m replica.Member) bool { return m.ID == sn.id }) {
			w.addMember(d, sn.id)
		}
	}
	if d.sm.Policy().Replicas == 0 {
		// The factor once the first voters are all members, as a node
		// joins before it holds anything.
		first := 0
		for _, m := range have {
			if int(m.ID) <= w.opt.Voters {
				first++
			}
		}
		if first == w.opt.Voters {
			w.proposeMeta(d, replica.MetaCommand{Op: replica.OpConfigure, Replicas: w.opt.Voters}, nil)
		}
		return
	}
	w.readmit(d)
	for _, sn := range w.upNodes() {
		w.drivePass(sn)
	}
}

// addMember records a node as a member, through the meta leader d.
func (w *World) addMember(d *simNode, id uint64) {
	m := member(id)
	w.mix(30, id)
	w.proposeMeta(d, replica.MetaCommand{Op: replica.OpMemberAdd, Member: &m}, nil)
}

// driverOf is sn's driver state, fresh after a restart.
func (w *World) driverOf(sn *simNode) *driverNode {
	dn := w.drv.nodes[sn.id]
	if dn == nil || dn.epoch != sn.epoch {
		dn = &driverNode{epoch: sn.epoch, ds: cluster.NewDriverState(), pending: map[uint64]bool{}}
		w.drv.nodes[sn.id] = dn
	}
	return dn
}

// drivePass is sn's pass, as cluster.Node.drive: as the leader of each
// group, carry out its decision or record its configuration; as the meta
// group's leader, decide.
func (w *World) drivePass(sn *simNode) {
	dn := w.driverOf(sn)
	members := sn.sm.Members()
	pol := sn.sm.Policy()
	if len(members) == 0 || pol.Replicas == 0 {
		return
	}
	for _, st := range sn.n.Status() {
		if dn.pending[st.Group] {
			continue
		}
		commit, match, leading := sn.n.Progress(st.Group)
		if !leading {
			continue
		}
		wk := cluster.LeaderStep(sn.id, st, commit, match, pol)
		g := st.Group
		switch wk.Kind {
		case cluster.LeaderTransfer:
			w.mix(31, g, wk.To)
			sn.n.TransferLeader(g, wk.To)
		case cluster.LeaderCarryOut:
			dn.pending[g] = true
			w.carryOut(sn, dn, wk)
		case cluster.LeaderRecord:
			if w.drv.dropRecords {
				continue
			}
			dn.pending[g] = true
			conf := wk.Conf
			w.proposeMeta(sn, replica.MetaCommand{Op: replica.OpGroupConf, Group: g, GroupConf: &conf}, func(replica.Outcome, error) { delete(dn.pending, g) })
		}
	}
	if _, _, leadingMeta := sn.n.Progress(node.MetaGroup); !leadingMeta {
		dn.ds.Forget()
		return
	}
	nodes := replica.PlacementNodes(members, pol, sn.sm.Liveness)
	_, constraints := sn.sm.Constraints()
	for _, wk := range cluster.DecideStep(sn.id, w.clock.Now(), nodes, constraints, pol, dn.ds, dn.pending) {
		key := wk.Key
		cmd := wk.Cmd
		w.proposeMeta(sn, cmd, func(out replica.Outcome, err error) {
			delete(dn.pending, key)
			if err == nil && out.Err == nil && cmd.Op == replica.OpDecide {
				w.stats.Decisions++
				d, _ := out.Value.(replica.Decision)
				w.mix(32, d.ID, d.Group, d.Node, d.Replaces)
			}
		})
	}
}

// carryOut is cluster.Node.carryOut on sn: the decision's raft change,
// checked, then its end and the group's configuration after it.
func (w *World) carryOut(sn *simNode, dn *driverNode, wk cluster.LeaderWork) {
	d, conf := wk.Decision, wk.Conf
	cc, state, why := cluster.CarryOutStep(d, conf, wk.Rec)
	if cc == nil {
		w.endDecision(sn, dn, d, state, why, nil)
		return
	}
	epoch := sn.epoch
	w.mix(33, d.ID, d.Group)
	sn.n.ProposeConfChange(d.Group, cc, func(r node.ConfResult) {
		if sn.epoch != epoch {
			return
		}
		if r.Err != nil {
			w.endDecision(sn, dn, d, replica.DecisionFailed, r.Err.Error(), nil)
			return
		}
		w.stats.Membership++
		if d.Op == placement.Replace {
			w.stats.Joint++
		}
		w.confs[d.Group] = r.Conf
		w.checkChange(d, conf.Voters, r.Conf)
		after := cluster.AfterChange(conf, r)
		w.endDecision(sn, dn, d, replica.DecisionDone, "", &after)
	})
}

// endDecision commits the group's configuration after a change, when
// given, then the decision's end, and frees the group for sn's next pass.
func (w *World) endDecision(sn *simNode, dn *driverNode, d replica.Decision, state, why string, after *replica.GroupConf) {
	end := func() {
		w.proposeMeta(sn, replica.MetaCommand{Op: replica.OpDecided, Decision: &replica.Decision{ID: d.ID, State: state, Error: why}}, func(replica.Outcome, error) {
			delete(dn.pending, d.Group)
		})
	}
	if after == nil || w.drv.dropRecords {
		end()
		return
	}
	w.proposeMeta(sn, replica.MetaCommand{Op: replica.OpGroupConf, Group: d.Group, GroupConf: after}, func(replica.Outcome, error) { end() })
}

// proposeMeta proposes a meta command through sn, stamped with the
// virtual clock; done, if given, takes its outcome, unless sn restarted
// meanwhile (its proposals died with it).
func (w *World) proposeMeta(sn *simNode, cmd replica.MetaCommand, done func(replica.Outcome, error)) {
	cmd.TS = w.now
	data, err := json.Marshal(cmd)
	if err != nil {
		w.fail("driver: %v", err)
		return
	}
	epoch, sm := sn.epoch, sn.sm
	sn.n.Propose(node.MetaGroup, data, func(r node.ProposeResult) {
		if sn.epoch != epoch || done == nil {
			return
		}
		if r.Err != nil {
			done(replica.Outcome{}, r.Err)
			return
		}
		out, ok := sm.Take(node.MetaGroup, r.Index)
		if !ok {
			w.fail("node %d has no outcome for entry %d of the meta group", sn.id, r.Index)
			return
		}
		done(out, nil)
	})
}

// deadNodes are the nodes some up replica has applied a dead fact of:
// committed dead (no fact is taken back in a driver run).
func (w *World) deadNodes() map[uint64]bool {
	dead := map[uint64]bool{}
	for _, sn := range w.upNodes() {
		for _, f := range sn.sm.LivenessFacts() {
			if f.State == replica.LivenessDead {
				dead[f.Node] = true
			}
		}
	}
	return dead
}

// checkChange fails the run if a change the driver made left its group
// without a quorum of voters not committed dead, when the group had one
// before it.
func (w *World) checkChange(d replica.Decision, before []uint64, after *pb.ConfState) {
	dead := w.deadNodes()
	quorate := func(voters []uint64) bool {
		return len(voters) > 0 && countLive(voters, dead) >= len(voters)/2+1
	}
	if quorate(before) && !quorate(after.GetVoters()) {
		w.fail("driver: decision %d (%s node %d, replaces %d) on group %d took voters %v to %v: %d of them live, no quorum, though only %d had failed",
			d.ID, d.Op, d.Node, d.Replaces, d.Group, before, after.GetVoters(), countLive(after.GetVoters(), dead), len(before)-countLive(before, dead))
	}
}

func countLive(voters []uint64, dead map[uint64]bool) int {
	n := 0
	for _, v := range voters {
		if !dead[v] {
			n++
		}
	}
	return n
}

// The operator's requests in a driver run.
const (
	opAdd = iota
	opMarkDead
	opDrain
)

// driverFault is the chaos's placement fault on a driver run: the next
// operator's request not made yet.
func (w *World) driverFault(pick *simNode) {
	for _, op := range []int{opAdd, opMarkDead, opDrain} {
		if w.operator(op, pick) {
			return
		}
	}
}

// operatorAt makes an operator's request at a random instant of the
// faults, asking again every 100 ms until it is made or the faults end.
func (w *World) operatorAt(op int) {
	var try func()
	try = func() {
		if w.now >= int64(w.opt.Chaos) {
			return
		}
		if !w.operator(op, w.nodes[w.rng.IntN(len(w.nodes))]) {
			w.after(100*time.Millisecond, try)
		}
	}
	w.after(time.Duration(500+w.rng.IntN(int(w.opt.Chaos/time.Millisecond)-500))*time.Millisecond, try)
}

// operator makes one operator's request through the meta group's
// leader, and reports whether it did (or had): a node joins as a member;
// a node is killed, if up, and marked dead; a live one is drained. Each
// once a run, and a node is marked dead or drained only when the rest can
// hold what the groups want and it is no group's last voter, as the
// node's own checks refuse otherwise.
func (w *World) operator(op int, pick *simNode) bool {
	d := w.metaLeader()
	if d == nil || d.sm.Policy().Replicas == 0 {
		return false
	}
	have := d.sm.Members()
	pol := d.sm.Policy()
	nodes := replica.PlacementNodes(have, pol, d.sm.Liveness)
	_, constraints := d.sm.Constraints()
	var cons []placement.Constraint
	for _, c := range constraints {
		cons = append(cons, c)
	}
	fits := func(id uint64) bool {
		for _, conf := range pol.Groups {
			if len(conf.Voters) == 1 && conf.Voters[0] == id {
				return false
			}
		}
		return placement.CheckDrain(nodes, id, pol.Replicas, cons) == nil
	}
	switch op {
	case opAdd:
		for _, sn := range w.nodes {
			if !slices.ContainsFunc(have, func(m replica.Member) bool { return m.ID == sn.id }) {
				w.addMember(d, sn.id)
				w.stats.Added++
			}
		}
		return true
	case opMarkDead:
		if w.drv.marked != 0 {
			return true
		}
		if pick == d || pick.id == w.drv.drained || !fits(pick.id) {
			return false
		}
		// The operator kills it, then marks it dead; it comes back later
		// (readmit).
		w.crash(pick)
		w.after(time.Duration(300+w.rng.IntN(1500))*time.Millisecond, func() { w.restart(pick) })
		var inc uint64
		if f, ok := d.sm.Liveness(pick.id); ok {
			inc = f.Incarnation
		}
		fact := replica.LivenessFact{Node: pick.id, Incarnation: inc, State: replica.LivenessDead, Source: replica.LivenessOperator, Reason: "marked dead by an operator"}
		w.drv.marked, w.drv.markedEpoch = pick.id, pick.epoch
		w.mix(34, pick.id)
		w.stats.MarkedDead++
		w.commitOperatorFact(fact)
		return true
	case opDrain:
		if w.drv.drained != 0 {
			return true
		}
		if !pick.up || pick.id == w.drv.marked || !fits(pick.id) {
			return false
		}
		w.drv.drained = pick.id
		w.mix(35, pick.id)
		w.stats.Drained++
		w.drain(pick.id)
		return true
	}
	return false
}

// drain marks a node draining through the meta group's leader until the
// meta group answers (a drain asked again answers as the first).
func (w *World) drain(id uint64) {
	d := w.metaLeader()
	if d == nil {
		w.after(100*time.Millisecond, func() { w.drain(id) })
		return
	}
	w.proposeMeta(d, replica.MetaCommand{Op: replica.OpDrain, ID: id}, func(out replica.Outcome, err error) {
		if err != nil {
			w.after(100*time.Millisecond, func() { w.drain(id) })
		}
	})
}

// commitOperatorFact proposes a liveness fact through the meta group's leader
// until the meta group answers it: a proposal whose outcome was lost may
// have committed, and the same fact again is answered as the first.
func (w *World) commitOperatorFact(f replica.LivenessFact) {
	d := w.metaLeader()
	if d == nil {
		w.after(100*time.Millisecond, func() { w.commitOperatorFact(f) })
		return
	}
	w.proposeMeta(d, replica.MetaCommand{Op: replica.OpLiveness, Liveness: &f}, func(out replica.Outcome, err error) {
		if err != nil {
			w.after(100*time.Millisecond, func() { w.commitOperatorFact(f) })
		}
	})
}

// readmit commits alive, at a higher incarnation, a node marked dead
// that has restarted since, as the failure detector does when it hears
// from it (its start raises its incarnation): it is then placed like a
// new node, caught up as a learner before it votes. Until then it may
// still lead a group it was a voter of, with a stale meta replica (taken
// out of the meta group as dead), so the driver cannot move that group.
func (w *World) readmit(d *simNode) {
	id := w.drv.marked
	if id == 0 || !w.nodes[id-1].up || w.nodes[id-1].epoch == w.drv.markedEpoch || w.drv.readmitting {
		return
	}
	f, ok := d.sm.Liveness(id)
	if !ok || f.State != replica.LivenessDead {
		return
	}
	w.drv.readmitting = true
	w.mix(36, id)
	alive := replica.LivenessFact{Node: id, Incarnation: f.Incarnation + 1, State: replica.LivenessAlive, Source: replica.LivenessDetector, Reason: "answered at a higher incarnation"}
	w.proposeMeta(d, replica.MetaCommand{Op: replica.OpLiveness, Liveness: &alive}, func(replica.Outcome, error) { w.drv.readmitting = false })
}

// checkDriver is the end's check of a driver run, as the meta group's
// leader has applied the meta group: every node a member; every group at
// its goal, its voters on live undrained members, no learner left in a
// data group; no decision in flight; and each group's configuration as
// the meta group records it the same as the group's leader has it.
func (w *World) checkDriver() error {
	d := w.metaLeader()
	if d == nil {
		return fmt.Errorf("driver: no meta group leader at the end")
	}
	members := d.sm.Members()
	if len(members) != len(w.nodes) {
		return fmt.Errorf("driver: %d members at the end, %d nodes", len(members), len(w.nodes))
	}
	pol := d.sm.Policy()
	nodes := replica.PlacementNodes(members, pol, d.sm.Liveness)
	_, constraints := d.sm.Constraints()
	for _, dec := range pol.Decisions {
		if dec.State == replica.DecisionInFlight {
			var sts []node.GroupStatus
			for _, sn := range w.nodes {
				sts = append(sts, sn.n.Status()[slices.Index(w.groups, dec.Group)])
			}
			return fmt.Errorf("driver: decision %d (%s node %d, replaces %d, on group %d at epoch %d) is still in flight at the end; the meta group records the group at %+v; its replicas: %+v", dec.ID, dec.Op, dec.Node, dec.Replaces, dec.Group, dec.Epoch, pol.Groups[dec.Group], sts)
		}
	}
	for i, g := range w.groups {
		var st node.GroupStatus
		for _, sn := range w.nodes {
			if s := sn.n.Status()[i]; s.Leader == sn.id && s.State == raft.StateLeader {
				st = s
			}
		}
		if st.Leader == 0 {
			return fmt.Errorf("driver: group %d has no leader at the end", g)
		}
		rec, ok := pol.Groups[g]
		if !ok || !slices.Equal(sorted(rec.Voters), sorted(st.Voters)) || !slices.Equal(sorted(rec.Learners), sorted(st.Learners)) {
			return fmt.Errorf("driver: the meta group records group %d at voters %v, learners %v (recorded %v); the group's configuration is voters %v, learners %v",
				g, rec.Voters, rec.Learners, ok, st.Voters, st.Learners)
		}
		pg := placement.Group{ID: g, Meta: g == node.MetaGroup, Voters: st.Voters, Constraint: constraints[g]}
		goal := placement.Goal(nodes, pg, pol.Replicas)
		if len(st.Voters) != goal || len(st.Leaving) > 0 {
			return fmt.Errorf("driver: group %d ends with voters %v (leaving %v), learners %v: its goal is %d", g, st.Voters, st.Leaving, st.Learners, goal)
		}
		for _, v := range st.Voters {
			i := slices.IndexFunc(nodes, func(n placement.Node) bool { return n.ID == v })
			if i < 0 || nodes[i].Dead || nodes[i].Draining {
				return fmt.Errorf("driver: group %d ends with voter %d, which is not a live undrained member: %v", g, v, st.Voters)
			}
		}
		if g != node.MetaGroup && len(st.Learners) > 0 {
			return fmt.Errorf("driver: group %d ends with learners %v", g, st.Learners)
		}
	}
	return nil
}

func sorted(ids []uint64) []uint64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}
