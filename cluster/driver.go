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
// and the log; promote it once it has caught up, by ConfChangeV2; remove
// the voter it replaces), then commits the decision's end and the group's
// new configuration and placement epoch. A leader asked to remove itself
// hands the group to a caught-up voter, which carries it out. A group's
// new leader carries out a decision its predecessor did not finish (done
// at once if the configuration shows it made). A new meta leader resumes
// the decisions it inherits (the groups' leaders carry them out) and
// abandons those the group's configuration has moved past, or that stay
// in flight beyond abandonAfter.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
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
// goroutine: when it first saw each decision in flight, when it last
// measured each group's bytes.
type driverState struct {
	seen    map[uint64]time.Time // decision → first seen in flight
	bytesAt map[uint64]time.Time // group → last measured
}

func newDriverState() *driverState {
	return &driverState{seen: map[uint64]time.Time{}, bytesAt: map[uint64]time.Time{}}
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
		rec, recorded := pol.Groups[st.Group]
		conf := replica.GroupConf{Voters: slices.Clone(st.Voters), Learners: slices.Clone(st.Learners), Leader: me, Epoch: rec.Epoch, Bytes: rec.Bytes}
		for _, l := range st.Learners {
			if match[l] >= commit {
				conf.CaughtUp = append(conf.CaughtUp, l)
			}
		}
		if d, ok := pol.InFlight(st.Group); ok {
			if (d.Op == placement.Remove || d.Op == placement.Demote) && d.Node == me && !made(d, conf) {
				// A leader does not take itself out: it hands the group
				// to a caught-up voter, which carries the decision out.
				for _, v := range st.Voters {
					if v != me && match[v] >= commit {
						n.TransferLeader(st.Group, v)
						break
					}
				}
				continue
			}
			pending[st.Group] = true
			go c.carryOut(ctx, d, conf, rec, done)
			continue
		}
		measure := st.Group != node.MetaGroup && time.Since(ds.bytesAt[st.Group]) >= bytesEvery
		if measure {
			ds.bytesAt[st.Group] = time.Now()
		}
		if measure || confChanged(rec, recorded, conf) {
			// The meta group names each group's leader to the nodes that
			// do not hold it, and gives the driver its facts.
			pending[st.Group] = true
			go c.recordConf(ctx, st.Group, conf, rec, recorded, measure, done)
		}
	}
	if _, _, leadingMeta := n.Progress(node.MetaGroup); leadingMeta {
		c.decide(ctx, members, pol, ds, pending, done)
	} else {
		clear(ds.seen)
	}
}

// confChanged reports whether a group's configuration as its leader sees
// it differs from the one recorded: its voters, learners, leader or
// learners caught up.
func confChanged(rec replica.GroupConf, recorded bool, conf replica.GroupConf) bool {
	return !recorded || !sameConf(rec, conf) || rec.Leader != conf.Leader || !slices.Equal(sorted(rec.CaughtUp), sorted(conf.CaughtUp))
}

