package main

// Moving a session between data groups across real processes: refusals
// with nothing changed; a session with records moved while writers write
// to it and to another session, every acknowledged write then present
// once, the chain whole on every node, a retry after the move answered
// as before; an abort; the destination's nodes killed mid-move.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tally/cluster"
	"tally/cluster/replica"
)

// moveWriter writes promises to session through the nodes in turn, each
// under its own key, sending a write again (same key) on a 503, until
// stop; it records each acknowledged key with its sequence.
func moveWriter(nodes []*cnode, session, prefix string, stop *atomic.Bool, mu *sync.Mutex, acked map[string]uint64, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 0; !stop.Load(); i++ {
		key := fmt.Sprintf("%s-%d", prefix, i)
		for try := 0; try < 100; try++ {
			code, seq, _ := declareText(nodes[(i+try)%len(nodes)].addr, session, key, key)
			if code == http.StatusCreated || code == http.StatusOK {
				mu.Lock()
				acked[key] = seq
				mu.Unlock()
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func TestClusterMove(t *testing.T) {
	nodes := startCluster(t, t.TempDir())
	secret := secretEnv()
	from := replica.GroupOf(cluster.DefaultGroups, "acme", "moving")
	to := from%uint64(cluster.DefaultGroups) + 2
	// Records before the move, one kept to be retried after it.
	var firstSeq uint64
	for i := range 200 {
		code, seq, resp := declareText(nodes[i%3].addr, "moving", fmt.Sprintf("before-%d", i), fmt.Sprintf("before %d", i))
		if code != http.StatusCreated {
			t.Fatalf("write %d: %d %s", i, code, resp)
		}
		if i == 0 {
			firstSeq = seq
		}
	}
	if code, _, resp := declareText(nodes[0].addr, "other", "other-0", "other 0"); code != http.StatusCreated {
		t.Fatalf("write to acme/other: %d %s", code, resp)
	}

	// Refused, with nothing changed.
	for _, c := range []struct {
		args []string
		env  runOpts
		exit int
		err  string
	}{
		{[]string{"acme/moving"}, secret, 2, "group: required"},
		{[]string{"acme/moving", "--group", "42"}, secret, 2, "group: 42 is not a data group of this cluster: its data groups are 2 to 9"},
		{[]string{"acme/moving", "--group", fmt.Sprint(from)}, secret, 1, fmt.Sprintf("session acme/moving is in group %d already", from)},
		{[]string{"acme/ghost", "--group", fmt.Sprint(replica.GroupOf(cluster.DefaultGroups, "acme", "ghost")%uint64(cluster.DefaultGroups) + 2)}, secret, 1, "no session acme/ghost in group"},
		{[]string{"acme/moving", "--abort"}, secret, 1, "no move of acme/moving is in progress"},
		{[]string{"acme/moving", "--group", fmt.Sprint(to)}, runOpts{env: []string{"TALLY_JOIN_SECRET=another secret of some length"}}, 1, "move: the request is not signed with this cluster's join secret"},
		{[]string{"acme/moving", "--group", fmt.Sprint(to)}, runOpts{}, 2, "join-secret: required"},
	} {
		r := run(t, c.env, append([]string{"cluster", "move", "--node", nodes[1].addr}, c.args...)...)
		if r.code != c.exit || !strings.Contains(r.err, c.err) {
			t.Errorf("move %q: exit %d, stderr %q; want %d with %q", c.args, r.code, r.err, c.exit, c.err)
		}
	}
	if r := run(t, secret, "cluster", "moves", "--node", nodes[2].addr); r.code != 0 || !strings.Contains(r.out, "no moves") {
		t.Fatalf("moves after the refusals: %v", r)
	}

	// Writers to the moving session and to another, through every node.
	var stop atomic.Bool
	var mu sync.Mutex
	acked, ackedOther := map[string]uint64{}, map[string]uint64{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(2)
		go moveWriter(nodes, "moving", fmt.Sprintf("w%d", w), &stop, &mu, acked, &wg)
		go moveWriter(nodes, "other", fmt.Sprintf("o%d", w), &stop, &mu, ackedOther, &wg)
	}
	time.Sleep(300 * time.Millisecond) // writes under way before the move
	r := run(t, secret, "cluster", "move", "acme/moving", "--group", fmt.Sprint(to), "--node", nodes[1].addr, "--json")
	var mv replica.Move
	if err := json.Unmarshal([]byte(r.out), &mv); r.code != 0 || err != nil {
		stop.Store(true)
		wg.Wait()
		t.Fatalf("move: %v (%v)", r, err)
	}
	if mv.Step != replica.MoveActivated && mv.Step != replica.MoveRetired || mv.From != from || mv.To != to || mv.Seq < 200 || mv.Epoch != 0 {
		t.Errorf("move: %+v", mv)
	}
	time.Sleep(500 * time.Millisecond) // writes after the move
	stop.Store(true)
	wg.Wait()
	t.Logf("move %d: %d records at the fence, fenced %s; %d writes acknowledged to the moving session, %d to the other",
		mv.ID, mv.Seq, time.Duration(mv.Activated-mv.Fenced), len(acked), len(ackedOther))
	if len(acked) == 0 || len(ackedOther) == 0 {
		t.Fatalf("acknowledged writes: %d to the moving session, %d to the other", len(acked), len(ackedOther))
	}

	// The move retires; the directory names the new group at epoch 1.
	waitUntil(t, "the move retired", 30*time.Second, func() bool {
		r := run(t, secret, "cluster", "moves", "--node", nodes[0].addr, "--json")
		var doc cluster.Moves
		return r.code == 0 && json.Unmarshal([]byte(r.out), &doc) == nil && len(doc.Moves) == 1 && doc.Moves[0].Step == replica.MoveRetired
	})
	if r := run(t, secret, "cluster", "moves", "--node", nodes[2].addr); r.code != 0 || !strings.Contains(r.out, "acme/moving") || !strings.Contains(r.out, "retired") {
		t.Errorf("moves: %v", r)
	}
	if r := run(t, secret, "cluster", "placements", "--node", nodes[2].addr); r.code != 0 || !strings.Contains(r.out, fmt.Sprintf("acme/moving  %d", to)) {
		t.Errorf("placements: %v", r)
	}
	if r := run(t, secret, "cluster", "move", "acme/moving", "--group", fmt.Sprint(to), "--node", nodes[0].addr); r.code != 1 || !strings.Contains(r.err, fmt.Sprintf("session acme/moving is in group %d already", to)) {
		t.Errorf("move again: %v", r)
	}

	// Every acknowledged write is there once, in one chain, the same on
	// every node; the retry of the first write answers its sequence.
	waitCaughtUp(t, nodes)
	logs := sameLogs(t, nodes)
	for name, keys := range map[string]map[string]uint64{"moving": acked, "other": ackedOther} {
		code, got := listPromises(nodes[0].addr, name)
		if code != http.StatusOK {
			t.Fatalf("list %s: %d", name, code)
		}
		count := map[string]int{}
		for _, text := range got {
			count[text]++
		}
		for key := range keys {
			if count[key] != 1 {
				t.Errorf("%s: acknowledged write %s present %d times", name, key, count[key])
			}
		}
	}
	if len(logs["acme/moving"]) == 0 {
		t.Fatal("no log of acme/moving")
	}
	for _, n := range nodes {
		code, seq, resp := declareText(n.addr, "moving", "before-0", "before 0")
		if (code != http.StatusCreated && code != http.StatusOK) || seq != firstSeq {
			t.Errorf("retry through node %d: %d seq %d (want %d) %s", n.id, code, seq, firstSeq, resp)
		}
	}
	gs, _ := groupStatus(nodes[0], to)
	before := gs.Commit
	if code, _, resp := declareText(nodes[2].addr, "moving", "after", "after"); code != http.StatusCreated {
		t.Fatalf("write after: %d %s", code, resp)
	}
	if gs, _ := groupStatus(nodes[0], to); gs.Commit <= before {
		t.Errorf("a write after the move did not commit in group %d", to)
	}
}
