package placement

import (
	"fmt"
	"slices"
	"testing"
)

// zoned builds nodes 1.. in the zones given, one letter each ("abc" is
// node 1 in a, 2 in b, 3 in c), with no region.
func zoned(zones string) []Node {
	out := make([]Node, len(zones))
	for i, z := range zones {
		out[i] = Node{ID: uint64(i + 1), Zone: string(z)}
	}
	return out
}

func with(nodes []Node, f func(*Node)) []Node {
	out := slices.Clone(nodes)
	for i := range out {
		f(&out[i])
	}
	return out
}

func dead(ids ...uint64) func(*Node) {
	return func(n *Node) { n.Dead = n.Dead || slices.Contains(ids, n.ID) }
}

func draining(ids ...uint64) func(*Node) {
	return func(n *Node) { n.Draining = n.Draining || slices.Contains(ids, n.ID) }
}

func load(counts ...int) func(*Node) {
	return func(n *Node) { n.Replicas = counts[n.ID-1] }
}

func TestNext(t *testing.T) {
	for _, tc := range []struct {
		name     string
		nodes    []Node
		g        Group
		replicas int
		want     string // "goal G: op node: reason" or "goal G: wait: …" or "goal G: none"
		short    string
	}{
		{"at goal", zoned("abc"), Group{ID: 2, Voters: []uint64{1, 2, 3}}, 3, "goal 3: none", ""},
		{"at goal in too few zones", zoned("aab"), Group{ID: 2, Voters: []uint64{1, 2, 3}}, 3, "goal 3: none", "too few zones: the eligible members are in 2 zones; losing zone a loses quorum"},
		{"at goal, constrained to too few zones", zoned("aabc"), Group{ID: 2, Voters: []uint64{1, 2, 3}, Constraint: Constraint{Zones: []string{"a", "b"}}}, 3, "goal 3: none",
			"a constraint (zones a,b): its members are in 2 zones; losing zone a loses quorum"},
		{"unlabelled: no zone to speak of", []Node{{ID: 1}, {ID: 2}, {ID: 3}}, Group{ID: 2, Voters: []uint64{1, 2, 3}}, 3, "goal 3: none", ""},
		{"previous release: every member a voter", zoned("abcab"), Group{ID: 2, Voters: []uint64{1, 2, 3, 4, 5}}, 3,
			"goal 3: remove 5: voter on node 5: 5 voters, goal 3", ""},
		{"four voters, the one in a shared zone goes", zoned("abca"), Group{ID: 2, Voters: []uint64{1, 2, 3, 4}}, 3,
			"goal 3: remove 4: voter on node 4: 4 voters, goal 3", ""},
		{"new group grows to 3 over zones", zoned("aabc"), Group{ID: 2, Voters: []uint64{1}}, 3,
			"goal 3: add-learner 3: 1 good voters, goal 3", "1 good voters of 3"},
		{"learner catching up", zoned("abc"), Group{ID: 2, Voters: []uint64{1, 2}, Learners: []uint64{3}}, 3,
			"goal 3: wait: learner on node 3 is catching up", "a decision in flight: 2 good voters of 3, learner on node 3"},
		{"learner caught up", zoned("abc"), Group{ID: 2, Voters: []uint64{1, 2}, Learners: []uint64{3}, CaughtUp: []uint64{3}}, 3,
			"goal 3: promote 3: learner on node 3 caught up: 2 good voters, goal 3", "a decision in flight: 2 good voters of 3, learner on node 3"},
		{"dead voter replaced in its zone's place", with(zoned("abcc"), dead(3)), Group{ID: 2, Voters: []uint64{1, 2, 3}}, 3,
			"goal 3: add-learner 4: replaces node 3 (node 3 is dead); 2 good voters, goal 3", "2 good voters of 3"},
		{"dead voter replaced by its caught-up learner in one joint change", with(zoned("abcc"), dead(3)), Group{ID: 2, Voters: []uint64{1, 2, 3}, Learners: []uint64{4}, CaughtUp: []uint64{4}}, 3,
			"goal 3: replace 4 (out 3): learner on node 4 caught up: 2 good voters, goal 3; replaces voter on node 3 (node 3 is dead)", "a decision in flight: 2 good voters of 3, learner on node 4"},
		{"draining voter replaced in one joint change", with(zoned("abcd"), draining(2)), Group{ID: 2, Voters: []uint64{1, 2, 3}, Learners: []uint64{4}, CaughtUp: []uint64{4}}, 3,
			"goal 3: replace 4 (out 2): learner on node 4 caught up: 2 good voters, goal 3; replaces voter on node 2 (node 2 is draining)", "a decision in flight: 2 good voters of 3, learner on node 4"},
		{"spread move's learner replaces the voter it was added for", zoned("aabc"), Group{ID: 2, Voters: []uint64{1, 2, 3}, Learners: []uint64{4}, CaughtUp: []uint64{4}}, 3,
			"goal 3: replace 4 (out 2): learner on node 4 caught up: 3 good voters, goal 3; replaces voter on node 2 (4 voters would be beyond the goal)", ""},
		{"two dead of five: the replacement keeps a live quorum after", with(zoned("abcdef"), dead(4, 5)), Group{ID: 2, Voters: []uint64{1, 2, 3, 4, 5}, Learners: []uint64{6}, CaughtUp: []uint64{6}}, 5,
			"goal 4: replace 6 (out 5): learner on node 6 caught up: 3 good voters, goal 4; replaces voter on node 5 (node 5 is dead)", "too few members: 4 live and not draining, 5 wanted"},
		{"below the goal: promoted alone", with(zoned("abcde"), dead(3)), Group{ID: 2, Voters: []uint64{1, 2, 3}, Learners: []uint64{4}, CaughtUp: []uint64{4}}, 5,
			"goal 4: promote 4: learner on node 4 caught up: 2 good voters, goal 4", "too few members: 4 live and not draining, 5 wanted"},
		{"a group's only voter: promoted first, removed after", zoned("ab"), Group{ID: 2, Voters: []uint64{1}, Learners: []uint64{2}, CaughtUp: []uint64{2}}, 1,
			"goal 1: promote 2: learner on node 2 caught up: 1 good voters, goal 1", ""},
		{"meta group: a dead voter replaced in one joint change", with(zoned("abcd"), dead(3)), Group{ID: 1, Meta: true, Voters: []uint64{1, 2, 3}, Learners: []uint64{4}, CaughtUp: []uint64{4}}, 3,
			"goal 3: replace 4 (out 3): learner on node 4 caught up: 2 good voters, goal 3; replaces voter on node 3 (node 3 is dead)", "a decision in flight: 2 good voters of 3, learner on node 4"},
		{"dead voter removed once replaced", with(zoned("abcc"), dead(3)), Group{ID: 2, Voters: []uint64{1, 2, 3, 4}}, 3,
			"goal 3: remove 3: voter on node 3: node 3 is dead; 4 voters, goal 3", ""},
		{"dead voter with no replacement is removed", with(zoned("abc"), dead(3)), Group{ID: 2, Voters: []uint64{1, 2, 3}}, 3,
			"goal 2: remove 3: voter on node 3: node 3 is dead; 3 voters, goal 2", "too few members: 2 live and not draining, 3 wanted"},
		{"two dead of three: no removal loses the quorum", with(zoned("abcd"), dead(2, 3)), Group{ID: 2, Voters: []uint64{1, 2, 3}}, 3,
			"goal 2: wait: the group has lost its quorum: 1 of 3 voters live", "the group has lost its quorum: 1 of 3 voters live"},
		{"dead learner removed", with(zoned("abcd"), dead(4)), Group{ID: 2, Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}, 3,
			"goal 3: remove 4: learner node 4 is dead", ""},
		{"removed member's voter", zoned("abc"), Group{ID: 2, Voters: []uint64{1, 2, 3, 9}}, 3,
			"goal 3: remove 9: voter on node 9: node 9 is not a member; 4 voters, goal 3", ""},
		{"draining node replaced", with(zoned("abcd"), draining(2)), Group{ID: 2, Voters: []uint64{1, 2, 3}}, 3,
			"goal 3: add-learner 4: replaces node 2 (node 2 is draining); 2 good voters, goal 3", "2 good voters of 3"},
		{"wider spread", zoned("aabc"), Group{ID: 2, Voters: []uint64{1, 2, 3}}, 3,
			"goal 3: add-learner 4: spread: 1 region, 2 zones → 1 region, 3 zones, replaces node 2", ""},
		{"regions before zones", []Node{{ID: 1, Zone: "a", Region: "eu"}, {ID: 2, Zone: "b", Region: "eu"}, {ID: 3, Zone: "c", Region: "eu"}, {ID: 4, Zone: "d", Region: "us"}},
			Group{ID: 2, Voters: []uint64{1, 2, 3}}, 3,
			"goal 3: add-learner 4: spread: 1 region, 3 zones → 2 regions, 3 zones, replaces node 3", ""},
		{"replicas 1", zoned("abc"), Group{ID: 2, Voters: []uint64{1, 2, 3}}, 1, "goal 1: remove 3: voter on node 3: 3 voters, goal 1", ""},
		{"more replicas than members", zoned("ab"), Group{ID: 2, Voters: []uint64{1, 2}}, 3, "goal 2: none", "too few members: 2 live and not draining, 3 wanted"},
		{"meta group: 5 of 6, odd", zoned("abcabc"), Group{ID: 1, Meta: true, Voters: []uint64{1, 2, 3, 4, 5, 6}}, 3,
			"goal 5: demote 6: voter on node 6: 6 voters, goal 5; it follows as a learner", ""},
		{"meta group: a dead voter is removed, not demoted", with(zoned("abcd"), dead(4)), Group{ID: 1, Meta: true, Voters: []uint64{1, 2, 3, 4}}, 3,
			"goal 3: remove 4: voter on node 4: node 4 is dead; 4 voters, goal 3", ""},
		{"meta group: a member outside follows as a learner", zoned("abcd"), Group{ID: 1, Meta: true, Voters: []uint64{1, 2, 3}}, 3,
			"goal 3: add-learner 4: node 4 follows the meta group as a learner", ""},
		{"meta group: a follower is not promoted past the goal", zoned("abcd"), Group{ID: 1, Meta: true, Voters: []uint64{1, 2, 3}, Learners: []uint64{4}, CaughtUp: []uint64{4}}, 3,
			"goal 3: none", ""},
		{"meta group: a draining voter is demoted once replaced", with(zoned("abcd"), draining(3)), Group{ID: 1, Meta: true, Voters: []uint64{1, 2, 3}, Learners: []uint64{4}, CaughtUp: []uint64{4}}, 3,
			"goal 3: promote 4: learner on node 4 caught up: 2 good voters, goal 3", "a decision in flight: 2 good voters of 3, learner on node 4"},
		{"meta group: a follower in a new zone widens the spread", zoned("aaab"), Group{ID: 1, Meta: true, Voters: []uint64{1, 2, 3}, Learners: []uint64{4}, CaughtUp: []uint64{4}}, 3,
			"goal 3: promote 4: spread: 1 region, 1 zone → 1 region, 2 zones, replaces node 3", ""},
		{"meta group: 4 members make 3 voters", zoned("abcd"), Group{ID: 1, Meta: true, Voters: []uint64{1, 2, 3, 4}}, 3,
			"goal 3: demote 4: voter on node 4: 4 voters, goal 3; it follows as a learner", ""},
		{"constraint: voter outside it replaced", zoned("abcab"), Group{ID: 2, Voters: []uint64{1, 2, 3}, Constraint: Constraint{Zones: []string{"a", "b"}}}, 3,
			`goal 3: add-learner 4: replaces node 3 (node 3 (zone "c", region "") is outside the constraint (zones a,b)); 2 good voters, goal 3`, `a constraint (zones a,b): node 3 (zone "c", region "") is outside it; 2 good voters of 3`},
		{"constraint: short of the factor", zoned("abc"), Group{ID: 2, Voters: []uint64{1, 2}, Constraint: Constraint{Zones: []string{"a", "b"}}}, 3,
			"goal 2: none", "a constraint (zones a,b): 2 eligible members, 3 wanted"},
		{"rebalance off a loaded node", with(zoned("abcabc"), load(6, 6, 6, 1, 1, 1)), Group{ID: 2, Voters: []uint64{1, 2, 3}}, 3,
			"goal 3: add-learner 4: rebalance: replaces node 1: node 1 holds 6 replicas, node 4 1, mean 3.5, band 10%", ""},
		{"within the band: no move", with(zoned("abcabc"), load(4, 4, 4, 3, 3, 3)), Group{ID: 2, Voters: []uint64{1, 2, 3}}, 3, "goal 3: none", ""},
		{"gap of one: no move", with(zoned("abcd"), load(3, 3, 3, 2)), Group{ID: 2, Voters: []uint64{1, 2, 3}}, 3, "goal 3: none", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Next(tc.nodes, tc.g, tc.replicas)
			if got := describe(p); got != tc.want {
				t.Errorf("plan:\n got  %s\n want %s", got, tc.want)
			}
			if p.Short != tc.short {
				t.Errorf("short:\n got  %q\n want %q", p.Short, tc.short)
			}
		})
	}
}

