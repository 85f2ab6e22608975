package rebalance

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"tally/cluster/placement"
)

func TestVoters(t *testing.T) {
	nodes := []placement.Node{
		{ID: 1, Zone: "a", Replicas: 4},
		{ID: 2, Zone: "a", Replicas: 1},
		{ID: 3, Zone: "b", Replicas: 2},
		{ID: 4, Zone: "c", Replicas: 2, Bytes: 10},
		{ID: 5, Zone: "c", Replicas: 0, Dead: true},
		{ID: 6, Zone: "d", Replicas: 0, Draining: true},
	}
	cases := []struct {
		name string
		n    int
		want []uint64
	}{
		{"fewest replicas, one a zone", 3, []uint64{2, 3, 4}},
		{"one", 1, []uint64{2}},
		{"every eligible member at factor 0", 0, []uint64{1, 2, 3, 4}},
		{"more than are eligible", 5, []uint64{1, 2, 3, 4}},
		{"a zone used again only when none is left", 4, []uint64{1, 2, 3, 4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Voters(nodes, tc.n); !slices.Equal(got, tc.want) {
				t.Fatalf("Voters(%d) = %v, want %v", tc.n, got, tc.want)
			}
		})
	}
	// Ties broken by bytes, then id; zones before load.
	same := []placement.Node{{ID: 3, Zone: "a"}, {ID: 1, Zone: "a"}, {ID: 2, Zone: "b", Replicas: 1}}
	if got := Voters(same, 2); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("Voters(same, 2) = %v, want [1 2]", got)
	}
}

const mib = 1 << 20

func sess(name string, bytes int64) Session { return Session{Name: name, Bytes: bytes} }

func TestNext(t *testing.T) {
	th := Thresholds{Start: 0.25, Stop: 0.10, MinBytes: mib, GroupFull: 100 * mib}
	cases := []struct {
		name      string
		groups    []Group
		balancing bool
		want      string
	}{
		{"no groups", nil, false, "none: no data groups"},
		{"one group", []Group{{ID: 2, Sessions: []Session{sess("a/1", 10*mib)}}}, false, "none: one data group"},
		{"small", []Group{{ID: 2, Sessions: []Session{sess("a/1", mib/2)}}, {ID: 3}}, false, "none: less than 1048576 bytes in the groups"},
		{"even", []Group{{ID: 2, Sessions: []Session{sess("a/1", 10*mib)}}, {ID: 3, Sessions: []Session{sess("a/2", 10*mib)}}}, false, "none: group 2 is within 25% of the mean load"},
		{"a new empty group takes the session closest to half the gap", []Group{
			{ID: 2, Sessions: []Session{sess("a/1", 4*mib), sess("a/2", 4*mib), sess("a/3", 2*mib)}},
			{ID: 3, Sessions: []Session{sess("b/1", 5*mib), sess("b/2", 5*mib)}},
			{ID: 4},
		}, false, "move a/1 2→4 balancing"},
		{"pinned sessions stay", []Group{
			{ID: 2, Sessions: []Session{{Name: "a/1", Bytes: 4 * mib, Pinned: true}, sess("a/2", 2*mib)}},
			{ID: 3},
		}, false, "move a/2 2→3 balancing"},
		{"one huge session cannot even out", []Group{
			{ID: 2, Sessions: []Session{sess("a/1", 20*mib)}},
			{ID: 3, Sessions: []Session{sess("b/1", 1*mib)}},
		}, false, "none balancing: group 2 is above the mean load, but no session of it moves to group 3 without taking its place"},
		{"a small session beside one too large to move stays", []Group{
			{ID: 2, Sessions: []Session{sess("a/1", 90*mib), sess("a/2", mib)}},
			{ID: 3, Sessions: []Session{sess("b/1", mib)}},
			{ID: 4},
		}, false, "none balancing: group 2 is above the mean load, but the sessions that could move carry less than 50% of its excess (one session too large to move dominates it)"},
		{"equal sessions, a little more in the least loaded group", []Group{
			{ID: 2, Sessions: []Session{sess("a/1", 6*mib), sess("a/2", 6*mib)}},
			{ID: 3, Sessions: []Session{sess("b/1", 6*mib), sess("b/2", 6*mib), sess("b/3", 6*mib)}},
			{ID: 4, Sessions: []Session{sess("a/3", 6*mib), sess("c/1", 1<<10)}},
		}, true, "move b/1 3→4 balancing"},
		{"many small sessions move", []Group{
			{ID: 2, Sessions: manySmall("a", 40)},
			{ID: 3, Sessions: manySmall("b", 10)},
		}, false, "move a/0 2→3 balancing"},
		{"between the bands: not started", []Group{
			{ID: 2, Sessions: []Session{sess("a/1", 6*mib), sess("a/2", 6*mib+mib/2)}},
			{ID: 3, Sessions: []Session{sess("b/1", 10*mib)}},
		}, false, "none: group 2 is within 25% of the mean load"},
		{"between the bands: goes on", []Group{
			{ID: 2, Sessions: []Session{sess("a/1", 6*mib), sess("a/2", 6*mib+mib/2), sess("a/3", mib)}},
			{ID: 3, Sessions: []Session{sess("b/1", 10*mib)}},
		}, true, "move a/3 2→3 balancing"},
		{"within the stop band: stops", []Group{
			{ID: 2, Sessions: []Session{sess("a/1", 10*mib+mib/2)}},
			{ID: 3, Sessions: []Session{sess("b/1", 10*mib)}},
		}, true, "none: group 2 is within 10% of the mean load"},
		{"the write rate counts", []Group{
			{ID: 2, Sessions: []Session{{Name: "a/1", Bytes: 5 * mib, Rate: 900}, {Name: "a/2", Bytes: 5 * mib, Rate: 100}}},
			{ID: 3, Sessions: []Session{{Name: "b/1", Bytes: 10 * mib, Rate: 0}}},
		}, false, "move a/2 2→3 balancing"},
		{"every group full", []Group{
			{ID: 2, Sessions: []Session{sess("a/1", 101*mib)}},
			{ID: 3, Sessions: []Session{sess("b/1", 200*mib)}},
		}, false, "add group: every data group holds more than 104857600 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := describe(Next(tc.groups, th, tc.balancing)); got != tc.want {
				t.Fatalf("Next = %q, want %q", got, tc.want)
			}
		})
	}
}

