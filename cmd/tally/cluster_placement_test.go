package main

// The placement driver across real processes: a replication factor below
// the members, spread over zones; a node killed and marked dead, healed;
// a node drained and removed; a cluster with every member a voter
// configured down to 3; the operator's bad input refused.

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"tally/cluster"
	"tally/cluster/replica"
)

// placementWrites is the writes TestClusterPlacement acknowledges before
// it kills a node (the 10,000 with -placement.writes 10000).
var placementWrites = flag.Int("placement.writes", 300, "writes acknowledged before a node is killed in TestClusterPlacement")

// startPlaced starts nodes 1..len(zones), node i in zones[i-1], the first
// bootstrapping with the serve flags given.
func startPlaced(t *testing.T, dir string, zones []string, bootstrap ...string) []*cnode {
	t.Helper()
	return startPlacedWith(t, dir, zones, nil, bootstrap...)
}

// startPlacedWith is startPlaced with serve flags every node is given.
func startPlacedWith(t *testing.T, dir string, zones, every []string, bootstrap ...string) []*cnode {
	t.Helper()
	var nodes []*cnode
	for i, z := range zones {
		id := uint64(i + 1)
		join := append([]string{"--bootstrap"}, bootstrap...)
		if id > 1 {
			join = []string{"--join", nodes[0].addr}
		}
		n := newCNode(t, dir, id, join...)
		n.extra = append([]string{"--zone", z, "--raft-tick", "50ms"}, every...)
		n.start(t)
		nodes = append(nodes, n)
	}
	return nodes
}

// placedAt reports whether, as node ask has applied the meta group, every
// data group's recorded voters are want voters, none of them in skip, with
// no learner and no decision in flight; it returns the status.
func placedAt(ask *cnode, want int, skip ...uint64) (cluster.Status, bool) {
	st, err := clusterStatus(ask.addr)
	if err != nil || len(st.Placement.Groups) == 0 {
		return st, false
	}
	for _, g := range st.Placement.Groups {
		if g.Group == 1 {
			continue
		}
		if !g.Recorded || len(g.Voters) != want || len(g.Learners) != 0 || g.InFlight != nil {
			return st, false
		}
		for _, v := range g.Voters {
			if slices.Contains(skip, v.ID) {
				return st, false
			}
		}
	}
	return st, true
}

