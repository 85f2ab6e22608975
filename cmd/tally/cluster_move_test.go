package main

// Moving a session between data groups across real processes: refusals
// with nothing changed; a session with records moved while writers write
// to it and to another session, every acknowledged write then present
// once, the chain whole on every node, a retry after the move answered
// as before; an abort; the destination's nodes killed mid-move.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tally/cluster"
	"tally/cluster/replica"
	"tally/store"
)

// The size of TestClusterMove: the records the session holds before its
// move (the 100,000 with -move.records 100000) and the writers
// writing to it and to another session during the move (64).
var (
	moveRecords = flag.Int("move.records", 200, "records the moving session holds before TestClusterMove moves it")
	moveWriters = flag.Int("move.writers", 4, "writers to each of the two sessions during TestClusterMove's move")
	moveCopied  = flag.Int("move.copied", 100, "records of the session TestClusterMoveAborted moves between two nodes")
)

// moveWriter writes promises to session through the nodes in turn, each
// under its own key, sending a write again (same key) on a 503, until
// stop; it records each acknowledged key with its sequence.
func moveWriter(nodes []*cnode, session, prefix string, stop *atomic.Bool, mu *sync.Mutex, acked map[string]uint64, wg *sync.WaitGroup) {
	timedWriter(nodes, session, prefix, stop, mu, acked, nil, wg)
}

// latencies are acknowledged writes' start instants and durations (the
// retries of a write included in its duration).
type latencies struct {
	mu   sync.Mutex
	at   []time.Time
	took []time.Duration
}

func (l *latencies) add(at time.Time, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at, l.took = append(l.at, at), append(l.took, took)
}

// p99 is the 99th percentile of the writes begun in [from, to), and how
// many there were.
func (l *latencies) p99(from, to time.Time) (time.Duration, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var in []time.Duration
	for i, at := range l.at {
		if !at.Before(from) && at.Before(to) {
			in = append(in, l.took[i])
		}
	}
	if len(in) == 0 {
		return 0, 0
	}
	slices.Sort(in)
	return in[min(len(in)-1, len(in)*99/100)], len(in)
}

