package placement

import (
	"fmt"
	"testing"
)

func leaders(counts ...int) func(*Node) {
	return func(n *Node) { n.Leaders = counts[n.ID-1] }
}

func TestLeader(t *testing.T) {
	for _, tc := range []struct {
		name     string
		nodes    []Node
		g        Group
		leader   uint64
		caughtUp []uint64
		want     string
	}{
		{"even", with(zoned("abc"), leaders(1, 1, 1)), Group{Voters: []uint64{1, 2, 3}}, 1, []uint64{2, 3}, "none"},
		{"one more: no move", with(zoned("abc"), leaders(2, 1, 1)), Group{Voters: []uint64{1, 2, 3}}, 1, []uint64{2, 3}, "none"},
		{"two more: to the least", with(zoned("abc"), leaders(3, 1, 0)), Group{Voters: []uint64{1, 2, 3}}, 1, []uint64{2, 3}, "3: node 1 leads 3 groups, node 3 0"},
		{"the least not caught up", with(zoned("abc"), leaders(3, 1, 0)), Group{Voters: []uint64{1, 2, 3}}, 1, []uint64{2}, "2: node 1 leads 3 groups, node 2 1"},
		{"draining leader", with(with(zoned("abc"), leaders(1, 1, 1)), draining(1)), Group{Voters: []uint64{1, 2, 3}}, 1, []uint64{2, 3}, "2: leader node 1 is draining"},
		{"outside the constraint", with(zoned("abc"), leaders(0, 2, 2)), Group{Voters: []uint64{1, 2, 3}, Constraint: Constraint{Zones: []string{"b", "c"}}}, 1, []uint64{2, 3},
			`2: leader node 1 (zone "a", region "") is outside the constraint (zones b,c)`},
		{"inside the constraint, not moved out", with(zoned("abc"), leaders(3, 0, 0)), Group{Voters: []uint64{1, 2, 3}, Constraint: Constraint{Zones: []string{"a"}}}, 1, []uint64{2, 3}, "none"},
		{"a dead voter never leads", with(with(zoned("abc"), leaders(3, 0, 1)), dead(2)), Group{Voters: []uint64{1, 2, 3}}, 1, []uint64{2, 3}, "3: node 1 leads 3 groups, node 3 1"},
	} {
		to, why := Leader(tc.nodes, tc.g, tc.leader, tc.caughtUp)
		got := "none"
		if to != 0 {
			got = fmt.Sprintf("%d: %s", to, why)
		}
		if got != tc.want {
			t.Errorf("%s:\n got  %s\n want %s", tc.name, got, tc.want)
		}
	}
}