// placedWrite declares a promise through node addr, following the
// answer's leader_addr when the node does not hold the session's group
// (as the client does); it reports whether it was acknowledged.
func placedWrite(addr, session, key string) bool {
	// As a client does: follow leader_addr, and resend a retryable 503
	// (a leadership changing hands, a command not committed) under the
	// same idempotency key, boundedly.
	for try := 0; try < 20; try++ {
		code, resp, ok := declare(addr, session, key, fmt.Sprintf(`{"promise":%q,"to":"bob","until":"2h"}`, key))
		if ok && code == http.StatusCreated {
			return true
		}
		var ref struct {
			LeaderAddr string `json:"leader_addr"`
		}
		if ok && code != http.StatusServiceUnavailable {
			return false
		}
		if ok && json.Unmarshal([]byte(resp), &ref) == nil && ref.LeaderAddr != "" {
			addr = ref.LeaderAddr
			continue
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// readPlaced lists a session's promises through addr, following
// leader_addr.
func readPlaced(addr, session string) (int, []string) {
	for hop := 0; ; hop++ {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/tenants/acme/sessions/"+session+"/promises?state=all", nil)
		req.Header.Set("X-Tally-Actor", "alice")
		res, err := httpc.Do(req)
		if err != nil {
			return 0, nil
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var ref struct {
			LeaderAddr string `json:"leader_addr"`
		}
		if res.StatusCode == http.StatusServiceUnavailable && hop < 2 && json.Unmarshal(b, &ref) == nil && ref.LeaderAddr != "" {
			addr = ref.LeaderAddr
			continue
		}
		return listPromises(addr, session)
	}
}

func secretEnv() runOpts { return runOpts{env: []string{"TALLY_JOIN_SECRET=" + clusterSecret}} }

// Five nodes in three zones with --replicas 3: every data group has 3
// voters in 3 distinct zones. Writes are acknowledged through every node.
// The only node of zone c is killed with SIGKILL and marked dead: every
// group is back at 3 voters within 60 s, without it, and every
// acknowledged write is read back once. A node is drained, and then
// removed. The operator's bad input is refused with nothing changed.
func TestClusterPlacement(t *testing.T) {
	dir := t.TempDir()
	nodes := startPlaced(t, dir, []string{"a", "b", "c", "a", "b"}, "--replicas", "3")
	var st cluster.Status
	waitUntil(t, "every data group at 3 voters in 3 zones", 60*time.Second, func() bool {
		var ok bool
		st, ok = placedAt(nodes[0], 3)
		if !ok {
			return false
		}
		for _, g := range st.Placement.Groups {
			zones := map[string]bool{}
			for _, v := range g.Voters {
				zones[v.Zone] = true
			}
			if g.Group != 1 && len(zones) != 3 {
				return false
			}
		}
		// The meta group settles too (it may still be shrinking to odd).
		return strings.Contains(st.Placement.Tolerance, "3 voters in 3 zones: survives 1 node or 1 zone")
	})
	if !strings.Contains(st.Placement.Tolerance, "3 voters in 3 zones: survives 1 node or 1 zone") {
		t.Errorf("tolerance %q", st.Placement.Tolerance)
	}
	if st.Placement.Replicas != 3 {
		t.Errorf("replicas %d, want 3", st.Placement.Replicas)
	}

	// Writes through every node, over sessions in every group.
	acked := map[string][]string{}
	for i := range *placementWrites {
		session := fmt.Sprintf("s%d", i%24)
		key := fmt.Sprintf("w%05d", i)
		if !placedWrite(nodes[i%len(nodes)].addr, session, key) {
			t.Fatalf("write %s to %s through node %d not acknowledged", key, session, i%len(nodes)+1)
		}
		acked[session] = append(acked[session], key)
	}

	// Bad input, refused with nothing changed.
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"cluster", "configure", "--replicas", "2"}, 2, "replicas: 2 is not an odd number of at least 1"},
		{[]string{"cluster", "configure", "--replicas", "0"}, 2, "replicas: 0 is not an odd number of at least 1"},
		{[]string{"cluster", "mark-dead", "9"}, 1, "node 9 is not a member"},
		{[]string{"cluster", "drain", "9"}, 1, "node 9 is not a member"},
		{[]string{"cluster", "mark-dead", "1"}, 1, "node 1 is the node asked"},
	} {
		r := run(t, secretEnv(), append(tc.args, "--node", nodes[0].addr)...)
		if r.code != tc.code || !strings.Contains(r.err, tc.want) {
			t.Errorf("tally %v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.err, tc.code, tc.want)
		}
	}
	if r := run(t, runOpts{}, "cluster", "mark-dead", "3", "--node", nodes[0].addr); r.code != 2 || !strings.Contains(r.err, "join-secret: required") {
		t.Errorf("an unsigned mark-dead: exit %d, %q", r.code, r.err)
	}
	if after, _ := clusterStatus(nodes[0].addr); len(after.Placement.Draining) != 0 || after.Placement.Replicas != 3 {
		t.Errorf("a refused request changed the placement: %+v", after.Placement)
	}

	// Kill the only node of zone c, and mark it dead.
	killed := time.Now()
	nodes[2].kill9()
	if r := run(t, secretEnv(), "cluster", "mark-dead", "3", "--node", nodes[0].addr); r.code != 0 {
		t.Fatalf("mark-dead 3: %v", r)
	}
	waitUntil(t, "every data group back at 3 voters without node 3", 60*time.Second, func() bool {
		var ok bool
		st, ok = placedAt(nodes[0], 3, 3)
		return ok
	})
	t.Logf("healed %v after the kill", time.Since(killed).Round(time.Millisecond))
	live := []*cnode{nodes[0], nodes[1], nodes[3], nodes[4]}
	for session, keys := range acked {
		code, got := readPlaced(live[len(session)%len(live)].addr, session)
		if code != http.StatusOK {
			t.Fatalf("read %s: %d", session, code)
		}
		slices.Sort(got)
		if !slices.Equal(got, keys) {
			t.Fatalf("session %s holds %d promises after the heal, want %d acknowledged, each once", session, len(got), len(keys))
		}
	}
	// Each session's log is the same bytes on every current voter of its
	// group, and every ledger verifies.
	if why := votersDiffer(t, live, st, acked); why != "" {
		t.Error(why)
	}

	// Drain node 4, then remove it; the rest cannot absorb another drain.
	if r := run(t, secretEnv(), "cluster", "drain", "4", "--node", nodes[0].addr); r.code != 0 {
		t.Fatalf("drain 4: %v", r)
	}
	waitUntil(t, "no data group on node 4", 60*time.Second, func() bool {
		_, ok := placedAt(nodes[0], 3, 3, 4)
		return ok
	})
	if r := run(t, secretEnv(), "cluster", "drain", "1", "--node", nodes[1].addr); r.code != 1 || !strings.Contains(r.err, "node 1 cannot be drained: 2 eligible members would be left, and 3 replicas are wanted") {
		t.Errorf("a drain the rest cannot absorb: exit %d, %q", r.code, r.err)
	}
	if r := run(t, secretEnv(), "cluster", "remove-node", "4", "--node", nodes[0].addr); r.code != 0 {
		t.Fatalf("remove-node 4 after its drain: %v", r)
	}
	for session, keys := range acked {
		if code, got := readPlaced(nodes[0].addr, session); code != http.StatusOK || len(got) != len(keys) {
			t.Fatalf("session %s after the drain: %d, %d promises, want %d", session, code, len(got), len(keys))
		}
	}
	if r := run(t, runOpts{}, "cluster", "decisions", "--node", nodes[0].addr); r.code != 0 || !strings.Contains(r.out, "node 3 is dead") || !strings.Contains(r.out, "node 4 is draining") {
		t.Errorf("decisions: %v", r)
	}

	// Nodes 1, 2 and 5 are left, in zones a, b, b: a sixth node joins in
	// zone c, and every data group takes a voter on it, back in 3 zones.
	n6 := newCNode(t, dir, 6, "--join", nodes[0].addr)
	n6.extra = []string{"--zone", "c", "--raft-tick", "50ms"}
	n6.start(t)
	waitUntil(t, "every data group with a voter on node 6, in 3 zones", 60*time.Second, func() bool {
		st, ok := placedAt(nodes[0], 3, 3, 4)
		if !ok {
			return false
		}
		for _, g := range st.Placement.Groups {
			if g.Group != 1 && !slices.ContainsFunc(g.Voters, func(v cluster.NodeRef) bool { return v.ID == 6 && v.Zone == "c" }) {
				return false
			}
		}
		return true
	})
	for session, keys := range acked {
		if code, got := readPlaced(n6.addr, session); code != http.StatusOK || len(got) != len(keys) {
			t.Fatalf("session %s through node 6: %d, %d promises, want %d", session, code, len(got), len(keys))
		}
	}
	if v := metricValue(t, nodes[0], "tally_cluster_groups_under_goal"); v != 0 {
		t.Errorf("tally_cluster_groups_under_goal %v at the end, want 0", v)
	}
}

// A cluster with every member a voter (5 replicas on 4 nodes) is
// configured to 3: every data group comes down to 3 voters, and nothing
// written before is lost.
func TestClusterConfigureDown(t *testing.T) {
	dir := t.TempDir()
	nodes := startPlaced(t, dir, []string{"a", "b", "c", "a"}, "--replicas", "5")
	waitUntil(t, "every data group at 4 voters", 60*time.Second, func() bool {
		_, ok := placedAt(nodes[0], 4)
		return ok
	})
	acked := map[string]int{}
	for i := range 64 {
		session := fmt.Sprintf("c%d", i%16)
		if !placedWrite(nodes[i%len(nodes)].addr, session, fmt.Sprintf("k%03d", i)) {
			t.Fatalf("write %d not acknowledged", i)
		}
		acked[session]++
	}
	r := run(t, secretEnv(), "cluster", "configure", "--replicas", "3", "--node", nodes[1].addr)
	if r.code != 0 || !strings.Contains(r.out, "replicas 3 (was 5)") {
		t.Fatalf("configure: %v", r)
	}
	waitUntil(t, "every data group at 3 voters", 60*time.Second, func() bool {
		_, ok := placedAt(nodes[0], 3)
		return ok
	})
	if r := run(t, runOpts{}, "cluster", "groups", "--node", nodes[3].addr); r.code != 0 || !strings.Contains(r.out, "GOAL") || strings.Count(r.out, "data ") != 8 {
		t.Errorf("groups after configure: %v", r)
	}
	r = run(t, runOpts{}, "cluster", "status", "--node", nodes[2].addr)
	if r.code != 0 || !strings.Contains(r.out, "\nreplicas: 3\n") || !strings.Contains(r.out, "\nplacement: group ") || !strings.Contains(r.out, "3 voters in 3 zones: survives 1 node or 1 zone") {
		t.Errorf("status after configure: %v", r)
	}
	for session, n := range acked {
		if code, got := readPlaced(nodes[3].addr, session); code != http.StatusOK || len(got) != n {
			t.Fatalf("session %s after configure: %d, %d promises, want %d", session, code, len(got), n)
		}
	}
}

// serve refuses an even or zero --replicas, naming the flag, before it
// makes anything.
func TestServeReplicasRefused(t *testing.T) {
	for _, n := range []string{"0", "2", "-1"} {
		dir := t.TempDir()
		r := run(t, runOpts{}, "serve", "--cluster", "--insecure-dev", "--node-id", "1", "--raft-addr", "127.0.0.1:1", "--addr", "127.0.0.1:2",
			"--data", dir+"/n", "--join-secret", clusterSecret, "--bootstrap", "--replicas", n)
		if r.code != 2 || !strings.Contains(r.err, "replicas: "+n+" is not an odd number of at least 1") {
			t.Errorf("--replicas %s: exit %d, %q", n, r.code, r.err)
		}
	}
}

// votersDiffer says which session's log, of those acked, is empty or not
// the same bytes on every current voter of its group (as st places them,
// read from the live nodes); "" when every one is the same.
func votersDiffer[V any](t *testing.T, live []*cnode, st cluster.Status, acked map[string]V) string {
	t.Helper()
	logs := map[uint64]map[string][]byte{}
	for _, n := range live {
		logs[n.id] = nodeLogs(t, n)
	}
	for _, g := range st.Placement.Groups {
		if g.Group == 1 {
			continue
		}
		for session := range acked {
			if replica.GroupOf(cluster.DefaultGroups, "acme", session) != g.Group {
				continue
			}
			ref := logs[g.Voters[0].ID]["acme/"+session]
			for _, v := range g.Voters[1:] {
				if string(logs[v.ID]["acme/"+session]) != string(ref) || len(ref) == 0 {
					return fmt.Sprintf("acme/%s: node %d's log differs from node %d's (or is empty)", session, v.ID, g.Voters[0].ID)
				}
			}
		}
	}
	return ""
}
