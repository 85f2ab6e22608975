package placement

import (
	"fmt"
	"slices"
)

// short says why a group is below what the replication factor asks, or
// less spread than the members allow; empty if neither.
func short(nodes []Node, g Group, replicas, goal int, good func(uint64) bool) string {
	want := replicas
	if g.Meta {
		want = min(MetaVotersMax, len(nodes))
		if want%2 == 0 {
			want--
		}
	}
	if goal < want {
		live := eligible(nodes, Constraint{})
		switch {
		case len(live) < want:
			return fmt.Sprintf("too few members: %d live and not draining, %d wanted", len(live), want)
		default:
			return fmt.Sprintf("a constraint (%s): %d eligible members, %d wanted", g.Constraint, goal, want)
		}
	}
	if n := countFunc(g.Voters, good); n < goal {
		if len(g.Learners) > 0 {
			return fmt.Sprintf("a decision in flight: %d good voters of %d, learner on node %d", n, goal, g.Learners[0])
		}
		for _, v := range g.Voters {
			if n, ok := byIDOf(nodes, v); ok && !n.Dead && !n.Draining && !g.Constraint.Admits(n) {
				return fmt.Sprintf("a constraint (%s): node %d (zone %q, region %q) is outside it; %d good voters of %d", g.Constraint, v, n.Zone, n.Region, countFunc(g.Voters, good), goal)
			}
		}
		return fmt.Sprintf("%d good voters of %d", n, goal)
	}
	if len(g.Voters) != goal || countFunc(g.Voters, good) != goal {
		return "" // a change under way: the group is not settled yet
	}
	return fewZones(nodes, g)
}

// fewZones says why a group at its goal survives the loss of no zone,
// when its voters already span every zone its eligible members are in:
// too few zones (or a constraint to too few). Empty when no member
// declares a zone, or when the group survives a zone, or could spread
// wider (the driver then widens it).
func fewZones(nodes []Node, g Group) string {
	el := eligible(nodes, g.Constraint)
	if !slices.ContainsFunc(el, func(n Node) bool { return n.Zone != "" }) || len(g.Voters) < 2 {
		return ""
	}
	t := Tolerate(nodes, g.Voters)
	ids := make([]uint64, len(el))
	for i, n := range el {
		ids[i] = n.ID
	}
	byID := make(map[uint64]Node, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	zones := spreadOf(byID, ids).Zones
	if len(t.FatalZones) == 0 || t.Zones < zones {
		return ""
	}
	why := fmt.Sprintf("too few zones: the eligible members are in %d zone%s; losing zone %s loses quorum", zones, plural(zones), joinOr(t.FatalZones))
	if !g.Constraint.IsZero() {
		why = fmt.Sprintf("a constraint (%s): its members are in %d zone%s; losing zone %s loses quorum", g.Constraint, zones, plural(zones), joinOr(t.FatalZones))
	}
	return why
}
