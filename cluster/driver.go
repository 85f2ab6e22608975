package cluster

// The placement driver. Once the meta group records a replication factor,
// the meta group's leader places every group by the pure rule
// (placement.Next) over committed facts only: the members and their
// labels, their committed liveness, the drains, the constraints, and the
// groups' configurations as their leaders recorded them in the meta group
// (voters, learners, the learners caught up, the group's bytes: each
// node's load in replicas, bytes and leaderships). It commits each
// decision to the meta group (placement.decide) and does no more: the
// meta group refuses a second decision for a group while one is in
// flight, so there is one change per group at a time.
//
// Each group's leader carries out its group's committed decision: one raft
// configuration change (add a learner, which raft then sends a snapshot
// and the log; once it has caught up, promote it and remove the voter it
// replaces in one joint ConfChangeV2, placement.Replace), then commits the
// decision's end and the group's new configuration and placement epoch. A leader asked to remove itself
// hands the group to a caught-up voter, which carries it out. A group's
// new leader carries out a decision its predecessor did not finish (done
// at once if the configuration shows it made). A new meta leader resumes
// the decisions it inherits (the groups' leaders carry them out) and
// abandons those the group's configuration has moved past, or that stay
// in flight beyond abandonAfter.

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster/node"
	"tally/cluster/placement"
	"tally/cluster/replica"
)

// Named limits of the driver.
const (
	// SnapshotsPerNodeMax bounds the learners being added to one node at
	// once, across groups: each receives a snapshot.
	SnapshotsPerNodeMax = 2
	// driveTimeout bounds one decision's proposals (its record, its
	// configuration change, its end).
	driveTimeout = 30 * time.Second
	// abandonAfter is how long the meta leader lets a decision stay in
	// flight, as it has watched it, before it abandons it and decides
	// afresh.
	abandonAfter = 2 * driveTimeout
	// bytesEvery is how often a group's leader measures the group's size
	// on disk, and recordBytesChange the change (a fraction, and at
	// least recordBytesMin) it records in the meta group.
	bytesEvery        = 10 * time.Second
	recordBytesChange = 0.10
	recordBytesMin    = 1 << 20
	// decideKey marks, in the pass's pending set, a group the meta leader
	// is committing a decision for (or ending one of), beside the same
	// group's own work as its leader.
	decideKey = 1 << 62
)

// driverState is what the driver keeps between its passes, on the loop's
// goroutine: the meta leader's view of the decisions in flight, and when
// it last measured each group's bytes.
type driverState struct {
	*DriverState
	bytesAt map[uint64]time.Time // group → last measured
}

func newDriverState() *driverState {
	return &driverState{DriverState: NewDriverState(), bytesAt: map[uint64]time.Time{}}
}

// placementNodes are the members as placement sees them
// (replica.PlacementNodes).
func placementNodes(members []replica.Member, pol replica.Policy, liveness func(uint64) (replica.LivenessFact, bool)) []placement.Node {
	return replica.PlacementNodes(members, pol, liveness)
}

// drive is the placement driver's pass, from the loop: as the leader of
// each group, record its configuration and carry out its committed
// decision; as the meta group's leader, decide. Each proposal runs on its
// own goroutine, which reports its key (a group, or a group + decideKey)
// on done.
func (c *Node) drive(ctx context.Context, n *node.MultiRaft, sts []node.GroupStatus, members []replica.Member, pol replica.Policy, ds *driverState, pending map[uint64]bool, done chan<- uint64) {
	me := c.cfg.NodeID
	for _, st := range sts {
		if pending[st.Group] {
			continue
		}
		commit, match, leading := n.Progress(st.Group)
		if !leading {
			continue
		}
		w := LeaderStep(me, st, commit, match, pol)
		switch w.Kind {
		case LeaderTransfer:
			n.TransferLeader(st.Group, w.To)
			continue
		case LeaderCarryOut:
			pending[st.Group] = true
			go c.carryOut(ctx, w.Decision, w.Conf, w.Rec, done)
			continue
		case LeaderIdle:
			if len(st.Leaving) > 0 {
				continue
			}
			if _, flying := pol.InFlight(st.Group); flying {
				continue
			}
		}
		measure := st.Group != node.MetaGroup && time.Since(ds.bytesAt[st.Group]) >= bytesEvery
		if measure {
			ds.bytesAt[st.Group] = time.Now()
		}
		if measure || w.Kind == LeaderRecord {
			// The meta group names each group's leader to the nodes that
			// do not hold it, and gives the driver its facts.
			pending[st.Group] = true
			go c.recordConf(ctx, st.Group, w.Conf, w.Rec, w.Recorded, measure, done)
		}
	}
	if _, _, leadingMeta := n.Progress(node.MetaGroup); leadingMeta {
		c.decide(ctx, members, pol, ds, pending, done)
	} else {
		ds.Forget()
	}
}

