// Package placement decides where a group's replicas go: how many voters
// it should have (its goal), and the one membership change it needs next
// (add a learner, promote a learner, remove a replica), with the reason.
//
// It is pure: no clock, no I/O. Its inputs are committed facts (the
// members and their labels, their committed liveness, drains, the
// group's constraint) and each node's load as observed; its output is a
// value the placement driver commits and carries out. Every rule here is
// deterministic, so two drivers given the same facts decide the same.
//
// Order of preference when choosing nodes: the most distinct regions,
// then zones, then the least loaded node (replicas, then bytes), then the
// lowest id.
package placement

import (
	"fmt"
	"slices"
	"strings"
)

// Named limits of the rules.
const (
	// MetaVotersMax is the most voters the meta group gets: min(this,
	// eligible members), made odd.
	MetaVotersMax = 5
	// Band is how far above the mean (replicas or bytes per eligible node)
	// a node must be before the driver moves a replica off it: 10%.
	Band = 0.10
	// MoveGapMin is the least difference in replica counts between the
	// node a replica leaves and the node it goes to. With Band, it is the
	// hysteresis: every move strictly lowers the sum of squared counts (or,
	// at equal counts, of bytes), so no sequence of moves returns to where
	// it started.
	MoveGapMin = 2
)

// Node is one member as placement sees it.
type Node struct {
	ID     uint64
	Zone   string
	Region string
	// Dead: the meta group committed this node dead. Its replicas are
	// replaced; it receives none.
	Dead bool
	// Draining: an operator asked every replica off this node.
	Draining bool
	// Replicas is how many replicas (voters and learners, of every group)
	// the node holds; Bytes their size; Leaders the groups it leads.
	Replicas int
	Bytes    int64
	Leaders  int
}

// Constraint limits a group's voters to some regions or some zones
// (operator-declared labels). The zero Constraint admits every node.
type Constraint struct {
	Regions []string `json:"regions,omitempty"`
	Zones   []string `json:"zones,omitempty"`
}

// IsZero reports whether c admits every node.
func (c Constraint) IsZero() bool { return len(c.Regions) == 0 && len(c.Zones) == 0 }

// Admits reports whether a node may hold a voter under c.
func (c Constraint) Admits(n Node) bool {
	if len(c.Regions) > 0 && !slices.Contains(c.Regions, n.Region) {
		return false
	}
	return len(c.Zones) == 0 || slices.Contains(c.Zones, n.Zone)
}

// String is the constraint as the CLI takes it.
func (c Constraint) String() string {
	var parts []string
	if len(c.Regions) > 0 {
		parts = append(parts, "regions "+strings.Join(c.Regions, ","))
	}
	if len(c.Zones) > 0 {
		parts = append(parts, "zones "+strings.Join(c.Zones, ","))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " and ")
}

// Group is one raft group's configuration as its leader reports it.
type Group struct {
	ID   uint64
	Meta bool
	// Voters and Learners are the group's configuration.
	Voters   []uint64
	Learners []uint64
	// CaughtUp are the learners whose log matches the group's commit: only
	// they may be promoted.
	CaughtUp []uint64
	// Bytes is the group's size, moved with each replica.
	Bytes      int64
	Constraint Constraint
}

// Op is a membership change. Stored in the meta group's decisions: do
// not rename.
type Op string

const (
	AddLearner Op = "add-learner"
	Promote    Op = "promote"
	Remove     Op = "remove"
	// Demote makes a voter a learner: the meta group's members beyond its
	// voters keep following it as learners (every node needs the
	// directory, the tokens and the membership).
	Demote Op = "demote"
	// Replace promotes a caught-up learner (Node) and removes the voter it
	// replaces (Replaces) in one joint configuration change: the group
	// never counts the replaced voter, dead perhaps, in a quorum that the
	// new voter has joined, and one decision makes what two made.
	Replace Op = "replace"
)

// Change is the one change a group needs next.
type Change struct {
	Group uint64 `json:"group"`
	Op    Op     `json:"op"`
	Node  uint64 `json:"node"`
	// Replaces is the voter a Replace removes.
	Replaces uint64 `json:"replaces,omitempty"`
	Reason   string `json:"reason"`
	// Optional: a change for a wider spread or a better load, not for
	// the goal; the driver makes one only when no other is in flight.
	Optional bool `json:"optional,omitempty"`
}

// Plan is what a group needs.
type Plan struct {
	// Goal is the voters the group should have.
	Goal int
	// Change is the next change toward the goal (or toward a better
	// spread or load), nil if none is needed or possible now.
	Change *Change
	// Wait says why nothing is done now although a change is under way
	// (a learner catching up).
	Wait string
	// Short says why the group has fewer good voters than its goal wants
	// from the replication factor, or is less spread than it could be
	// with the members it has; empty when it is at its goal.
	Short string
}

