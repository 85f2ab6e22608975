package cluster

// The placement driver. Once the meta group records a replication factor,
// each group's leader places its group by the pure rule
// (placement.Next) over committed facts only: the members and their
// labels, the drains, the groups' configurations as the meta group
// records them (each node's load), and the factor. It commits each
// decision to the meta group (placement.decide) before it acts, carries
// it out as one raft configuration change of its group, then commits the
// decision's end and the group's new configuration and placement epoch.
// The meta group refuses a second decision for a group while one is in
// flight, so there is one change per group at a time, whoever leads it. A
// new leader of a group that finds its predecessor's decision in flight
// ends it: done if the group's configuration shows the change made,
// abandoned otherwise; the rule then decides afresh from the facts.

import (
	"context"
	"encoding/json"
	"fmt"
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
)

// placementNodes are the members as placement sees them
// (replica.PlacementNodes).
func placementNodes(members []replica.Member, pol replica.Policy, liveness func(uint64) (replica.LivenessFact, bool)) []placement.Node {
	return replica.PlacementNodes(members, pol, liveness)
}

// drive is the placement driver's pass over the groups this node leads,
// from the loop: it starts at most one decision per group, each carried
// out on its own goroutine, which reports the group on done.
func (c *Node) drive(ctx context.Context, n *node.MultiRaft, sts []node.GroupStatus, members []replica.Member, pol replica.Policy, pending map[uint64]bool, done chan<- uint64) {
	nodes := placementNodes(members, pol, c.sm.Liveness)
	_, constraints := c.sm.Constraints()
	flying := 0
	toward := map[uint64]int{}
	for _, d := range pol.Decisions {
		if d.State == replica.DecisionInFlight {
			flying++
			if d.Op == placement.AddLearner {
				toward[d.Node]++
			}
		}
	}
	me := c.cfg.NodeID
	for _, st := range sts {
		if pending[st.Group] {
			continue
		}
		commit, match, leading := n.Progress(st.Group)
		if !leading {
			continue
		}
		conf := replica.GroupConf{Voters: slices.Clone(st.Voters), Learners: slices.Clone(st.Learners), Leader: me}
		rec, recorded := pol.Groups[st.Group]
		conf.Epoch = rec.Epoch
		if d, ok := pol.InFlight(st.Group); ok {
			// A decision this node is not carrying out: its maker lost
			// the group or stopped.
			pending[st.Group] = true
			go c.endInherited(ctx, d, conf, done)
			continue
		}
		if !recorded || !sameConf(rec, conf) || rec.Leader != me {
			// The meta group names each group's leader to the nodes that
			// do not hold it: a new leader records itself.
			pending[st.Group] = true
			go c.recordConf(ctx, st.Group, conf, done)
			continue
		}
		g := placement.Group{ID: st.Group, Meta: st.Group == node.MetaGroup, Voters: st.Voters, Learners: st.Learners, Constraint: constraints[st.Group], Bytes: rec.Bytes}
		for _, l := range st.Learners {
			if match[l] >= commit {
				g.CaughtUp = append(g.CaughtUp, l)
			}
		}
		plan := placement.Next(nodes, g, pol.Replicas)
		ch := plan.Change
		switch {
		case ch == nil:
			continue
		case ch.Optional && flying > 0:
			continue // a spread or load move waits for a quiet cluster
		case ch.Op == placement.AddLearner && toward[ch.Node] >= SnapshotsPerNodeMax:
			continue
		case (ch.Op == placement.Remove || ch.Op == placement.Demote) && ch.Node == me:
			// A leader does not take itself out: it hands the group to a
			// caught-up voter, which then decides.
			for _, v := range st.Voters {
				if v != me && match[v] >= commit {
					n.TransferLeader(st.Group, v)
					break
				}
			}
			continue
		}
		flying++
		if ch.Op == placement.AddLearner {
			toward[ch.Node]++
		}
		pending[st.Group] = true
		d := replica.Decision{Group: st.Group, Op: ch.Op, Node: ch.Node, Reason: ch.Reason, Epoch: conf.Epoch, By: me, Term: st.Term}
		go c.carryOut(ctx, d, conf, done)
	}
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

// carryOut commits the decision, makes its configuration change through
// the group's raft, and commits its end and the group's configuration.
func (c *Node) carryOut(ctx context.Context, d replica.Decision, conf replica.GroupConf, done chan<- uint64) {
	defer func() { done <- d.Group }()
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
	after.Voters, after.Learners, after.Epoch = r.Conf.GetVoters(), r.Conf.GetLearners(), r.Index
	c.endDecision(ctx, d, replica.DecisionDone, "", &after)
}

// endInherited ends a decision in flight this node did not make (or made
// before it restarted): done if the group's configuration shows its
// change, else abandoned.
func (c *Node) endInherited(ctx context.Context, d replica.Decision, conf replica.GroupConf, done chan<- uint64) {
	defer func() { done <- d.Group }()
	ctx, cancel := context.WithTimeout(ctx, driveTimeout)
	defer cancel()
	if made(d, conf) {
		c.endDecision(ctx, d, replica.DecisionDone, "", nil)
		return
	}
	c.endDecision(ctx, d, replica.DecisionAbandoned, fmt.Sprintf("node %d, leading the group now, did not find the change made; it decides again", c.cfg.NodeID), nil)
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
// group no decision changed yet, or changed by a remove-node).
func (c *Node) recordConf(ctx context.Context, group uint64, conf replica.GroupConf, done chan<- uint64) {
	defer func() { done <- group }()
	ctx, cancel := context.WithTimeout(ctx, driveTimeout)
	defer cancel()
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