// confChanged reports whether a group's configuration as its leader sees
// it differs from the one recorded: its voters, learners, leader or
// learners caught up.
func confChanged(rec replica.GroupConf, recorded bool, conf replica.GroupConf) bool {
	return !recorded || !sameConf(rec, conf) || rec.Leader != conf.Leader || !slices.Equal(sorted(rec.CaughtUp), sorted(conf.CaughtUp))
}

// decide is the meta leader's part (DecideStep): each decision to
// commit, or to end, proposed on its own goroutine.
func (c *Node) decide(ctx context.Context, members []replica.Member, pol replica.Policy, ds *driverState, pending map[uint64]bool, done chan<- uint64) {
	nodes := placementNodes(members, pol, c.sm.Liveness)
	_, constraints := c.sm.Constraints()
	for _, w := range DecideStep(c.cfg.NodeID, time.Now(), nodes, constraints, pol, ds.DriverState, pending) {
		if w.Cmd.Op == replica.OpDecide {
			go c.commitDecision(ctx, *w.Cmd.Decision, w.Key, done)
			continue
		}
		go c.endAsync(ctx, *w.Cmd.Decision, w.Cmd.Decision.State, w.Cmd.Decision.Error, w.Key, done)
	}
}

// commitDecision commits a decision to the meta group.
func (c *Node) commitDecision(ctx context.Context, d replica.Decision, key uint64, done chan<- uint64) {
	defer func() { done <- key }()
	ctx, cancel := context.WithTimeout(ctx, driveTimeout)
	defer cancel()
	out, err := c.proposeMeta(ctx, replica.MetaCommand{Op: replica.OpDecide, Decision: &d})
	if err != nil {
		c.log.Debug("placement: decision not recorded", "group", d.Group, "op", d.Op, "node", d.Node, "err", err)
		return
	}
	d, _ = out.Value.(replica.Decision)
	c.metrics.decisions.WithLabelValues("made").Inc()
	c.log.Info("placement: decided", "decision", d.ID, "group", d.Group, "op", d.Op, "node", d.Node, "replaces", d.Replaces, "reason", d.Reason)
}

// endAsync ends a decision from the meta leader.
func (c *Node) endAsync(ctx context.Context, d replica.Decision, state, why string, key uint64, done chan<- uint64) {
	defer func() { done <- key }()
	ctx, cancel := context.WithTimeout(ctx, driveTimeout)
	defer cancel()
	c.endDecision(ctx, d, state, why, nil)
}

