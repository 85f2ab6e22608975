package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"tally/cluster"
	"tally/cluster/replica"
)

// Three nodes: tally cluster place refuses bad input (exit 2) and a
// session with records or a wrong secret (exit 1), changing nothing; it
// places a new session in a group other than its hash's, and writes with
// TALLY_URL at each node then land in that group, the same on every node.
func TestClusterPlace(t *testing.T) {
	nodes := startCluster(t, t.TempDir())
	const session = "placed"
	g0 := replica.GroupOf(cluster.DefaultGroups, "acme", session)
	to := g0 + 1
	if to > cluster.DefaultGroups+1 {
		to = 2
	}
	secret := []string{"TALLY_JOIN_SECRET=" + clusterSecret}
	if code, _, resp := declareText(nodes[0].addr, "busy", "busy-1", "first"); code != 201 {
		t.Fatalf("write to acme/busy: %d %s", code, resp)
	}
	busyTo := replica.GroupOf(cluster.DefaultGroups, "acme", "busy")%uint64(cluster.DefaultGroups) + 2
	for _, c := range []struct {
		env  []string
		args []string
		exit int
		err  string
	}{
		{secret, []string{"acme", "--group", fmt.Sprint(to)}, 2, `session: "acme" is not TENANT/SESSION`},
		{secret, []string{"acme/a b", "--group", fmt.Sprint(to)}, 2, `session: "acme/a b": session: must be 1-64 letters`},
		{secret, []string{"acme/" + session}, 2, "group: required"},
		{secret, []string{"acme/" + session, "--group", "42"}, 2, "group: 42 is not a data group of this cluster: its data groups are 2 to 9"},
		{nil, []string{"acme/" + session, "--group", fmt.Sprint(to)}, 2, "join-secret: required"},
		{[]string{"TALLY_JOIN_SECRET=another secret of some length"}, []string{"acme/" + session, "--group", fmt.Sprint(to)}, 1, "place: the request is not signed with this cluster's join secret"},
		{secret, []string{"acme/busy", "--group", fmt.Sprint(busyTo)}, 1,
			fmt.Sprintf("session acme/busy already has 2 records in group %d; moving a session is not supported yet", replica.GroupOf(cluster.DefaultGroups, "acme", "busy"))},
	} {
		r := run(t, runOpts{env: c.env}, append([]string{"cluster", "place", "--node", nodes[1].addr}, c.args...)...)
		if r.code != c.exit || !strings.Contains(r.err, c.err) {
			t.Errorf("place %q: exit %d, stderr %q; want %d with %q", c.args, r.code, r.err, c.exit, c.err)
		}
	}
	if r := run(t, runOpts{env: secret}, "cluster", "placements", "--node", nodes[2].addr); r.code != 0 || !strings.Contains(r.out, "no placements recorded") {
		t.Fatalf("placements after the refusals: %v", r)
	}

	before := map[uint64]uint64{}
	for _, g := range []uint64{g0, to} {
		gs, _ := groupStatus(nodes[0], g)
		before[g] = gs.Commit
	}
	r := run(t, runOpts{env: secret}, "cluster", "place", "acme/"+session, "--group", fmt.Sprint(to), "--node", nodes[1].addr, "--json")
	var placed cluster.Placed
	if err := json.Unmarshal([]byte(r.out), &placed); r.code != 0 || err != nil || placed.Group != to || placed.HashGroup != g0 || !placed.Recorded {
		t.Fatalf("place --json: %v (%v)", r, err)
	}
	if r := run(t, runOpts{env: secret}, "cluster", "place", "acme/"+session, "--group", fmt.Sprint(to), "--node", nodes[2].addr); r.code != 0 || !strings.Contains(r.out, fmt.Sprintf("acme/%s placed in group %d (its hash's is %d)", session, to, g0)) {
		t.Fatalf("place again: %v", r)
	}
	if r := run(t, runOpts{env: secret}, "cluster", "placements", "--node", nodes[0].addr); r.code != 0 || !strings.Contains(r.out, fmt.Sprintf("acme/%s  %d", session, to)) {
		t.Fatalf("placements: %v", r)
	}
	if r := run(t, runOpts{}, "cluster", "status", "--node", nodes[2].addr); r.code != 0 || !strings.Contains(r.out, "1 session(s) placed by the directory") {
		t.Fatalf("status: %v", r)
	}

	for i, n := range nodes {
		env := []string{"TALLY_URL=" + n.url(), "TALLY_ACTOR=alice"}
		if r := run(t, runOpts{env: env}, "--session", "acme/"+session, "promise", fmt.Sprintf("through node %d", n.id), "--to", "bob", "--until", "2h"); r.code != 0 {
			t.Fatalf("write %d through node %d: %v", i, n.id, r)
		}
	}
	for _, n := range nodes {
		env := []string{"TALLY_URL=" + n.url(), "TALLY_ACTOR=alice"}
		r := run(t, runOpts{env: env}, "--session", "acme/"+session, "ls", "--all")
		for _, m := range nodes {
			if r.code != 0 || !strings.Contains(r.out, fmt.Sprintf("through node %d", m.id)) {
				t.Fatalf("ls through node %d: %v", n.id, r)
			}
		}
	}
	waitCaughtUp(t, nodes)
	logs := sameLogs(t, nodes)
	if len(logs["acme/"+session]) == 0 {
		t.Fatalf("no log of acme/%s", session)
	}
	// The writes went to the session's group: its log grew by them (and
	// a leader change or two at most), its hash's group's did not.
	gTo, _ := groupStatus(nodes[0], to)
	gHash, _ := groupStatus(nodes[0], g0)
	if gTo.Commit < before[to]+3 || gHash.Commit >= before[g0]+3 {
		t.Errorf("commit indexes: group %d (placed) %d→%d, group %d (hash) %d→%d", to, before[to], gTo.Commit, g0, before[g0], gHash.Commit)
	}
}