func describe(p Plan) string {
	switch {
	case p.Change != nil && p.Change.Op == Replace:
		return fmt.Sprintf("goal %d: %s %d (out %d): %s", p.Goal, p.Change.Op, p.Change.Node, p.Change.Replaces, p.Change.Reason)
	case p.Change != nil:
		return fmt.Sprintf("goal %d: %s %d: %s", p.Goal, p.Change.Op, p.Change.Node, p.Change.Reason)
	case p.Wait != "":
		return fmt.Sprintf("goal %d: wait: %s", p.Goal, p.Wait)
	}
	return fmt.Sprintf("goal %d: none", p.Goal)
}

func TestTolerate(t *testing.T) {
	reg := func(nodes []Node, regions string) []Node {
		for i := range nodes {
			nodes[i].Region = string(regions[i]) + "r"
		}
		return nodes
	}
	for _, tc := range []struct {
		nodes  []Node
		voters []uint64
		want   string
	}{
		{zoned("abc"), []uint64{1, 2, 3}, "3 voters in 3 zones: survives 1 node or 1 zone"},
		{zoned("aab"), []uint64{1, 2, 3}, "3 voters in 2 zones: survives 1 node; losing zone a loses quorum"},
		{zoned("aaa"), []uint64{1, 2, 3}, "3 voters in 1 zone: survives 1 node; losing zone a loses quorum"},
		{zoned("abcde"), []uint64{1, 2, 3, 4, 5}, "5 voters in 5 zones: survives 2 nodes or 2 zones"},
		{zoned("aabbc"), []uint64{1, 2, 3, 4, 5}, "5 voters in 3 zones: survives 2 nodes or 1 zone"},
		{zoned("a"), []uint64{1}, "1 voter in 1 zone: survives no failure; losing zone a loses quorum"},
		{zoned("ab"), []uint64{1, 2}, "2 voters in 2 zones: survives no failure; losing zone a or b loses quorum"},
		{with(zoned("abc"), dead(3)), []uint64{1, 2, 3}, "3 voters in 2 zones (1 dead): survives no failure; losing zone a or b loses quorum"},
		{zoned("ab"), []uint64{1, 2, 9}, "3 voters in 2 zones (1 dead): survives no failure; losing zone a or b loses quorum"},
		{[]Node{{ID: 1}, {ID: 2}, {ID: 3}}, []uint64{1, 2, 3}, "3 voters in 1 zone: survives 1 node; losing zone (unlabelled) loses quorum"},
		{reg(zoned("abc"), "xxy"), []uint64{1, 2, 3}, "3 voters in 3 zones, 2 regions: survives 1 node or 1 zone; losing region xr loses quorum"},
		{reg(zoned("abcde"), "xxyyz"), []uint64{1, 2, 3, 4, 5}, "5 voters in 5 zones, 3 regions: survives 2 nodes, 2 zones or 1 region"},
		{nil, nil, "no voters"},
	} {
		if got := Tolerate(tc.nodes, tc.voters).Summary; got != tc.want {
			t.Errorf("Tolerate(%v):\n got  %s\n want %s", tc.voters, got, tc.want)
		}
	}
}