// spreadLeaders hands one group this node leads to the voter
// placement.Leader names: a constrained group's leader inside its
// constraint, a draining node's leaderships elsewhere, and the leaders
// spread by count over the groups' recorded leaders. It reports whether
// it asked for a transfer.
func (c *Node) spreadLeaders(n *node.MultiRaft, sts []node.GroupStatus, members []replica.Member, pol replica.Policy, pending map[uint64]bool) bool {
	nodes := placementNodes(members, pol, c.sm.Liveness)
	_, constraints := c.sm.Constraints()
	for _, st := range sts {
		if _, flying := pol.InFlight(st.Group); st.Group == node.MetaGroup || pending[st.Group] || flying || len(st.Learners) > 0 {
			continue
		}
		commit, match, leading := n.Progress(st.Group)
		if !leading {
			continue
		}
		var caughtUp []uint64
		for _, v := range st.Voters {
			if match[v] >= commit {
				caughtUp = append(caughtUp, v)
			}
		}
		g := placement.Group{ID: st.Group, Voters: st.Voters, Constraint: constraints[st.Group]}
		if to, why := placement.Leader(nodes, g, c.cfg.NodeID, caughtUp); to != 0 {
			c.log.Info("placement: handing over leadership", "group", st.Group, "to", to, "why", why)
			n.TransferLeader(st.Group, to)
			return true
		}
	}
	return false
}

// sameConf reports whether a recorded configuration names the same
// voters and learners.
func sameConf(a, b replica.GroupConf) bool {
	return slices.Equal(sorted(a.Voters), sorted(b.Voters)) && slices.Equal(sorted(a.Learners), sorted(b.Learners))
}

func sorted(ids []uint64) []uint64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// carryOut makes a committed decision's configuration change through
// the group's raft, as its leader (CarryOutStep), and commits its end
// and the group's configuration. A decision the group has already made
// is done at once; one made at an epoch the group has moved past is
// abandoned.
func (c *Node) carryOut(ctx context.Context, d replica.Decision, conf, rec replica.GroupConf, done chan<- uint64) {
	defer func() { done <- d.Group }()
	ctx, cancel := context.WithTimeout(ctx, driveTimeout)
	defer cancel()
	cc, state, why := CarryOutStep(d, conf, rec)
	if cc == nil {
		c.endDecision(ctx, d, state, why, nil)
		return
	}
	res := make(chan node.ConfResult, 1)
	if err := c.do(ctx, func(n *node.MultiRaft) {
		n.ProposeConfChange(d.Group, cc, func(r node.ConfResult) { res <- r })
	}); err != nil {
		c.endDecision(ctx, d, replica.DecisionFailed, err.Error(), nil)
		return
	}
	var r node.ConfResult
	select {
	case r = <-res:
	case <-ctx.Done():
		c.endDecision(context.Background(), d, replica.DecisionFailed, "the configuration change did not complete in time", nil)
		return
	}
	if r.Err != nil {
		c.endDecision(ctx, d, replica.DecisionFailed, r.Err.Error(), nil)
		return
	}
	after := AfterChange(conf, r)
	c.endDecision(ctx, d, replica.DecisionDone, "", &after)
}

// takesOut is the voter a decision takes out of its group (removed,
// demoted, replaced), 0 if none: a leader hands the group over first.
func takesOut(d replica.Decision) uint64 {
	switch d.Op {
	case placement.Remove, placement.Demote:
		return d.Node
	case placement.Replace:
		return d.Replaces
	}
	return 0
}

// made reports whether a configuration shows a decision's change.
func made(d replica.Decision, conf replica.GroupConf) bool {
	voter, learner := slices.Contains(conf.Voters, d.Node), slices.Contains(conf.Learners, d.Node)
	switch d.Op {
	case placement.AddLearner:
		return voter || learner
	case placement.Promote:
		return voter
	case placement.Replace:
		return voter && !slices.Contains(conf.Voters, d.Replaces) && !slices.Contains(conf.Learners, d.Replaces)
	case placement.Demote:
		return learner
	}
	return !voter && !learner // placement.Remove
}

