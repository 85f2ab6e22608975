package placement

import (
	"fmt"
	"slices"
)

// Leader is where a group's leadership should go from the voter leading
// it now, if anywhere: to a caught-up voter (caughtUp, the leader's view)
// that fits the group, when the leader does not (draining, or outside the
// group's constraint), or when the leader's node leads at least
// MoveGapMin more groups than it (Node.Leaders, counted over the groups'
// recorded leaders). Each transfer of the second kind lowers the sum of
// squared leader counts, so transfers never cycle. The voter chosen is
// the one leading the fewest, then the lowest id; 0 if none.
func Leader(nodes []Node, g Group, leader uint64, caughtUp []uint64) (uint64, string) {
	byID := make(map[uint64]Node, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	fits := func(id uint64) bool {
		n, ok := byID[id]
		return ok && !n.Dead && !n.Draining && g.Constraint.Admits(n)
	}
	var to Node
	for _, v := range g.Voters {
		if v == leader || !fits(v) || !slices.Contains(caughtUp, v) {
			continue
		}
		if n := byID[v]; to.ID == 0 || n.Leaders < to.Leaders || (n.Leaders == to.Leaders && n.ID < to.ID) {
			to = n
		}
	}
	if to.ID == 0 {
		return 0, ""
	}
	if !fits(leader) {
		return to.ID, "leader " + unfit(byID, g.Constraint, leader)
	}
	if from := byID[leader]; from.Leaders-to.Leaders >= MoveGapMin {
		return to.ID, fmt.Sprintf("node %d leads %d groups, node %d %d", leader, from.Leaders, to.ID, to.Leaders)
	}
	return 0, ""
}