// timedWriter is moveWriter recording each acknowledged write's latency
// in lat (when not nil).
func timedWriter(nodes []*cnode, session, prefix string, stop *atomic.Bool, mu *sync.Mutex, acked map[string]uint64, lat *latencies, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 0; !stop.Load(); i++ {
		key := fmt.Sprintf("%s-%d", prefix, i)
		t0 := time.Now()
		for try := 0; try < 100; try++ {
			code, seq, _ := declareText(nodes[(i+try)%len(nodes)].addr, session, key, key)
			if code == http.StatusCreated || code == http.StatusOK {
				mu.Lock()
				acked[key] = seq
				mu.Unlock()
				if lat != nil {
					lat.add(t0, time.Since(t0))
				}
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// rawRead reads a session's log's first length bytes from node n's
// replica of group, over the move-fetch route a move's copy takes: the
// raw copy between two processes a move is measured against.
func rawRead(t *testing.T, n *cnode, group uint64, session string, length uint64) (int64, time.Duration) {
	t.Helper()
	target, err := cluster.ReadTarget(t.Context(), n.url())
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	fetch := cluster.Sign(clusterSecret, target,
		cluster.MoveFetchRequest{Group: group, Tenant: "acme", Session: session, To: int64(length)})
	body, _ := json.Marshal(fetch)
	res, err := http.Post(n.url()+cluster.MoveFetchPath, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return got, time.Since(t0)
}

// holdsGroup reports whether, as node ask has applied the meta group,
// node id holds a replica of group.
// spreadWatch follows the data groups' voters, one each, as a test waits
// for the placement driver's spreading to end rather than to begin.
type spreadWatch struct {
	last  map[uint64]uint64 // data group → its voter, as last seen
	since time.Time         // when last changed
}

// settled reports whether st's data groups are spread over the nodes so
// that the driver moves none for their count (no node holds two more
// than another), unchanged for 2 s.
func (w *spreadWatch) settled(st cluster.Status, nodes int) bool {
	voters := map[uint64]uint64{}
	per := map[uint64]int{}
	for _, g := range st.Placement.Groups {
		if g.Group != 1 && len(g.Voters) > 0 {
			voters[g.Group] = g.Voters[0].ID
			per[g.Voters[0].ID]++
		}
	}
	if !maps.Equal(voters, w.last) {
		w.last, w.since = voters, time.Now()
		return false
	}
	lo, hi := len(voters), 0
	for id := uint64(1); id <= uint64(nodes); id++ {
		lo, hi = min(lo, per[id]), max(hi, per[id])
	}
	return hi-lo < 2 && time.Since(w.since) >= 2*time.Second
}

// voterOf is the node of group's first voter as ask's status reports it,
// or otherwise when the status cannot be read.
func voterOf(ask *cnode, group, otherwise uint64) uint64 {
	st, err := clusterStatus(ask.addr)
	if err != nil {
		return otherwise
	}
	for _, g := range st.Placement.Groups {
		if g.Group == group && len(g.Voters) > 0 {
			return g.Voters[0].ID
		}
	}
	return otherwise
}

func holdsGroup(ask *cnode, id, group uint64) bool {
	st, err := clusterStatus(ask.addr)
	if err != nil {
		return false
	}
	for _, g := range st.Placement.Groups {
		if g.Group == group {
			return slices.ContainsFunc(append(slices.Clone(g.Voters), g.Learners...), func(r cluster.NodeRef) bool { return r.ID == id })
		}
	}
	return false
}

// bigMove: TALLY_E2E_BIG=1 runs TestClusterMove and TestClusterMoveAborted
// at the size (100,000 records, 64 writers to each session)
// unless the flags say otherwise.
func bigMove() {
	if os.Getenv("TALLY_E2E_BIG") != "1" {
		return
	}
	if *moveRecords == 200 {
		*moveRecords = 100000
	}
	if *moveWriters == 4 {
		*moveWriters = 64
	}
	if *moveCopied == 100 {
		*moveCopied = 100000
	}
}

// handMoved sets a node up for a test that moves sessions itself: the
// driver does not spread sessions on its own (--spread=false), so a move
// the test asks for is never refused as one the driver began.
func handMoved(n *cnode) { n.extra = append(n.extra, "--spread=false") }

func TestClusterMove(t *testing.T) {
	bigMove()
	nodes := startClusterWith(t, t.TempDir(), handMoved)
	secret := secretEnv()
	from := replica.GroupOf(cluster.DefaultGroups, "acme", "moving")
	to := from%uint64(cluster.DefaultGroups) + 2
	// Records before the move, one kept to be retried after it.
	var firstSeq uint64
	code, firstSeq, resp := declareText(nodes[0].addr, "moving", "before-0", "before 0")
	if code != http.StatusCreated {
		t.Fatalf("first write: %d %s", code, resp)
	}
	var fill sync.WaitGroup
	for w := range 16 {
		fill.Add(1)
		go func() {
			defer fill.Done()
			for i := 1 + w; i < *moveRecords; i += 16 {
				if code, _, resp := declareText(nodes[i%3].addr, "moving", fmt.Sprintf("before-%d", i), fmt.Sprintf("before %d", i)); code != http.StatusCreated {
					t.Errorf("write %d: %d %s", i, code, resp)
					return
				}
			}
		}()
	}
	fill.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Other sessions, one in each of the two groups, whose writes' p99
	// during the move is measured against before it.
	other, otherTo := sessionOf("other", from), sessionOf("otherto", to)
	for _, s := range []string{other, otherTo} {
		if code, _, resp := declareText(nodes[0].addr, s, s+"-0", s+" 0"); code != http.StatusCreated {
			t.Fatalf("write to acme/%s: %d %s", s, code, resp)
		}
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
	acked, ackedOther, ackedOtherTo := map[string]uint64{}, map[string]uint64{}, map[string]uint64{}
	var lat latencies
	var wg sync.WaitGroup
	for w := range *moveWriters {
		wg.Add(3)
		go moveWriter(nodes, "moving", fmt.Sprintf("w%d", w), &stop, &mu, acked, &wg)
		go timedWriter(nodes, other, fmt.Sprintf("o%d", w), &stop, &mu, ackedOther, &lat, &wg)
		go timedWriter(nodes, otherTo, fmt.Sprintf("p%d", w), &stop, &mu, ackedOtherTo, &lat, &wg)
	}
	base := time.Now()
	time.Sleep(2 * time.Second) // writes under way before the move: the p99 without one
	moveAt := time.Now()
	r := run(t, secret, "cluster", "move", "acme/moving", "--group", fmt.Sprint(to), "--node", nodes[1].addr, "--json")
	movedAt := time.Now()
	var mv replica.Move
	if err := json.Unmarshal([]byte(r.out), &mv); r.code != 0 || err != nil {
		stop.Store(true)
		wg.Wait()
		t.Fatalf("move: %v (%v)", r, err)
	}
	if mv.Step != replica.MoveActivated && mv.Step != replica.MoveRetired || mv.From != from || mv.To != to || mv.Seq < uint64(*moveRecords) || mv.Epoch != 0 {
		t.Errorf("move: %+v", mv)
	}
	time.Sleep(500 * time.Millisecond) // writes after the move
	stop.Store(true)
	wg.Wait()
	took := time.Duration(mv.Activated - mv.Began)
	n, raw := rawRead(t, nodes[0], to, "moving", mv.Length)
	t.Logf("move: %d bytes begun to activated in %s (%.1f MB/s); a raw read of %d bytes of it between two processes %s (%.1f MB/s): %.2fx",
		mv.Length, took, float64(mv.Length)/took.Seconds()/1e6, n, raw, float64(n)/raw.Seconds()/1e6, raw.Seconds()/took.Seconds())
	without, nWithout := lat.p99(base, moveAt)
	during, nDuring := lat.p99(moveAt, movedAt)
	t.Logf("other sessions' write p99 (groups %d and %d): %s without a move (%d writes), %s during it (%d writes): %.2fx",
		from, to, without, nWithout, during, nDuring, float64(during)/float64(max(without, 1)))
	t.Logf("move %d: %d records (%d bytes) at the fence, %d copied before it; begun to activated %s, fenced %s; %d writes acknowledged to the moving session, %d to the other",
		mv.ID, mv.Seq, mv.Length, mv.Bytes, time.Duration(mv.Activated-mv.Began), time.Duration(mv.Activated-mv.Fenced), len(acked), len(ackedOther)+len(ackedOtherTo))
	if len(acked) == 0 || len(ackedOther) == 0 || len(ackedOtherTo) == 0 {
		t.Fatalf("acknowledged writes: %d to the moving session, %d to the other", len(acked), len(ackedOther))
	}

	// The move retires; the directory names the new group at epoch 1.
	waitUntil(t, "the move retired", 30*time.Second, func() bool {
		r := run(t, secret, "cluster", "moves", "--node", nodes[0].addr, "--json")
		var doc cluster.Moves
		return r.code == 0 && json.Unmarshal([]byte(r.out), &doc) == nil && len(doc.Moves) >= 1 && doc.Moves[0].Step == replica.MoveRetired
	})
	if r := run(t, secret, "cluster", "moves", "--node", nodes[2].addr); r.code != 0 || !strings.Contains(r.out, "acme/moving") || !strings.Contains(r.out, "retired") {
		t.Errorf("moves: %v", r)
	}
	// (The driver may spread the other sessions since: the first move is
	// the one asked for.)
	if st, err := clusterStatus(nodes[1].addr); err != nil || len(st.Moves) < 1 || st.Moves[0].Step != replica.MoveRetired {
		t.Errorf("status: the moves %+v (%v)", st.Moves, err)
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
	for name, keys := range map[string]map[string]uint64{"moving": acked, other: ackedOther, otherTo: ackedOtherTo} {
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
	// (Node 1's view of the group's commit follows the leader's next
	// message: asked at once on a loaded machine it may not have moved.)
	waitUntil(t, fmt.Sprintf("the write after the move committed in group %d", to), 10*time.Second, func() bool {
		gs, _ := groupStatus(nodes[0], to)
		return gs.Commit > before
	})
}

// Three nodes, one voter a data group: a move to a group whose only node
// is killed stalls before its fence; the operator aborts it and the
// session takes writes as before. A second move there, left alone, is
// aborted by the mover once it made no step for MoveStallMax, and the
// source serves the session's writes again.
func TestClusterMoveAborted(t *testing.T) {
	bigMove()
	nodes := startPlacedWith(t, t.TempDir(), []string{"a", "b", "c"}, []string{"--spread=false"}, "--replicas", "1")
	var st cluster.Status
	var spread spreadWatch
	waitUntil(t, "every data group at 1 voter, spread over the nodes", 90*time.Second, func() bool {
		var ok bool
		if st, ok = placedAt(nodes[0], 1); !ok {
			return false
		}
		per := map[uint64]int{}
		for _, g := range st.Placement.Groups {
			if g.Group != 1 {
				per[g.Voters[0].ID]++
			}
		}
		return per[1] >= 2 && per[2] >= 2 && per[3] >= 2 && spread.settled(st, 3)
	})
	on := map[uint64][]uint64{} // node → its data groups
	for _, g := range st.Placement.Groups {
		if g.Group != 1 {
			on[g.Voters[0].ID] = append(on[g.Voters[0].ID], g.Group)
		}
	}
	var dead uint64
	for id, gs := range on {
		if len(gs) >= 2 && (dead == 0 || id > dead) {
			dead = id
		}
	}
	if dead == 0 {
		t.Fatalf("no node holds two data groups: %v", on)
	}
	var src, srcNode, third uint64
	for id, gs := range on {
		if id != dead && len(gs) > 0 {
			src, srcNode = gs[0], id
		}
	}
	for _, n := range nodes {
		if n.id != dead && n.id != srcNode {
			third = n.id
		}
	}
	if len(on[third]) == 0 {
		t.Fatalf("node %d holds no data group: %v", third, on)
	}
	session := sessionOf("moving", src)
	var live []*cnode
	for _, n := range nodes {
		if n.id != dead {
			live = append(live, n)
		}
	}
	for i := range 50 {
		if !placedWrite(live[i%2].addr, session, fmt.Sprintf("before-%d", i)) {
			t.Fatalf("write %d to %s", i, session)
		}
	}
	secret := secretEnv()

	// A move between two nodes: the destination's node copies the log
	// from the source's, and the source's drops it once retired.
	copied := sessionOf("copied", src)
	var fill sync.WaitGroup
	var failed atomic.Bool
	for w := range 16 {
		fill.Add(1)
		go func() {
			defer fill.Done()
			for i := w; i < *moveCopied; i += 16 {
				if !placedWrite(live[i%2].addr, copied, fmt.Sprintf("before-%d", i)) {
					failed.Store(true)
					return
				}
			}
		}()
	}
	fill.Wait()
	if failed.Load() {
		t.Fatalf("writes to %s", copied)
	}
	dest := on[third][0]
	// Other sessions in both groups, written while the log is copied:
	// their p99 during the move against before it.
	var lat latencies
	var stopOthers atomic.Bool
	var others sync.WaitGroup
	for w := range *moveWriters {
		for _, o := range []struct{ addr, session string }{{nodes[srcNode-1].addr, sessionOf("near", src)}, {nodes[third-1].addr, sessionOf("far", dest)}} {
			others.Add(1)
			go func() {
				defer others.Done()
				for i := 0; !stopOthers.Load(); i++ {
					t0 := time.Now()
					if placedWrite(o.addr, o.session, fmt.Sprintf("w%d-%d", w, i)) {
						lat.add(t0, time.Since(t0))
					}
				}
			}()
		}
	}
	base := time.Now()
	time.Sleep(2 * time.Second)
	moveAt := time.Now()
	r := run(t, secret, "cluster", "move", "acme/"+copied, "--group", fmt.Sprint(dest), "--node", nodes[dead-1].addr, "--json")
	movedAt := time.Now()
	stopOthers.Store(true)
	others.Wait()
	without, nWithout := lat.p99(base, moveAt)
	during, nDuring := lat.p99(moveAt, movedAt)
	t.Logf("other sessions' write p99 (groups %d and %d, nodes %d and %d): %s without a move (%d writes), %s during it (%d writes): %.2fx",
		src, dest, srcNode, third, without, nWithout, during, nDuring, float64(during)/float64(max(without, 1)))
	var mv replica.Move
	if err := json.Unmarshal([]byte(r.out), &mv); r.code != 0 || err != nil || mv.From != src || mv.To != dest || mv.Step == replica.MoveAborted {
		t.Fatalf("move to node %d: %v", third, r)
	}
	// Against a raw copy of the log between two processes: the same bytes
	// read from the destination's node over the same route.
	// (The driver may have moved the destination group's replica to
	// another node since the test chose it, to even out replicas or
	// bytes: the read asks whichever node holds it now.)
	var n int64
	var raw time.Duration
	waitUntil(t, "a raw read of the moved log at the destination group's node", 20*time.Second, func() bool {
		n, raw = rawRead(t, nodes[voterOf(nodes[0], dest, third)-1], dest, copied, mv.Length)
		return n == int64(mv.Length)
	})
	took := time.Duration(mv.Activated - mv.Began)
	t.Logf("moved %d records, %d bytes between two nodes: begun to activated %s (%.1f MB/s), fenced %s; a raw read of the same %d bytes between two processes %s (%.1f MB/s)",
		mv.Seq, mv.Length, took, float64(mv.Length)/took.Seconds()/1e6, time.Duration(mv.Activated-mv.Fenced), n, raw, float64(n)/raw.Seconds()/1e6)
	if n != int64(mv.Length) {
		t.Errorf("raw read: %d bytes of %d", n, mv.Length)
	}
	// (Unless the placement driver has since put a replica of the
	// destination group on the source's node, to even out the bytes, or
	// taken the source group's replica off it: a node out of a group
	// keeps what it held, docs/CLUSTER.md "Known limits".)
	waitUntil(t, "the source's copy dropped", 30*time.Second, func() bool {
		_, held := nodeLogs(t, nodes[srcNode-1])["acme/"+copied]
		return !held || holdsGroup(nodes[0], srcNode, dest) || !holdsGroup(nodes[0], srcNode, src)
	})
	var lines, at int
	waitUntil(t, "the destination group's node holding the moved log", 20*time.Second, func() bool {
		at = int(voterOf(nodes[0], dest, third))
		lines = strings.Count(string(nodeLogs(t, nodes[at-1])["acme/"+copied]), "\n")
		return lines >= *moveCopied
	})
	if !placedWrite(live[0].addr, copied, "after") {
		t.Error("a write after the move between nodes")
	}
	if code, got := readPlaced(nodes[srcNode-1].addr, copied); code != http.StatusOK || len(got) != *moveCopied+1 {
		t.Errorf("read through the source's node: %d, %d promises, want %d", code, len(got), *moveCopied+1)
	}

	// The driver may have moved groups since (it spreads them by their
	// bytes): read which the node holds just before it dies.
	var deadGroups []uint64
	waitUntil(t, "the node to kill holding two data groups, the session's not among them", 30*time.Second, func() bool {
		st, ok := placedAt(nodes[0], 1)
		if !ok {
			return false
		}
		deadGroups = nil
		for _, g := range st.Placement.Groups {
			if g.Group != 1 && g.Voters[0].ID == dead {
				if g.Group == src {
					return false
				}
				deadGroups = append(deadGroups, g.Group)
			}
		}
		return len(deadGroups) >= 2
	})
	nodes[dead-1].kill9()

	// The operator's abort.
	r = run(t, secret, "cluster", "move", "acme/"+session, "--group", fmt.Sprint(deadGroups[0]), "--wait", "0", "--node", live[0].addr)
	if r.code != 0 || !strings.Contains(r.out, "begun") {
		t.Fatalf("move to the dead node's group: %v", r)
	}
	if r := run(t, secret, "cluster", "move", "acme/"+session, "--group", fmt.Sprint(deadGroups[1]), "--node", live[1].addr); r.code != 1 || !strings.Contains(r.err, "is moving already") {
		t.Errorf("a second move: %v", r)
	}
	r = run(t, secret, "cluster", "move", "acme/"+session, "--abort", "--node", live[1].addr)
	if r.code != 0 || !strings.Contains(r.out, "aborted (aborted by the operator)") {
		t.Fatalf("abort: %v", r)
	}
	// (The move's id is the one the first abort named: the driver may
	// have moved other sessions since the first move.)
	first := strings.SplitN(r.out, " aborted", 2)[0]
	if r := run(t, secret, "cluster", "move", "acme/"+session, "--abort", "--node", live[1].addr); r.code != 0 || !strings.HasPrefix(r.out, first+" aborted") || !strings.HasPrefix(first, "move ") {
		t.Errorf("abort again (answered as the first): %v", r)
	}
	waitUntil(t, "a write after the abort", 10*time.Second, func() bool { return placedWrite(live[0].addr, session, "after-abort") })

	// The mover's abort, MoveStallMax after its last step.
	start := time.Now()
	r = run(t, secret, "cluster", "move", "acme/"+session, "--group", fmt.Sprint(deadGroups[1]), "--node", live[0].addr)
	if r.code != 1 || !strings.Contains(r.err, "was aborted: no step for 10s") {
		t.Fatalf("move left to stall: %v", r)
	}
	waitUntil(t, "a write after the mover's abort", 5*time.Second, func() bool { return placedWrite(live[1].addr, session, "after-timeout") })
	t.Logf("the stalled move aborted and the source serving after %s", time.Since(start).Round(time.Millisecond))
	if d := time.Since(start); d > cluster.MoveStallMax+15*time.Second {
		t.Errorf("the source served again after %s", d)
	}
	// An abort's unfence is the mover's next step, taken after the abort
	// is answered: wait for it.
	// (Only this test's moves: the driver may have moved other sessions.)
	var doc cluster.Moves
	var copiedMove replica.Move
	var abortedMoves []replica.Move
	waitUntil(t, "every aborted move unfenced", 30*time.Second, func() bool {
		r = run(t, secret, "cluster", "moves", "--node", live[0].addr, "--json")
		doc = cluster.Moves{}
		if err := json.Unmarshal([]byte(r.out), &doc); r.code != 0 || err != nil {
			return false
		}
		abortedMoves = abortedMoves[:0]
		for _, mv := range doc.Moves {
			switch mv.Session {
			case copied:
				copiedMove = mv
			case session:
				abortedMoves = append(abortedMoves, mv)
			}
		}
		return len(abortedMoves) == 2 && !slices.ContainsFunc(abortedMoves, func(mv replica.Move) bool { return !mv.Unfenced })
	})
	if mv := copiedMove; mv.Session != copied || mv.Step != replica.MoveRetired {
		t.Errorf("move %d: %+v", mv.ID, mv)
	}
	for _, mv := range abortedMoves {
		if mv.Step != replica.MoveAborted || !mv.Unfenced || mv.Unwound {
			t.Errorf("move %d: %+v", mv.ID, mv)
		}
	}
	if r := run(t, secret, "cluster", "placements", "--node", live[1].addr); r.code != 0 || strings.Contains(r.out, session) {
		t.Errorf("placements after the aborts: %v", r)
	}
	code, got := readPlaced(live[1].addr, session)
	if code != http.StatusOK || len(got) != 52 {
		t.Errorf("read after the aborts: %d, %d promises, want 52", code, len(got))
	}
}

// The mover is killed mid-move: the meta group's leader, which carries
// the move, is killed with SIGKILL right after the move began; the next
// leader carries it on from the step recorded, to its retirement, and no
// acknowledged write is lost.
func TestClusterMoveMoverKilled(t *testing.T) {
	nodes := startClusterWith(t, t.TempDir(), handMoved)
	secret := secretEnv()
	from := replica.GroupOf(cluster.DefaultGroups, "acme", "moving")
	to := from%uint64(cluster.DefaultGroups) + 2
	for i := range 100 {
		if code, _, resp := declareText(nodes[i%3].addr, "moving", fmt.Sprintf("before-%d", i), fmt.Sprintf("before-%d", i)); code != http.StatusCreated {
			t.Fatalf("write %d: %d %s", i, code, resp)
		}
	}
	mover := leaderOf(t, nodes, nodes[0], 1)
	var ask *cnode
	for _, n := range nodes {
		if n != mover {
			ask = n
		}
	}
	if r := run(t, secret, "cluster", "move", "acme/moving", "--group", fmt.Sprint(to), "--wait", "0", "--node", ask.addr); r.code != 0 {
		t.Fatalf("move: %v", r)
	}
	mover.kill9()
	var live []*cnode
	for _, n := range nodes {
		if n != mover {
			live = append(live, n)
		}
	}
	var mv replica.Move
	waitUntil(t, "the move retired by the next leader", 60*time.Second, func() bool {
		r := run(t, secret, "cluster", "moves", "--node", ask.addr, "--json")
		var doc cluster.Moves
		if r.code != 0 || json.Unmarshal([]byte(r.out), &doc) != nil || len(doc.Moves) != 1 {
			return false
		}
		mv = doc.Moves[0]
		return mv.Step == replica.MoveRetired || mv.Step == replica.MoveAborted
	})
	if mv.Step != replica.MoveRetired || mv.To != to {
		t.Fatalf("the move ended %+v", mv)
	}
	for i, n := range live {
		if code, _, resp := declareText(n.addr, "moving", fmt.Sprintf("after-%d", i), fmt.Sprintf("after-%d", i)); code != http.StatusCreated {
			t.Fatalf("write after through node %d: %d %s", n.id, code, resp)
		}
	}
	code, got := listPromises(live[0].addr, "moving")
	if code != http.StatusOK || len(got) != 102 {
		t.Fatalf("read: %d, %d promises, want 102", code, len(got))
	}
	// The live nodes hold the same log of it, whole.
	read := func(n *cnode) []byte {
		sd, _ := store.SessionDir(filepath.Join(n.data, "ledger"), "acme", "moving")
		b, _ := os.ReadFile(store.LogPath(sd))
		return b
	}
	waitUntil(t, "the live nodes holding the same log", 30*time.Second, func() bool {
		a, b := read(live[0]), read(live[1])
		return len(a) > 0 && bytes.Equal(a, b) && bytes.Count(a, []byte("after-1")) > 0
	})
	for _, n := range live {
		nodeLogs(t, n)
	}
}
