package cluster

// What the placement is: each group's voters and learners with their
// labels, its goal, its placement epoch, its decision in flight, what it
// survives and why it is short of its goal; the cluster's weakest
// tolerance; the recent decisions. Served in the status document
// (Status.Placement): tally cluster groups, status and decisions.

import (
	"fmt"
	"slices"

	"tally/cluster/node"
	"tally/cluster/placement"
	"tally/cluster/replica"
)

// NodeRef is a node with its labels.
type NodeRef struct {
	ID     uint64 `json:"id"`
	Zone   string `json:"zone,omitempty"`
	Region string `json:"region,omitempty"`
}

// GroupPlacement is one group's placement.
type GroupPlacement struct {
	Group    uint64    `json:"group"`
	Voters   []NodeRef `json:"voters"`
	Learners []NodeRef `json:"learners"`
	// Goal is the voters the group should have; Epoch its placement
	// epoch (the raft index of its last configuration change the driver
	// recorded; 0 before any).
	Goal  int    `json:"goal"`
	Epoch uint64 `json:"epoch"`
	// Recorded: the configuration is the one the group's leader recorded
	// in the meta group; otherwise it is this node's view of the group.
	Recorded bool              `json:"recorded"`
	InFlight *replica.Decision `json:"in_flight,omitempty"`
	// Short says why the group is short of its goal, or of what the
	// factor asks; empty when it is not. UnderGoal: fewer good voters than
	// its goal.
	Short     string              `json:"short,omitempty"`
	UnderGoal bool                `json:"under_goal"`
	Tolerance placement.Tolerance `json:"tolerance"`
	// Constraint is the group's effective constraint (its sessions' and
	// their tenants'), if any.
	Constraint *placement.Constraint `json:"constraint,omitempty"`
}

// PlacementStatus is the cluster's placement as this node has applied the
// meta group.
type PlacementStatus struct {
	// Replicas is the replication factor; 0 for a cluster made before it
	// existed, where every member is a voter until configured.
	Replicas int      `json:"replicas"`
	Draining []uint64 `json:"draining"`
	// Dead are the members committed dead.
	Dead []uint64 `json:"dead"`
	// Tolerance is the weakest group's, named.
	Tolerance string           `json:"tolerance"`
	Groups    []GroupPlacement `json:"groups"`
	// Short are the groups short of their goal, each with why.
	Short     []ShortGroup       `json:"short"`
	Decisions []replica.Decision `json:"decisions"`
}

// ShortGroup is a group short of its goal, and why.
type ShortGroup struct {
	Group uint64 `json:"group"`
	Why   string `json:"why"`
}

// placementStatus is the placement as this node has applied the meta
// group, with its own view (sts) of the groups no leader recorded yet.
func (c *Node) placementStatus(sts []node.GroupStatus) PlacementStatus {
	members, pol := c.sm.Members(), c.sm.Policy()
	out := PlacementStatus{Replicas: pol.Replicas, Draining: nonNil(pol.Draining), Dead: []uint64{}, Groups: c.groupPlacements(sts, members, pol), Short: []ShortGroup{}, Decisions: pol.Decisions}
	for _, m := range members {
		if f, ok := c.sm.Liveness(m.ID); ok && f.State == replica.LivenessDead {
			out.Dead = append(out.Dead, m.ID)
		}
	}
	if out.Decisions == nil {
		out.Decisions = []replica.Decision{}
	}
	var weakest *GroupPlacement
	for i, g := range out.Groups {
		if g.Short != "" {
			out.Short = append(out.Short, ShortGroup{Group: g.Group, Why: g.Short})
		}
		t, w := g.Tolerance, (*placement.Tolerance)(nil)
		if weakest != nil {
			w = &weakest.Tolerance
		}
		if w == nil || t.SurvivesNodes < w.SurvivesNodes || (t.SurvivesNodes == w.SurvivesNodes && t.SurvivesZones < w.SurvivesZones) {
			weakest = &out.Groups[i]
		}
	}
	if weakest != nil {
		out.Tolerance = fmt.Sprintf("group %d, the weakest: %s", weakest.Group, weakest.Tolerance.Summary)
	}
	return out
}

// groupReports are the groups' placements as this node sees them now.
func (c *Node) groupReports() []GroupPlacement {
	return c.groupPlacements(c.lastStatus(), c.sm.Members(), c.sm.Policy())
}

func (c *Node) groupPlacements(sts []node.GroupStatus, members []replica.Member, pol replica.Policy) []GroupPlacement {
	nodes := placementNodes(members, pol, c.sm.Liveness)
	_, constraints := c.sm.Constraints()
	byID := map[uint64]replica.Member{}
	for _, m := range members {
		byID[m.ID] = m
	}
	refs := func(ids []uint64) []NodeRef {
		out := make([]NodeRef, 0, len(ids))
		for _, id := range sorted(ids) {
			m := byID[id]
			out = append(out, NodeRef{ID: id, Zone: m.Zone, Region: m.Region})
		}
		return out
	}
	replicas := pol.Replicas
	if replicas == 0 {
		replicas = len(members) // before configure: every member a voter
	}
	var out []GroupPlacement
	for _, st := range sts {
		conf, recorded := pol.Groups[st.Group]
		if !recorded {
			conf = replica.GroupConf{Voters: st.Voters, Learners: st.Learners}
		}
		g := placement.Group{ID: st.Group, Meta: st.Group == node.MetaGroup, Voters: conf.Voters, Learners: conf.Learners, Constraint: constraints[st.Group], Bytes: conf.Bytes}
		plan := placement.Next(nodes, g, replicas)
		gp := GroupPlacement{Group: st.Group, Voters: refs(conf.Voters), Learners: refs(conf.Learners), Goal: plan.Goal, Epoch: conf.Epoch, Recorded: recorded,
			Short: plan.Short, UnderGoal: placement.GoodVoters(nodes, g) < plan.Goal, Tolerance: placement.Tolerate(nodes, conf.Voters)}
		if k, ok := constraints[st.Group]; ok {
			gp.Constraint = &k
		}
		if d, ok := pol.InFlight(st.Group); ok {
			gp.InFlight = &d
			if gp.Short == "" && slices.Contains([]placement.Op{placement.AddLearner, placement.Promote, placement.Replace}, d.Op) {
				gp.Short = fmt.Sprintf("a decision in flight: %s node %d (%s)", d.Op, d.Node, d.Reason)
			}
		}
		out = append(out, gp)
	}
	return out
}

// placedHere refuses a request of a data group whose recorded
// configuration does not hold this node: the group was placed elsewhere,
// and this node's raft may not have learnt it was taken out (it was down
// then), so a proposal or read here would wait for entries it never
// applies. The refusal names the recorded leader (proposalFailed).
func (c *Node) placedHere(group uint64) error {
	if group == node.MetaGroup {
		return nil // every member follows it
	}
	rec, ok := c.sm.Policy().Groups[group]
	if !ok || slices.Contains(rec.Voters, c.cfg.NodeID) || slices.Contains(rec.Learners, c.cfg.NodeID) {
		return nil
	}
	return fmt.Errorf("%w: group %d, node %d: the group is placed on nodes %v", node.ErrNotMember, group, c.cfg.NodeID, sorted(rec.Voters))
}
