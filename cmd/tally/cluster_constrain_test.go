package main

// Constraints across real processes: a session's group moves its voters
// inside the zones it is constrained to; another session constrained the
// same way is placed in that group; a constraint live members cannot meet
// is refused, saying why, with nothing recorded; status reports the
// constrained group short of its goal once a node inside it is dead.

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"tally/cluster"
)

// constrainedGroups are the groups status reports constrained, by group.
func constrainedGroups(st cluster.Status) map[uint64]string {
	out := map[uint64]string{}
	for _, g := range st.Placement.Groups {
		if g.Constraint != nil {
			out[g.Group] = g.Constraint.String()
		}
	}
	return out
}

func TestClusterConstrain(t *testing.T) {
	dir := t.TempDir()
	// Nodes 1, 2 in zone a, 3 in b, 4 and 5 in c.
	nodes := startPlaced(t, dir, []string{"a", "a", "b", "c", "c"}, "--replicas", "3")
	waitUntil(t, "every data group at 3 voters", 60*time.Second, func() bool {
		_, ok := placedAt(nodes[0], 3)
		return ok
	})
	for i := range 8 {
		if !placedWrite(nodes[0].addr, "s1", fmt.Sprintf("k%d", i)) {
			t.Fatalf("write %d not acknowledged", i)
		}
	}

	// Bad input: refused before anything is recorded.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"acme/s1"}, 2, "regions: required: --regions R1,R2 or --zones Z1,Z2 (or --clear)"},
		{[]string{"acme/s1", "--zones", "a", "--regions", "eu"}, 2, "zones: given with regions: constrain by one of them"},
		{[]string{"acme/s1", "--zones", "x"}, 1, `no member is in zone "x" (the members' zones: a, b, c)`},
		{[]string{"acme/s1", "--zones", "a"}, 1, "only 2 live members that are not draining are inside the constraint (zones a), and a group's 3 voters must be: the constraint cannot be met"},
		{[]string{"Acme!/s1", "--zones", "a"}, 2, "tenant: "},
	} {
		r := run(t, secretEnv(), append([]string{"cluster", "constrain", "--node", nodes[1].addr}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.err, tc.want) {
			t.Errorf("constrain %v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.err, tc.code, tc.want)
		}
	}
	if r := run(t, runOpts{}, "cluster", "constrain", "acme/s1", "--zones", "a,b", "--node", nodes[0].addr); r.code != 2 || !strings.Contains(r.err, "join-secret: required") {
		t.Errorf("an unsigned constrain: exit %d, %q", r.code, r.err)
	}
	if st, _ := clusterStatus(nodes[0].addr); len(constrainedGroups(st)) != 0 {
		t.Fatalf("a refused constrain recorded %v", constrainedGroups(st))
	}

	// acme/s1 (with records) stays in its group, whose voters move into
	// zones a and b: nodes 1, 2 and 3.
	r := run(t, secretEnv(), "cluster", "constrain", "acme/s1", "--zones", "a,b", "--node", nodes[0].addr)
	if r.code != 0 || !strings.Contains(r.out, "session acme/s1 constrained to zones a,b; groups bound: ") {
		t.Fatalf("constrain acme/s1: %v", r)
	}
	var g1 uint64
	waitUntil(t, "acme/s1's group on nodes 1, 2 and 3", 60*time.Second, func() bool {
		st, ok := placedAt(nodes[0], 3)
		if !ok {
			return false
		}
		for g, c := range constrainedGroups(st) {
			if c != "zones a,b" {
				return false
			}
			g1 = g
		}
		for _, g := range st.Placement.Groups {
			if g.Group == g1 {
				return slices.EqualFunc(g.Voters, []uint64{1, 2, 3}, func(v cluster.NodeRef, id uint64) bool { return v.ID == id })
			}
		}
		return false
	})
	// A new session constrained the same way is placed in a group that
	// meets it: that group, or another whose voters are all in zones a
	// and b as it is placed (the driver may be between two changes).
	r = run(t, secretEnv(), "cluster", "constrain", "acme/fresh", "--zones", "a,b", "--node", nodes[2].addr)
	var bound uint64
	if _, err := fmt.Sscanf(r.out[max(strings.Index(r.out, "groups bound: "), 0):], "groups bound: %d", &bound); r.code != 0 || err != nil {
		t.Fatalf("constrain acme/fresh: %v (%v)", r, err)
	}
	constrained := 1
	if bound != g1 {
		constrained = 2
		waitUntil(t, fmt.Sprintf("group %d, which acme/fresh is bound to, on voters in zones a and b", bound), 60*time.Second, func() bool {
			st, ok := placedAt(nodes[0], 3)
			if !ok {
				return false
			}
			for _, g := range st.Placement.Groups {
				if g.Group == bound {
					return !slices.ContainsFunc(g.Voters, func(v cluster.NodeRef) bool { return v.ID > 3 })
				}
			}
			return false
		})
	}
	if !placedWrite(nodes[3].addr, "fresh", "f1") {
		t.Fatal("a write to acme/fresh not acknowledged")
	}
	if r := run(t, runOpts{}, "cluster", "status", "--node", nodes[4].addr); r.code != 0 || !strings.Contains(r.out, fmt.Sprintf("  group %d (constrained to zones a,b): 3 voters in 2 zones: survives 1 node; losing zone a loses quorum", g1)) {
		t.Errorf("status with a constrained group: %v", r)
	} else if !strings.Contains(r.out, fmt.Sprintf("group %d short of its goal: a constraint (zones a,b): its members are in 2 zones; losing zone a loses quorum", g1)) {
		t.Errorf("status does not say why the constrained group survives no zone: %v", r)
	}

	// Zone b's only node dies: a two-zone constraint over a and b is
	// refused now, and the constrained group is reported short.
	nodes[2].kill9()
	if r := run(t, secretEnv(), "cluster", "mark-dead", "3", "--node", nodes[0].addr); r.code != 0 {
		t.Fatalf("mark-dead 3: %v", r)
	}
	r = run(t, secretEnv(), "cluster", "constrain", "acme/s2", "--zones", "a,b", "--node", nodes[0].addr)
	if r.code != 1 || !strings.Contains(r.err, `zone "b" has no live member that is not draining: the constraint cannot be met`) {
		t.Errorf("constrain with zone b dead: exit %d, %q", r.code, r.err)
	}
	var st cluster.Status
	waitUntil(t, "the constrained group reported short", 30*time.Second, func() bool {
		st, _ = clusterStatus(nodes[0].addr)
		return slices.ContainsFunc(st.Placement.Short, func(s cluster.ShortGroup) bool {
			return s.Group == g1 && s.Why == "a constraint (zones a,b): 2 eligible members, 3 wanted"
		})
	})
	if got := constrainedGroups(st); len(got) != constrained {
		t.Errorf("constrained groups %v after a refusal, want %d (group %d and the one acme/fresh is bound to, %d)", got, constrained, g1, bound)
	}
	if r := run(t, runOpts{}, "cluster", "status", "--node", nodes[0].addr); r.code != 0 || !strings.Contains(r.out, fmt.Sprintf("group %d short of its goal: a constraint (zones a,b): 2 eligible members, 3 wanted", g1)) {
		t.Errorf("status: %v", r)
	}
	// A read may meet the group electing after the death: ask until it
	// answers.
	var code int
	var got []string
	waitUntil(t, "acme/s1 read after the death", 15*time.Second, func() bool {
		code, got = readPlaced(nodes[1].addr, "s1")
		return code == http.StatusOK
	})
	if len(got) != 8 {
		t.Errorf("acme/s1 after the death: %d, %d promises, want 8", code, len(got))
	}
	// Cleared, the group spreads again.
	if r := run(t, secretEnv(), "cluster", "constrain", "acme/s1", "--clear", "--node", nodes[0].addr); r.code != 0 || !strings.Contains(r.out, "session acme/s1: no constraint") {
		t.Errorf("clear: %v", r)
	}
}
