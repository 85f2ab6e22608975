package placement

import (
	"fmt"
	"slices"
	"testing"
)

// stepsMax bounds the changes a group needs to reach its goal from any
// configuration in these tests.
const stepsMax = 24

// play applies plans to one group until none is left, the learners
// catching up at the next look, and checks every change on the way: no
// removal (alone, or in a Replace's joint change) leaves fewer live
// voters than a quorum, or no voter; no promotion of a learner that has
// not caught up; no configuration seen
// twice (no oscillation).
func play(t *testing.T, nodes []Node, g Group, replicas int) Group {
	t.Helper()
	seen := map[string]bool{}
	for range stepsMax {
		key := fmt.Sprint(g.Voters, g.Learners, g.CaughtUp)
		if seen[key] {
			t.Fatalf("configuration %s seen twice", key)
		}
		seen[key] = true
		p := Next(nodes, g, replicas)
		if p.Change == nil {
			if len(g.Learners) > len(g.CaughtUp) {
				g.CaughtUp = slices.Clone(g.Learners)
				continue
			}
			return g
		}
		c := *p.Change
		switch c.Op {
		case AddLearner:
			if slices.Contains(g.Voters, c.Node) || slices.Contains(g.Learners, c.Node) {
				t.Fatalf("%s: adds node %d, already in %v %v", c.Reason, c.Node, g.Voters, g.Learners)
			}
			g.Learners = append(slices.Clone(g.Learners), c.Node)
		case Promote:
			if !slices.Contains(g.CaughtUp, c.Node) {
				t.Fatalf("promotes node %d before it caught up", c.Node)
			}
			g.Learners = slices.DeleteFunc(slices.Clone(g.Learners), func(x uint64) bool { return x == c.Node })
			g.CaughtUp = slices.DeleteFunc(slices.Clone(g.CaughtUp), func(x uint64) bool { return x == c.Node })
			g.Voters = append(slices.Clone(g.Voters), c.Node)
		case Replace:
			if !slices.Contains(g.CaughtUp, c.Node) || !slices.Contains(g.Learners, c.Node) {
				t.Fatalf("replaces with node %d before it caught up: %v", c.Node, g.Learners)
			}
			after := append(slices.Clone(g.Voters), c.Node)
			if !slices.Contains(g.Voters, c.Replaces) || !SafeRemoval(nodes, after, c.Replaces) {
				t.Fatalf("replaces voter %d of %v by %d: the quorum is lost", c.Replaces, g.Voters, c.Node)
			}
			if g.Meta && !nodes[c.Replaces-1].Dead {
				t.Fatalf("replaces live voter %d of the meta group: it must follow as a learner", c.Replaces)
			}
			g.Learners = slices.DeleteFunc(slices.Clone(g.Learners), func(x uint64) bool { return x == c.Node })
			g.CaughtUp = slices.DeleteFunc(slices.Clone(g.CaughtUp), func(x uint64) bool { return x == c.Node })
			g.Voters = slices.DeleteFunc(after, func(x uint64) bool { return x == c.Replaces })
		case Demote:
			if !SafeRemoval(nodes, g.Voters, c.Node) {
				t.Fatalf("demotes voter %d of %v: the quorum is lost", c.Node, g.Voters)
			}
			g.Voters = slices.DeleteFunc(slices.Clone(g.Voters), func(x uint64) bool { return x == c.Node })
			g.Learners = append(slices.Clone(g.Learners), c.Node)
		case Remove:
			if slices.Contains(g.Voters, c.Node) {
				if !SafeRemoval(nodes, g.Voters, c.Node) {
					t.Fatalf("removes voter %d of %v: the quorum is lost", c.Node, g.Voters)
				}
				g.Voters = slices.DeleteFunc(slices.Clone(g.Voters), func(x uint64) bool { return x == c.Node })
			} else {
				g.Learners = slices.DeleteFunc(slices.Clone(g.Learners), func(x uint64) bool { return x == c.Node })
			}
		}
		slices.Sort(g.Voters)
	}
	t.Fatalf("no settled configuration within %d changes: %v %v", stepsMax, g.Voters, g.Learners)
	return g
}