// endDecision commits a decision's end, and, when given, the group's
// configuration after it.
func (c *Node) endDecision(ctx context.Context, d replica.Decision, state, why string, after *replica.GroupConf) {
	if after != nil {
		if _, err := c.proposeMeta(ctx, replica.MetaCommand{Op: replica.OpGroupConf, Group: d.Group, GroupConf: after}); err != nil {
			c.log.Debug("placement: configuration not recorded", "group", d.Group, "err", err)
		}
	}
	end := replica.Decision{ID: d.ID, State: state, Error: why}
	if _, err := c.proposeMeta(ctx, replica.MetaCommand{Op: replica.OpDecided, Decision: &end}); err != nil {
		c.log.Debug("placement: decision's end not recorded", "decision", d.ID, "err", err)
		return
	}
	c.metrics.decisions.WithLabelValues(state).Inc()
	c.log.Info("placement: decision ended", "decision", d.ID, "group", d.Group, "state", state, "why", why)
}

// recordConf commits a group's configuration as its leader sees it (a
// group no decision changed yet, one changed by a remove-node, a new
// leader, learners caught up), and, when measure is set, the group's
// bytes on disk if they moved by more than recordBytesChange.
func (c *Node) recordConf(ctx context.Context, group uint64, conf, rec replica.GroupConf, recorded, measure bool, done chan<- uint64) {
	defer func() { done <- group }()
	ctx, cancel := context.WithTimeout(ctx, driveTimeout)
	defer cancel()
	changed := confChanged(rec, recorded, conf)
	if measure {
		if b, err := c.sm.GroupBytes(group); err == nil {
			diff := b - rec.Bytes
			if diff < 0 {
				diff = -diff
			}
			if diff >= recordBytesMin && float64(diff) >= recordBytesChange*float64(rec.Bytes) {
				conf.Bytes, changed = b, true
			}
		}
	}
	if !changed {
		return
	}
	if _, err := c.proposeMeta(ctx, replica.MetaCommand{Op: replica.OpGroupConf, Group: group, GroupConf: &conf}); err != nil {
		c.log.Debug("placement: configuration not recorded", "group", group, "err", err)
	}
}

// proposeMeta proposes a meta command stamped with this node's clock and
// returns its outcome, a refusal as the error.
func (c *Node) proposeMeta(ctx context.Context, cmd replica.MetaCommand) (replica.Outcome, error) {
	cmd.TS = time.Now().UnixNano()
	data, err := json.Marshal(cmd)
	if err != nil {
		return replica.Outcome{}, err
	}
	out, err := c.propose(ctx, node.MetaGroup, data)
	if err == nil {
		err = out.Err
	}
	return out, err
}

// decisionChange is a decision's raft configuration change: a replace
// is two changes in one ConfChangeV2, which raft makes through a joint
// configuration (the voters before and after each a quorum) and leaves
// by itself once applied.
func decisionChange(d replica.Decision) *pb.ConfChangeV2 {
	if d.Op != placement.Replace {
		return confChange(d.Op, d.Node)
	}
	add, remove := pb.ConfChangeType_ConfChangeAddNode, pb.ConfChangeType_ConfChangeRemoveNode
	return &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: &add, NodeId: &d.Node}, {Type: &remove, NodeId: &d.Replaces}}}
}

// confChange is a decision's raft configuration change.
func confChange(op placement.Op, id uint64) *pb.ConfChangeV2 {
	switch op {
	case placement.AddLearner, placement.Demote:
		return change(pb.ConfChangeType_ConfChangeAddLearnerNode, id)
	case placement.Promote:
		return change(pb.ConfChangeType_ConfChangeAddNode, id)
	}
	return change(pb.ConfChangeType_ConfChangeRemoveNode, id)
}

var descUnderGoal = prometheus.NewDesc("tally_cluster_groups_under_goal", "Groups with fewer voters on eligible nodes (live, not draining) than their placement goal, as this node has applied the meta group.", nil, nil)

// placementCollector reads the placement's state when scraped.
type placementCollector struct{ c *Node }

func (placementCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descUnderGoal }

func (k placementCollector) Collect(ch chan<- prometheus.Metric) {
	under := 0
	for _, r := range k.c.groupReports() {
		if r.UnderGoal {
			under++
		}
	}
	ch <- prometheus.MustNewConstMetric(descUnderGoal, prometheus.GaugeValue, float64(under))
}