func manySmall(tenant string, n int) []Session {
	out := make([]Session, n)
	for i := range out {
		out[i] = sess(fmt.Sprintf("%s/%d", tenant, i), mib/4)
	}
	return out
}

func describe(p Plan) string {
	var b strings.Builder
	switch {
	case p.AddGroup:
		b.WriteString("add group")
	case p.Move != nil:
		fmt.Fprintf(&b, "move %s %d→%d", p.Move.Session, p.Move.From, p.Move.To)
	default:
		b.WriteString("none")
	}
	if p.Balancing {
		b.WriteString(" balancing")
	}
	if p.Move == nil {
		b.WriteString(": " + p.Reason)
	}
	return b.String()
}

// TestNextConverges applies the rule's moves to random clusters until it
// moves nothing: it must stop (no session moves twice between the same
// two groups, no cycle), within a bound, and leave the groups within the
// stop band or with no session that fits their gap.
func TestNextConverges(t *testing.T) {
	th := Thresholds{Start: 0.25, Stop: 0.10, MinBytes: mib, GroupFull: 1 << 40}
	for seed := uint64(0); seed < 500; seed++ {
		r := rand.New(rand.NewPCG(seed, 22))
		groups := make([]Group, 2+r.IntN(5))
		sessions := 0
		for i := range groups {
			groups[i].ID = uint64(2 + i)
			if i == len(groups)-1 && r.IntN(2) == 0 {
				continue // a group just added, empty
			}
			for range r.IntN(12) {
				groups[i].Sessions = append(groups[i].Sessions, Session{Name: fmt.Sprintf("t/%d", sessions), Bytes: int64(1+r.IntN(64)) * mib / 4, Rate: float64(r.IntN(100))})
				sessions++
			}
		}
		balancing := false
		seen := map[string]bool{}
		for step := 0; ; step++ {
			if step > sessions*len(groups)+1 {
				t.Fatalf("seed %d: still moving after %d moves", seed, step)
			}
			p := Next(groups, th, balancing)
			balancing = p.Balancing
			if p.Move == nil {
				break
			}
			key := fmt.Sprintf("%s %d→%d", p.Move.Session, p.Move.From, p.Move.To)
			if seen[key] {
				t.Fatalf("seed %d: %s again: the moves cycle", seed, key)
			}
			seen[key] = true
			groups = apply(groups, *p.Move)
		}
	}
}

func apply(groups []Group, mv Move) []Group {
	out := slices.Clone(groups)
	var s Session
	for i := range out {
		if out[i].ID == mv.From {
			j := slices.IndexFunc(out[i].Sessions, func(x Session) bool { return x.Name == mv.Session })
			s = out[i].Sessions[j]
			out[i].Sessions = slices.Delete(slices.Clone(out[i].Sessions), j, j+1)
		}
	}
	for i := range out {
		if out[i].ID == mv.To {
			out[i].Sessions = append(slices.Clone(out[i].Sessions), s)
		}
	}
	return out
}