// TestConvergeExhaustive plays every small cluster: 1 to 5 nodes over up
// to 3 zones (each labelling once, up to renaming), every starting voter
// set, every single dead node or none, replication factors 1, 3 and 5. A
// group with a quorum of live voters settles at exactly its goal, on
// eligible nodes only, over as many zones as its goal and the eligible
// nodes allow.
func TestConvergeExhaustive(t *testing.T) {
	cases := 0
	for n := 1; n <= 5; n++ {
		for _, zones := range labellings(n, 3) {
			base := zoned(zones)
			for mask := 1; mask < 1<<n; mask++ {
				var voters []uint64
				for i := range n {
					if mask&(1<<i) != 0 {
						voters = append(voters, uint64(i+1))
					}
				}
				for d := 0; d <= n; d++ {
					nodes := with(base, dead(uint64(d)))
					if countFunc(voters, func(v uint64) bool { return v != uint64(d) }) < len(voters)/2+1 {
						continue // no quorum: nothing can change
					}
					for _, replicas := range []int{1, 3, 5} {
						for _, meta := range []bool{false, true} {
							if meta && replicas != 3 {
								continue // the meta group's goal does not depend on the factor
							}
							cases++
							g := play(t, nodes, Group{ID: 2, Meta: meta, Voters: voters}, replicas)
							checkSettled(t, nodes, g, replicas, fmt.Sprintf("%s voters %v dead %d replicas %d meta %v", zones, voters, d, replicas, meta))
						}
					}
				}
			}
		}
	}
	t.Logf("%d configurations played", cases)
}

func checkSettled(t *testing.T, nodes []Node, g Group, replicas int, what string) {
	t.Helper()
	goal := Goal(nodes, g, replicas)
	if (len(g.Learners) != 0 && !g.Meta) || len(g.Voters) != max(goal, 1) {
		t.Fatalf("%s: settled at voters %v learners %v, goal %d", what, g.Voters, g.Learners, goal)
	}
	if g.Meta {
		for _, n := range nodes {
			if !n.Dead && !slices.Contains(g.Voters, n.ID) && !slices.Contains(g.Learners, n.ID) {
				t.Fatalf("%s: settled with live node %d outside the meta group: %v %v", what, n.ID, g.Voters, g.Learners)
			}
			if n.Dead && slices.Contains(g.Learners, n.ID) {
				t.Fatalf("%s: settled with dead node %d a learner of the meta group", what, n.ID)
			}
		}
	}
	byID := map[uint64]Node{}
	zones := map[string]bool{}
	for _, n := range eligible(nodes, g.Constraint) {
		byID[n.ID] = n
		zones[n.Zone] = true
	}
	got := map[string]bool{}
	for _, v := range g.Voters {
		n, ok := byID[v]
		if !ok && goal > 0 {
			t.Fatalf("%s: settled with voter %d not eligible: %v", what, v, g.Voters)
		}
		got[n.Zone] = true
	}
	if want := min(goal, len(zones)); len(got) != want {
		t.Fatalf("%s: settled over %d zones %v, want %d", what, len(got), g.Voters, want)
	}
}

// labellings are the ways to put n nodes in up to k zones, each once up
// to renaming the zones (node 1 is always in a).
func labellings(n, k int) []string {
	var out []string
	var rec func(prefix string, used int)
	rec = func(prefix string, used int) {
		if len(prefix) == n {
			out = append(out, prefix)
			return
		}
		for z := 0; z < min(used+1, k); z++ {
			rec(prefix+string(rune('a'+z)), max(used, z+1))
		}
	}
	rec("", 0)
	return out
}

// TestRebalanceSettles grows a cluster: 8 groups of 3 on 3 nodes, then 3
// nodes join in new zones; the driver's changes, one at a time over the
// groups, settle with every node within the band of the mean, or one
// replica from it, and without a configuration seen twice.
func TestRebalanceSettles(t *testing.T) {
	nodes := zoned("abcdef")
	groups := make([]Group, 8)
	for i := range groups {
		groups[i] = Group{ID: uint64(i + 2), Voters: []uint64{1, 2, 3}}
	}
	count := func() {
		for i := range nodes {
			nodes[i].Replicas = 0
			for _, g := range groups {
				if slices.Contains(g.Voters, nodes[i].ID) || slices.Contains(g.Learners, nodes[i].ID) {
					nodes[i].Replicas++
				}
			}
		}
	}
	moves := 0
	for round := 0; ; round++ {
		if round > 200 {
			t.Fatalf("no settling in 200 rounds: %v", nodes)
		}
		changed := false
		for i := range groups {
			count()
			before := fmt.Sprint(groups[i].Voters)
			groups[i] = play(t, nodes, groups[i], 3)
			if fmt.Sprint(groups[i].Voters) != before {
				changed = true
				moves++
			}
		}
		if !changed {
			break
		}
	}
	count()
	for _, n := range nodes {
		if n.Replicas < 3 || n.Replicas > 5 {
			t.Errorf("node %d holds %d replicas after %d moves, want 4±1: %v", n.ID, n.Replicas, moves, nodes)
		}
	}
	for _, g := range groups {
		if len(g.Voters) != 3 {
			t.Errorf("group %d has voters %v", g.ID, g.Voters)
		}
	}
}
