package main

// Adding data groups across real processes, and the driver spreading
// sessions into them, and a moved session's artifacts: refusals with nothing recorded; a group added on a
// 3-node cluster gets its voters and a leader, `cluster groups --json`
// shows it, a new session can be placed in it; then the driver moves
// sessions of the two full groups into the empty one on its own, each
// moved session whole.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/cluster"
	"tally/cluster/replica"
)

// groupsOf is `cluster groups --json` through node n.
func groupsOf(t *testing.T, n *cnode) cluster.Status {
	t.Helper()
	r := run(t, runOpts{}, "cluster", "groups", "--node", n.addr, "--json")
	var st cluster.Status
	if err := json.Unmarshal([]byte(r.out), &st); r.code != 0 || err != nil {
		t.Fatalf("cluster groups --json: %v (%v)", r, err)
	}
	return st
}

// declareAgain declares a promise through the nodes in turn from the
// i-th, sending it again under its key on a 503 (the driver hands
// leaderships over while the writes run), as a client does.
func declareAgain(nodes []*cnode, i int, session, key, text string) (int, string) {
	var code int
	var resp string
	for try := range 50 {
		if code, _, resp = declareText(nodes[(i+try)%len(nodes)].addr, session, key, text); code != http.StatusServiceUnavailable && code != 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return code, resp
}

func TestClusterGroupsAddSpread(t *testing.T) {
	// Spreading is on by default: the nodes are started without --spread.
	nodes := startClusterWith(t, t.TempDir(), func(n *cnode) {
		if n.id == 1 {
			n.joinArgs = append(n.joinArgs, "--groups", "2")
		}
	})
	secret := secretEnv()
	if st := groupsOf(t, nodes[1]); len(st.Groups) != 3 {
		t.Fatalf("groups before: %+v", st.Groups)
	}

	// Refused, with nothing recorded.
	for _, c := range []struct {
		args []string
		env  runOpts
		exit int
		err  string
	}{
		{[]string{"--count", "0"}, secret, 2, "count: 0: must be 1 to 64 groups at a time"},
		{[]string{"--count", "65"}, secret, 2, "count: 65: must be 1 to 64 groups at a time"},
		{[]string{"extra"}, secret, 2, "unknown command"},
		{nil, runOpts{}, 2, "join-secret: required"},
		{nil, runOpts{env: []string{"TALLY_JOIN_SECRET=another secret of some length"}}, 1, "groups-add: the request is not signed with this cluster's join secret"},
	} {
		r := run(t, c.env, append([]string{"cluster", "groups", "add", "--node", nodes[1].addr}, c.args...)...)
		if r.code != c.exit || !strings.Contains(r.err, c.err) {
			t.Errorf("groups add %q: exit %d, stderr %q; want %d with %q", c.args, r.code, r.err, c.exit, c.err)
		}
	}
	if st := groupsOf(t, nodes[2]); len(st.Groups) != 3 {
		t.Fatalf("groups after the refusals: %+v", st.Groups)
	}

	// Sessions in both groups: three in each, about 0.6 MiB each.
	text := strings.Repeat("x", 2000)
	var names []string
	for g := uint64(2); g <= 3; g++ {
		for i := 0; len(names) < int(g-1)*3; i++ {
			if s := fmt.Sprintf("full-%d", i); replica.GroupOf(2, "acme", s) == g && !slices.Contains(names, s) {
				names = append(names, s)
			}
		}
	}
	const perSession = 300
	var wg sync.WaitGroup
	for _, s := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perSession {
				if code, resp := declareAgain(nodes, i, s, fmt.Sprintf("%s-%d", s, i), fmt.Sprintf("%d %s", i, text)); code != http.StatusCreated && code != http.StatusOK {
					t.Errorf("write %s %d: %d %s", s, i, code, resp)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// A group added: its voters, a leader, shown by groups --json.
	r := run(t, secret, "cluster", "groups", "add", "--node", nodes[1].addr)
	if r.code != 0 || r.out != "group 4 added, on nodes 1,2,3\n" {
		t.Fatalf("groups add: %v", r)
	}
	waitUntil(t, "group 4 with three voters and a leader on every node", 30*time.Second, func() bool {
		for _, n := range nodes {
			gs, ok := groupStatus(n, 4)
			if !ok || gs.Leader == 0 || len(gs.Voters) != 3 || gs.Kind != "data" {
				return false
			}
		}
		return true
	})
	if st := groupsOf(t, nodes[0]); len(st.Groups) != 4 || st.Groups[3].Group != 4 {
		t.Fatalf("groups --json after the add: %+v", st.Groups)
	}

	// A new session placed in it.
	if r := run(t, secret, "cluster", "place", "acme/fresh", "--group", "4", "--node", nodes[2].addr); r.code != 0 {
		t.Fatalf("place in group 4: %v", r)
	}
	if code, resp := declareAgain(nodes, 0, "fresh", "fresh-0", "fresh 0"); code != http.StatusCreated {
		t.Fatalf("write to the placed session: %d %s", code, resp)
	}
	if code, log := readEntries(nodes[1].addr, "fresh"); code != 200 || len(log) != 1 {
		t.Fatalf("read of the placed session: %d %v", code, log)
	}

	// The driver spreads the full groups' sessions into the new one.
	var moved []replica.Move
	waitUntil(t, "the driver to move two sessions into group 4", 90*time.Second, func() bool {
		r := run(t, secret, "cluster", "moves", "--node", nodes[0].addr, "--json")
		var doc cluster.Moves
		if r.code != 0 || json.Unmarshal([]byte(r.out), &doc) != nil {
			return false
		}
		moved = moved[:0]
		for _, mv := range doc.Moves {
			if mv.To == 4 && (mv.Step == replica.MoveActivated || mv.Step == replica.MoveRetired) {
				moved = append(moved, mv)
			}
		}
		return len(moved) >= 2
	})
	for _, mv := range moved {
		if mv.Tenant != "acme" || !slices.Contains(names, mv.Session) || mv.Seq < perSession {
			t.Errorf("driver's move: %+v", mv)
			continue
		}
		code, log := readEntries(nodes[int(mv.ID)%3].addr, mv.Session)
		if code != 200 || len(log) != perSession {
			t.Errorf("%s after its move: %d, %d records", mv.Name(), code, len(log))
		}
	}
	t.Logf("the driver moved %d sessions into group 4", len(moved))

	// A node restarted opens the added group again from the meta group,
	// and serves the sessions moved there.
	nodes[1].stop()
	nodes[1].joinArgs = nil // on its data
	nodes[1].start(t)
	waitUntil(t, "group 4 on the restarted node", 30*time.Second, func() bool {
		gs, ok := groupStatus(nodes[1], 4)
		return ok && gs.Leader != 0 && len(gs.Voters) == 3
	})
	for _, mv := range moved {
		code, log := readEntries(nodes[1].addr, mv.Session)
		if code != 200 || len(log) != perSession {
			t.Errorf("%s through the restarted node: %d, %d records", mv.Name(), code, len(log))
		}
	}
}

// A moved session's artifacts: on a cluster whose data groups have one
// voter each, a session with an artifact moves to a group on another
// node; that node fetches the bytes from the source's, verifies them,
// receipts its copy in the destination group, and serves them.
func TestClusterMoveArtifact(t *testing.T) {
	nodes := startPlacedWith(t, t.TempDir(), []string{"a", "b", "c"}, []string{"--spread=false"}, "--replicas", "1")
	am := artifactToMove(t, nodes)
	src, dst, from, to, content, tally := am.src, am.dst, am.from, am.to, am.content, am.tally

	r := run(t, secretEnv(), "cluster", "move", "acme/parser", "--group", fmt.Sprint(to), "--node", src.addr, "--json")
	var mv replica.Move
	if err := json.Unmarshal([]byte(r.out), &mv); r.code != 0 || err != nil || (mv.Step != replica.MoveActivated && mv.Step != replica.MoveRetired) {
		t.Fatalf("move from group %d (node %d) to group %d (node %d): %v", from, src.id, to, dst.id, r)
	}
	// The destination's voter (the placement driver may have moved group
	// to's replica since: whichever node holds it now) fetched a verified
	// copy and receipted it in the destination group.
	receipted := regexp.MustCompile(fmt.Sprintf(`patch-a +group %d, epoch \d+ +held by node (\d+) +whole`, to))
	var holder *cnode
	deadline := time.Now().Add(60 * time.Second)
	for {
		show := run(t, runOpts{env: []string{"TALLY_URL=" + dst.url()}}, "claim", "show", "C17", "--session", "acme/parser")
		// (Most runs it is the destination's node; when the placement
		// driver has since moved the group's replica onto the source's
		// node, that node's receipt in the destination group is the one.)
		if m := receipted.FindStringSubmatch(show.out); show.code == 0 && m != nil {
			holder = nodes[m[1][0]-'1']
			if hashFile(holder.objectPath(content)) == content {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no verified copy receipted in group %d: claim show %v", to, show)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("group %d's copy receipted by node %d (the source's node is %d)", to, holder.id, src.id)
	dst = holder
	got := filepath.Join(am.work, "got.bin")
	tally(dst, "", "artifact", "get", "patch-a", "--claim", "C17", "-o", got)
	if hashFile(got) != content {
		t.Fatalf("the artifact read through node %d after the move is not the bytes put", dst.id)
	}
}

// artifactMove is a session with an artifact, about to move: its group
// (from) and its node (src), the destination group (to) on another node
// (dst), the artifact's content digest, and tally run through a node in
// the test's work directory.
type artifactMove struct {
	src, dst *cnode
	from, to uint64
	content  string
	work     string
	tally    func(n *cnode, stdin string, args ...string) string
}

// artifactToMove waits until every data group of nodes has its one voter,
// each node holding one, and puts an artifact (patch-a, 1 MiB, claim C17)
// in acme/parser, receipted at its group's node.
func artifactToMove(t *testing.T, nodes []*cnode) artifactMove {
	t.Helper()
	var st cluster.Status
	var spread spreadWatch
	waitUntil(t, "every data group at 1 voter, on every node", 90*time.Second, func() bool {
		var ok bool
		if st, ok = placedAt(nodes[0], 1); !ok {
			return false
		}
		on := map[uint64]bool{}
		for _, g := range st.Placement.Groups {
			if g.Group != 1 {
				on[g.Voters[0].ID] = true
			}
		}
		return len(on) == 3 && spread.settled(st, 3)
	})
	voter := map[uint64]uint64{} // data group → its voter
	for _, g := range st.Placement.Groups {
		if g.Group != 1 {
			voter[g.Group] = g.Voters[0].ID
		}
	}
	from := replica.GroupOf(cluster.DefaultGroups, "acme", "parser")
	var to uint64
	for g := uint64(2); g <= 1+cluster.DefaultGroups; g++ {
		if voter[g] != voter[from] && (to == 0 || g < to) {
			to = g
		}
	}
	src, dst := nodes[voter[from]-1], nodes[voter[to]-1]

	work := t.TempDir()
	content := writeRandom(t, filepath.Join(work, "patch.bin"), 1<<20)
	tally := func(n *cnode, stdin string, args ...string) string {
		t.Helper()
		return tallyThrough(t, n, work, stdin, args...)
	}
	tally(src, `{"claim":"C17","respondent":"parser","work":"w","slots":[{"name":"change","mode":"required","checks":[{"id":"behavior","validator":{"name":"command","version":"1"},"evaluator":"maintainer","mode":"required","attempts":2}]}]}`,
		"claim", "create", "-", "--as", maintainer, "--request-id", "create")
	tally(src, "", "claim", "post", "C17", "--as", maintainer, "--request-id", "post")
	tally(src, "", "receipt", "acquire", "C17", "--as", parser, "--request-id", "receipt")
	tally(src, "", "artifact", "put", "patch.bin", "--claim", "C17", "--slot", "change", "--generation", "1", "--id", "patch-a", "--as", parser, "--request-id", "put")
	held := func(n *cnode, group uint64, by uint64) bool {
		show := run(t, runOpts{env: []string{"TALLY_URL=" + n.url()}}, "claim", "show", "C17", "--session", "acme/parser")
		return show.code == 0 && regexp.MustCompile(fmt.Sprintf(`patch-a +group %d, epoch \d+ +held by node %d +whole`, group, by)).MatchString(show.out)
	}
	waitUntil(t, "the source's custody receipt", 60*time.Second, func() bool { return held(src, from, src.id) })
	if got := hashFile(dst.objectPath(content)); got != "" {
		t.Fatalf("node %d holds the bytes before the move", dst.id)
	}
	return artifactMove{src: src, dst: dst, from: from, to: to, content: content, work: work, tally: tally}

}

// An aborted move's destination records: a session with an artifact
// moves to a group on another node, whose node fetches and receipts the
// bytes at the install; the move is held at proven (a fault in every
// node's mover) and aborted. The drop removes the content records the
// install made there, so that node's collection (a grace of 1 s here)
// removes its copy; the source's node keeps its own, its records naming
// it, and the artifact reads whole.
func TestClusterMoveAbortedDropsItsContent(t *testing.T) {
	dir := t.TempDir()
	var nodes []*cnode
	for i, z := range []string{"a", "b", "c"} {
		join := []string{"--bootstrap", "--replicas", "1"}
		if i > 0 {
			join = []string{"--join", nodes[0].addr}
		}
		n := newCNode(t, dir, uint64(i+1), join...)
		n.extra = []string{"--zone", z, "--raft-tick", "50ms", "--spread=false", "--collect-grace", "1s", "--collect-every", "1s"}
		n.env = []string{"TALLY_FAULT_HOLD_MOVES=1"}
		n.start(t)
		nodes = append(nodes, n)
	}
	am := artifactToMove(t, nodes)
	secret := secretEnv()
	if r := run(t, secret, "cluster", "move", "acme/parser", "--group", fmt.Sprint(am.to), "--node", am.src.addr, "--wait", "0"); r.code != 0 {
		t.Fatalf("move: %v", r)
	}
	waitUntil(t, "the move proven, the destination's node holding the bytes", 60*time.Second, func() bool {
		r := run(t, secret, "cluster", "moves", "--node", am.src.addr, "--json")
		var doc cluster.Moves
		return r.code == 0 && json.Unmarshal([]byte(r.out), &doc) == nil && len(doc.Moves) == 1 && doc.Moves[0].Step == replica.MoveProven &&
			hashFile(am.dst.objectPath(am.content)) == am.content
	})
	if r := run(t, secret, "cluster", "move", "acme/parser", "--abort", "--node", am.dst.addr); r.code != 0 {
		t.Fatalf("abort: %v", r)
	}
	waitUntil(t, "the move unwound", 30*time.Second, func() bool {
		r := run(t, secret, "cluster", "moves", "--node", am.src.addr, "--json")
		var doc cluster.Moves
		return r.code == 0 && json.Unmarshal([]byte(r.out), &doc) == nil && len(doc.Moves) == 1 && doc.Moves[0].Unwound
	})
	waitUntil(t, "the destination's node to collect its copy", 30*time.Second, func() bool {
		return hashFile(am.dst.objectPath(am.content)) == ""
	})
	if hashFile(am.src.objectPath(am.content)) != am.content {
		t.Fatalf("the source's node lost its copy")
	}
	got := filepath.Join(am.work, "got.bin")
	am.tally(am.dst, "", "artifact", "get", "patch-a", "--claim", "C17", "-o", got)
	if hashFile(got) != am.content {
		t.Fatal("the artifact read after the abort is not the bytes put")
	}
}
