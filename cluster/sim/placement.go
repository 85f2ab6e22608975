package sim

// The placement rule under faults. On a run with Options.Placement the
// membership changes are placement's (placement.Next, the rule the
// placement driver runs): each group's leader takes the one change its
// group needs toward the replication factor (Options.Voters), over zones
// (node id mod 3); among the faults a node that is down is marked dead
// (committed dead: its replicas are replaced) and a live node drained (its
// replicas move off it). The placer keeps stepping once the faults stop,
// and the run ends with every group at its goal, on no dead or drained
// node. A node the rule took out of a group may be placed in it again (it
// rejoins as a learner over the log or the snapshot it has). On the
// driver's runs (Options.Driver) the real placement driver makes the
// changes instead (driver.go); this placer runs the liveness runs.

import (
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster/node"
	"tally/cluster/placement"
)

// placeEvery bounds the pause between two steps of the placer.
const placeEvery = 150 * time.Millisecond

// placementNodes are the nodes as placement sees them: zones by id, the
// marks, and each node's replicas as the leaders the placer asked report.
func (w *World) placementNodes() []placement.Node {
	out := make([]placement.Node, len(w.nodes))
	for i, sn := range w.nodes {
		out[i] = placement.Node{ID: sn.id, Zone: fmt.Sprintf("z%d", sn.id%3), Dead: w.dead[sn.id], Draining: w.draining[sn.id], Replicas: w.replicas[sn.id]}
	}
	return out
}

// placeStep has the leader of one group, if it is up, take the change
// placement.Next gives it, and schedules the next step.
func (w *World) placeStep() {
	defer w.after(time.Duration(50+w.rng.IntN(int(placeEvery/time.Millisecond)))*time.Millisecond, w.placeStep)
	g := w.groups[w.rng.IntN(len(w.groups))]
	for _, sn := range w.upNodes() {
		commit, match, leading := sn.n.Progress(g)
		if !leading {
			continue
		}
		st := sn.n.Status()[slices.Index(w.groups, g)]
		pg := placement.Group{ID: g, Meta: g == node.MetaGroup, Voters: st.Voters, Learners: st.Learners}
		for _, l := range st.Learners {
			if match[l] >= commit {
				pg.CaughtUp = append(pg.CaughtUp, l)
			}
		}
		w.countReplicas(sn)
		if w.live != nil {
			w.liveNodes(sn)
		}
		ch := placement.Next(w.placementNodes(), pg, w.opt.Voters).Change
		if ch != nil && w.live != nil {
			w.liveChange(sn, ch)
		}
		if ch != nil && ch.Op == placement.Replace {
			// This placer (the liveness runs') promotes, and removes the
			// replaced voter at a later step, as before the joint change
			// existed: the driver's runs make the joint change (driver.go).
			c := *ch
			c.Op, c.Replaces = placement.Promote, 0
			ch = &c
		}
		if ch == nil || ch.Node == sn.id && (ch.Op == placement.Remove || ch.Op == placement.Demote) {
			if ch != nil {
				// The leader does not take itself out: it hands over.
				for _, v := range st.Voters {
					if v != sn.id && match[v] >= commit {
						sn.n.TransferLeader(g, v)
						break
					}
				}
			}
			return
		}
		t := pb.ConfChangeType_ConfChangeRemoveNode
		switch ch.Op {
		case placement.AddLearner, placement.Demote:
			t = pb.ConfChangeType_ConfChangeAddLearnerNode
		case placement.Promote:
			t = pb.ConfChangeType_ConfChangeAddNode
		}
		w.mix(12, g, uint64(t), ch.Node)
		id := ch.Node
		sn.n.ProposeConfChange(g, &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: t.Enum(), NodeId: new(id)}}}, func(r node.ConfResult) {
			if r.Err != nil {
				return
			}
			w.stats.Membership++
			w.stats.Decisions++
			w.confs[g] = r.Conf
		})
		return
	}
}

// countReplicas counts each node's replicas over the groups as sn sees
// them.
func (w *World) countReplicas(sn *simNode) {
	clear(w.replicas)
	for _, st := range sn.n.Status() {
		if st.Group == node.MetaGroup {
			continue
		}
		for _, id := range append(slices.Clone(st.Voters), st.Learners...) {
			w.replicas[id]++
		}
	}
}

// markOrDrain is a placement fault: a node that is down marked dead, or a
// live one drained, once each per run, when the rest can hold what the
// groups want.
func (w *World) markOrDrain(pick *simNode) {
	if w.opt.Driver {
		w.driverFault(pick)
		return
	}
	nodes := w.placementNodes()
	if len(w.dead) == 0 && w.live == nil {
		for _, sn := range w.nodes {
			if !sn.up && !w.draining[sn.id] && placement.CheckDrain(nodes, sn.id, w.opt.Voters, nil) == nil {
				w.mix(13, sn.id)
				w.dead[sn.id] = true
				w.stats.MarkedDead++
				return
			}
		}
	}
	if pick.up && len(w.draining) == 0 && !w.dead[pick.id] && placement.CheckDrain(nodes, pick.id, w.opt.Voters, nil) == nil {
		w.mix(14, pick.id)
		w.draining[pick.id] = true
		w.stats.Drained++
	}
}

// checkGoals is the end's check of a placement run: every group at its
// goal's voters, none of them on a dead or drained node, no learner of a
// data group left.
func (w *World) checkGoals(members map[uint64][]*simNode) error {
	if w.opt.Driver {
		return w.checkDriver()
	}
	if w.live != nil {
		if err := w.checkLive(); err != nil {
			return err
		}
		w.liveNodes(w.metaLeader())
	}
	nodes := w.placementNodes()
	for _, g := range w.groups {
		var st node.GroupStatus
		for _, sn := range w.nodes {
			for _, s := range sn.n.Status() {
				if s.Group == g && s.Leader == sn.id {
					st = s
				}
			}
		}
		if st.Leader == 0 {
			return fmt.Errorf("group %d has no leader at the end", g)
		}
		pg := placement.Group{ID: g, Meta: g == node.MetaGroup, Voters: st.Voters}
		goal := placement.Goal(nodes, pg, w.opt.Voters)
		if len(st.Voters) != goal {
			return fmt.Errorf("group %d ends with voters %v, learners %v: its goal is %d", g, st.Voters, st.Learners, goal)
		}
		for _, v := range st.Voters {
			if w.dead[v] || w.draining[v] {
				return fmt.Errorf("group %d ends with voter %d, which is dead or draining: %v", g, v, st.Voters)
			}
		}
		if g != node.MetaGroup && len(st.Learners) > 0 {
			return fmt.Errorf("group %d ends with learners %v", g, st.Learners)
		}
	}
	return nil
}

// placedHere is the sim's cluster.placedHere: on a placement run a node
// the placer's last change left out of a group refuses the group's
// requests at once, as a node does from the configuration the meta group
// records, instead of waiting on a raft that may never learn it was taken
// out (it was down then).
func (w *World) placedHere(g uint64, id uint64) bool {
	// The group's leader knows its configuration best: a change the placer
	// proposed may have committed though its proposer never heard so.
	for _, sn := range w.upNodes() {
		for _, st := range sn.n.Status() {
			if st.Group == g && st.State == raft.StateLeader {
				return slices.Contains(st.Voters, id) || slices.Contains(st.Learners, id)
			}
		}
	}
	conf, ok := w.confs[g]
	return !ok || slices.Contains(conf.GetVoters(), id) || slices.Contains(conf.GetLearners(), id)
}