func TestCheckReplicas(t *testing.T) {
	for n, want := range map[int]string{
		1: "", 3: "", 5: "", 7: "",
		0:  "0 is not an odd number of at least 1 (1, 3, 5, …): an even count of voters survives no more failures than one fewer",
		2:  "2 is not an odd number of at least 1 (1, 3, 5, …): an even count of voters survives no more failures than one fewer",
		-1: "-1 is not an odd number of at least 1 (1, 3, 5, …): an even count of voters survives no more failures than one fewer",
	} {
		if got := errString(CheckReplicas(n)); got != want {
			t.Errorf("CheckReplicas(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCheckConstraint(t *testing.T) {
	nodes := with(zoned("abcd"), dead(4))
	nodes[0].Region, nodes[1].Region = "eu", "eu"
	for _, tc := range []struct {
		c    Constraint
		want string
	}{
		{Constraint{Zones: []string{"a", "b"}}, ""},
		{Constraint{Regions: []string{"eu"}}, ""},
		{Constraint{}, "no regions or zones given"},
		{Constraint{Zones: []string{"a"}, Regions: []string{"eu"}}, "regions and zones both given: constrain by one of them"},
		{Constraint{Zones: []string{"a", "x"}}, `zones: no member is in zone "x" (the members' zones: a, b, c, d)`},
		{Constraint{Regions: []string{"us"}}, `regions: no member is in region "us" (the members' regions: eu)`},
		{Constraint{Zones: []string{"a", "d"}}, `zones: zone "d" has no live member that is not draining: the constraint cannot be met`},
		{Constraint{Zones: []string{"a", "a"}}, `zones: zone "a" is named twice`},
		{Constraint{Zones: []string{""}}, "zones: an empty zone"},
	} {
		if got := errString(CheckConstraint(nodes, tc.c)); got != tc.want {
			t.Errorf("CheckConstraint(%s):\n got  %q\n want %q", tc.c, got, tc.want)
		}
	}
}

func TestCheckDrain(t *testing.T) {
	for _, tc := range []struct {
		nodes    []Node
		id       uint64
		replicas int
		cs       []Constraint
		want     string
	}{
		{zoned("abcd"), 4, 3, nil, ""},
		{zoned("abc"), 3, 3, nil, "node 3 cannot be drained: 2 eligible members would be left, and 3 replicas are wanted"},
		{zoned("abc"), 3, 1, nil, ""},
		{zoned("abc"), 9, 3, nil, "node 9 is not a member"},
		{with(zoned("abcd"), draining(4)), 4, 3, nil, ""},
		{zoned("abcd"), 1, 3, []Constraint{{Zones: []string{"a", "b"}}}, "node 1 cannot be drained: 1 eligible members would be left under the constraint (zones a,b), and 2 replicas are wanted"},
	} {
		if got := errString(CheckDrain(tc.nodes, tc.id, tc.replicas, tc.cs)); got != tc.want {
			t.Errorf("CheckDrain(%d):\n got  %q\n want %q", tc.id, got, tc.want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