// decide is the meta leader's part: end or abandon the decisions in
// flight that the groups' configurations have overtaken, and commit the
// next decision of each group with none in flight.
func (c *Node) decide(ctx context.Context, members []replica.Member, pol replica.Policy, ds *driverState, pending map[uint64]bool, done chan<- uint64) {
	nodes := placementNodes(members, pol, c.sm.Liveness)
	_, constraints := c.sm.Constraints()
	flying := 0
	toward := map[uint64]int{}
	now := time.Now()
	for _, d := range pol.Decisions {
		if d.State != replica.DecisionInFlight {
			delete(ds.seen, d.ID)
			continue
		}
		flying++
		if d.Op == placement.AddLearner {
			toward[d.Node]++
		}
		if _, ok := ds.seen[d.ID]; !ok {
			ds.seen[d.ID] = now
		}
		key := d.Group + decideKey
		if pending[key] {
			continue
		}
		rec := pol.Groups[d.Group]
		why := ""
		switch {
		case made(d, rec):
			pending[key] = true
			go c.endAsync(ctx, d, replica.DecisionDone, "", key, done)
			continue
		case rec.Epoch > d.Epoch:
			why = fmt.Sprintf("the group's configuration moved to epoch %d without it (decided at %d); the driver decides again", rec.Epoch, d.Epoch)
		case now.Sub(ds.seen[d.ID]) > abandonAfter:
			why = fmt.Sprintf("in flight for more than %v under meta leader %d; the driver decides again", abandonAfter, c.cfg.NodeID)
		default:
			continue // resumed: the group's leader carries it out
		}
		pending[key] = true
		go c.endAsync(ctx, d, replica.DecisionAbandoned, why, key, done)
	}
	me := c.cfg.NodeID
	for _, group := range slices.Sorted(maps.Keys(pol.Groups)) {
		key := group + decideKey
		if _, ok := pol.InFlight(group); ok || pending[key] {
			continue
		}
		rec := pol.Groups[group]
		g := placement.Group{ID: group, Meta: group == node.MetaGroup, Voters: rec.Voters, Learners: rec.Learners, CaughtUp: rec.CaughtUp, Constraint: constraints[group], Bytes: rec.Bytes}
		ch := placement.Next(nodes, g, pol.Replicas).Change
		switch {
		case ch == nil:
			continue
		case ch.Optional && flying > 0:
			continue // a spread or load move waits for a quiet cluster
		case ch.Op == placement.AddLearner && toward[ch.Node] >= SnapshotsPerNodeMax:
			continue
		}
		flying++
		if ch.Op == placement.AddLearner {
			toward[ch.Node]++
		}
		pending[key] = true
		d := replica.Decision{Group: group, Op: ch.Op, Node: ch.Node, Reason: ch.Reason, Epoch: rec.Epoch, By: me}
		go c.commitDecision(ctx, d, key, done)
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
	c.log.Info("placement: decided", "decision", d.ID, "group", d.Group, "op", d.Op, "node", d.Node, "reason", d.Reason)
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
// the group's raft, as its leader, and commits its end and the group's
// configuration. A decision the group has already made is done at once;
// one made at an epoch the group has moved past is abandoned.
func (c *Node) carryOut(ctx context.Context, d replica.Decision, conf, rec replica.GroupConf, done chan<- uint64) {
	defer func() { done <- d.Group }()
	ctx, cancel := context.WithTimeout(ctx, driveTimeout)
	defer cancel()
	switch {
	case made(d, conf):
		c.endDecision(ctx, d, replica.DecisionDone, "", nil)
		return
	case rec.Epoch > d.Epoch:
		c.endDecision(ctx, d, replica.DecisionAbandoned, fmt.Sprintf("the group's configuration moved to epoch %d without it (decided at %d)", rec.Epoch, d.Epoch), nil)
		return
	case d.Op == placement.Promote && !slices.Contains(conf.Learners, d.Node), d.Op == placement.Demote && !slices.Contains(conf.Voters, d.Node):
		// Decided on a recorded configuration the group has left (a
		// promotion of a learner since removed would add a voter that
		// never caught up).
		c.endDecision(ctx, d, replica.DecisionAbandoned, fmt.Sprintf("node %d is not a %s of the group now", d.Node, map[bool]string{true: "learner", false: "voter"}[d.Op == placement.Promote]), nil)
		return
	}
	res := make(chan node.ConfResult, 1)
	if err := c.do(ctx, func(n *node.MultiRaft) {
		n.ProposeConfChange(d.Group, confChange(d.Op, d.Node), func(r node.ConfResult) { res <- r })
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
	after := conf
	after.Voters, after.Learners, after.Epoch, after.CaughtUp = r.Conf.GetVoters(), r.Conf.GetLearners(), r.Index, nil
	c.endDecision(ctx, d, replica.DecisionDone, "", &after)
}

// made reports whether a configuration shows a decision's change.
func made(d replica.Decision, conf replica.GroupConf) bool {
	voter, learner := slices.Contains(conf.Voters, d.Node), slices.Contains(conf.Learners, d.Node)
	switch d.Op {
	case placement.AddLearner:
		return voter || learner
	case placement.Promote:
		return voter
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