// Goal is the voters a group wants: min(replicas, eligible members) for a
// data group, min(MetaVotersMax, eligible members) made odd for the meta
// group. Eligible members are live, not draining, and admitted by the
// group's constraint.
func Goal(nodes []Node, g Group, replicas int) int {
	n := len(eligible(nodes, g.Constraint))
	if g.Meta {
		n = min(n, MetaVotersMax)
		if n > 0 && n%2 == 0 {
			n--
		}
		return n
	}
	return min(n, replicas)
}

// GoodVoters counts the group's voters on eligible nodes: a group with
// fewer than its goal is under its goal.
func GoodVoters(nodes []Node, g Group) int {
	el := eligible(nodes, g.Constraint)
	return countFunc(g.Voters, func(v uint64) bool {
		return slices.ContainsFunc(el, func(n Node) bool { return n.ID == v })
	})
}

// Eligible lists the nodes that may receive a voter of a group under c.
func eligible(nodes []Node, c Constraint) []Node {
	var out []Node
	for _, n := range nodes {
		if !n.Dead && !n.Draining && c.Admits(n) {
			out = append(out, n)
		}
	}
	return out
}

// Next is the plan for one group: its goal and the next change.
//
// The order, each step taken only when the ones before it have nothing
// to do:
//  1. remove a learner that should not be there (not a member, dead,
//     draining, outside the constraint);
//  2. promote a caught-up learner on an eligible node, and when that
//     puts the group beyond its goal, remove in the same joint change
//     the voter step 4 would remove next (Replace);
//  3. wait for a learner still catching up;
//  4. remove a voter beyond the goal: one that should not be there
//     first, else the one whose loss keeps the widest spread and frees
//     the most loaded node; never one whose removal leaves fewer live
//     voters than a quorum of the voters left, and never the last;
//  5. add a learner on the best node when the good voters are fewer than
//     the goal (replacing a dead, drained or foreign voter this way
//     first, and removing it by step 4 once the new one is a voter);
//  6. add a learner that widens the spread (more regions, then zones);
//  7. add a learner that moves a replica off a node above the band of
//     the mean toward one at least MoveGapMin replicas below it.
//
// Steps 6 and 7 only add a learner whose promotion makes step 4 remove
// the voter it was meant to replace, so the plan never undoes itself.
func Next(nodes []Node, g Group, replicas int) Plan {
	byID := make(map[uint64]Node, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	p := Plan{Goal: Goal(nodes, g, replicas)}
	good := func(id uint64) bool {
		n, ok := byID[id]
		return ok && !n.Dead && !n.Draining && g.Constraint.Admits(n)
	}
	change := func(op Op, id uint64, reason string) Plan {
		p.Change = &Change{Group: g.ID, Op: op, Node: id, Reason: reason}
		return p
	}
	p.Short = short(nodes, g, replicas, p.Goal, good)
	if alive := countFunc(g.Voters, func(v uint64) bool { return live(byID, v) }); alive < len(g.Voters)/2+1 {
		// No change can commit: the group needs its voters back (or an
		// operator's recovery), not a plan.
		p.Wait = fmt.Sprintf("the group has lost its quorum: %d of %d voters live", alive, len(g.Voters))
		p.Short = p.Wait
		return p
	}

	// 1. Learners that should not be there (in the meta group, every
	// live member follows, draining or not).
	for _, l := range g.Learners {
		if g.Meta && live(byID, l) {
			continue
		}
		if !good(l) {
			return change(Remove, l, "learner "+unfit(byID, g.Constraint, l))
		}
	}
	goodVoters := countFunc(g.Voters, good)
	// 2. and 3. Learners on eligible nodes (in the meta group, only as
	// many as its goal wants).
	needed := !g.Meta || goodVoters < p.Goal
	for _, l := range g.Learners {
		if needed && good(l) && slices.Contains(g.CaughtUp, l) {
			why := fmt.Sprintf("learner on node %d caught up: %d good voters, goal %d", l, goodVoters, p.Goal)
			if v, ok := promoteReplacing(byID, g, l, p.Goal, good); ok {
				p = change(Replace, l, fmt.Sprintf("%s; replaces voter on node %d (%s)", why, v, removedWhy(byID, g, v, good)))
				p.Change.Replaces = v
				return p
			}
			return change(Promote, l, why)
		}
	}
	if waiting := slices.IndexFunc(g.Learners, good); needed && waiting >= 0 {
		p.Wait = fmt.Sprintf("learner on node %d is catching up", g.Learners[waiting])
		return p
	}
	// 4. Voters beyond the goal.
	if len(g.Voters) > max(p.Goal, 1) {
		if v, ok := removal(byID, g, good); ok {
			why := fmt.Sprintf("%d voters, goal %d", len(g.Voters), p.Goal)
			if !good(v) {
				why = unfit(byID, g.Constraint, v) + "; " + why
			}
			if g.Meta && live(byID, v) {
				return change(Demote, v, fmt.Sprintf("voter on node %d: %s; it follows as a learner", v, why))
			}
			return change(Remove, v, fmt.Sprintf("voter on node %d: %s", v, why))
		}
	}
	// 5. Too few good voters.
	if goodVoters < p.Goal {
		if g.Meta {
			// A learner that fits is promoted once caught up (step 2).
			for _, l := range g.Learners {
				if good(l) {
					p.Wait = fmt.Sprintf("learner on node %d is catching up", l)
					return p
				}
			}
		}
		if c, ok := best(nodes, byID, g, nil); ok {
			why := fmt.Sprintf("%d good voters, goal %d", goodVoters, p.Goal)
			for _, v := range g.Voters {
				if !good(v) {
					why = fmt.Sprintf("replaces node %d (%s); %s", v, unfit(byID, g.Constraint, v), why)
					break
				}
			}
			return change(AddLearner, c, why)
		}
		return p
	}
	// A group with a voter that should not be there, and no node to
	// replace it, keeps it (step 4 removes it once it is beyond the goal).
	if goodVoters < len(g.Voters) {
		return p
	}
	if g.Meta {
		cur := spreadOf(byID, g.Voters)
		for _, l := range g.CaughtUp {
			if !good(l) || !slices.Contains(g.Learners, l) {
				continue
			}
			if r, _ := replaced(nodes, byID, g, l, good); r.v != 0 && r.after.wider(cur) {
				p = change(Promote, l, fmt.Sprintf("spread: %s → %s, replaces node %d", cur, r.after, r.v))
				p.Change.Optional = true
				return p
			}
		}
		// Every live member follows the meta group.
		for _, n := range nodes {
			if !n.Dead && !slices.Contains(g.Voters, n.ID) && !slices.Contains(g.Learners, n.ID) {
				return change(AddLearner, n.ID, fmt.Sprintf("node %d follows the meta group as a learner", n.ID))
			}
		}
		return p
	}
	// 6. A wider spread.
	if c, ok := best(nodes, byID, g, nil); ok {
		cur := spreadOf(byID, g.Voters)
		plan, _ := replaced(nodes, byID, g, c, good)
		if plan.v != 0 && plan.after.wider(cur) {
			p = change(AddLearner, c, fmt.Sprintf("spread: %s → %s, replaces node %d", cur, plan.after, plan.v))
			p.Change.Optional = true
			return p
		}
	}
	// 7. Load.
	if c, v, why, ok := rebalance(nodes, byID, g, good); ok {
		p = change(AddLearner, c, fmt.Sprintf("rebalance: replaces node %d: %s", v, why))
		p.Change.Optional = true
		return p
	}
	return p
}

// promoteReplacing is the voter that step 4 would remove once learner l
// is promoted, when the group would then be beyond its goal: the two
// changes are made as one (Replace). Removal's rule applies to the
// configuration after both (voters + l - v), which must keep a quorum of
// live voters; the configuration before has one (Next checks it first),
// so the joint configuration between them commits. In the meta group a
// live voter is demoted rather than removed, which stays two changes, and
// so does the replacement of a group's only voter.
func promoteReplacing(byID map[uint64]Node, g Group, l uint64, goal int, good func(uint64) bool) (uint64, bool) {
	if len(g.Voters)+1 <= max(goal, 1) || len(g.Voters) < 2 {
		// A group of one voter is promoted first: its voter leads it, and
		// a leader taken out hands the group to another voter first,
		// which only the promotion makes.
		return 0, false
	}
	h := g
	h.Voters = append(slices.Clone(g.Voters), l)
	h.Learners = slices.DeleteFunc(slices.Clone(g.Learners), func(x uint64) bool { return x == l })
	v, ok := removal(byID, h, good)
	if !ok || v == l || g.Meta && live(byID, v) {
		return 0, false
	}
	return v, true
}

// removedWhy says why step 4 removes voter v.
func removedWhy(byID map[uint64]Node, g Group, v uint64, good func(uint64) bool) string {
	if !good(v) {
		return unfit(byID, g.Constraint, v)
	}
	return fmt.Sprintf("%d voters would be beyond the goal", len(g.Voters)+1)
}

func countFunc[T any](s []T, f func(T) bool) int {
	n := 0
	for _, x := range s {
		if f(x) {
			n++
		}
	}
	return n
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
