package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"tally/cluster"
	"tally/cluster/model"
	"tally/cluster/replica"
	"tally/internal/poll"
	"tally/internal/proctest"
	"tally/store"
)

// cnode is one `tally serve --cluster` process under test.
type cnode struct {
	id               uint64
	raft, addr, data string
	// gossip is its --gossip-addr: given, since the default (the raft
	// port + 1) may be a port another node here was given.
	gossip   string
	joinArgs []string
	// secure runs the node with tokens (without --insecure-dev); operator
	// is then the first admin token, which the helpers read status with.
	secure   bool
	operator string
	extra    []string // more serve flags
	env      []string // more environment (a fault-injection switch)
	// restored: the node starts on data tally restore made, which gives
	// it its id and addresses; only the data and the secret are passed.
	restored bool
	cmd      *exec.Cmd
	exited   chan struct{}
	rebinds  int // fresh starts after a lost port race
	mu       sync.Mutex
	stderr   bytes.Buffer
	stdout   []string // the lines the node printed, every run
	// logBytes and logLines count what it wrote on stderr, every run.
	logBytes, logLines int
}

func (n *cnode) url() string { return "http://" + n.addr }

const clusterSecret = "e2e-join-secret-0123456789"

func newCNode(t *testing.T, dir string, id uint64, join ...string) *cnode {
	return &cnode{id: id, raft: proctest.FreeAddr(t), addr: proctest.FreeAddr(t), gossip: proctest.FreeAddr(t), data: filepath.Join(dir, fmt.Sprintf("n%d", id)), joinArgs: join}
}

func (n *cnode) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.logBytes += len(p)
	n.logLines += bytes.Count(p, []byte{'\n'})
	if n.stderr.Len() < 1<<20 {
		n.stderr.Write(p)
	}
	return len(p), nil
}

// start runs the node and waits until it serves; it is stopped when the
// test ends.
func (n *cnode) start(t *testing.T) {
	t.Helper()
	first := n.cmd == nil && !n.restored
	ready := n.launch(t)
	select {
	case ok := <-ready:
		if !ok && first && n.rebinds < 3 && strings.Contains(n.log(), "address already in use") {
			// Another process took a port between freePort and the bind:
			// a node that never served has nothing to keep, so it starts
			// afresh on new ports.
			t.Logf("node %d: a port was taken before it bound; starting it on new ports", n.id)
			if err := os.RemoveAll(n.data); err != nil {
				t.Fatal(err)
			}
			n.raft, n.addr, n.gossip = proctest.FreeAddr(t), proctest.FreeAddr(t), proctest.FreeAddr(t)
			n.mu.Lock()
			n.stderr.Reset()
			n.mu.Unlock()
			n.cmd = nil
			n.rebinds++
			n.start(t)
			return
		}
		if !ok {
			t.Fatalf("node %d exited before serving: %s", n.id, n.log())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("node %d did not serve within 30s: %s", n.id, n.log())
	}
}

// launch runs the node, stopped when the test ends, and returns what says
// it serves: true once it printed so, false if it exited first.
func (n *cnode) launch(t *testing.T) <-chan bool {
	t.Helper()
	args := []string{"serve", "--cluster", "--data", n.data, "--join-secret", clusterSecret}
	if !n.restored {
		args = append(args, "--node-id", fmt.Sprint(n.id), "--raft-addr", n.raft, "--addr", n.addr)
	}
	if n.gossip != "" {
		args = append(args, "--gossip-addr", n.gossip)
	}
	if !n.secure {
		args = append(args, "--insecure-dev")
	}
	args = append(args, n.extra...)
	cmd := exec.Command(tallyBin, append(args, n.joinArgs...)...)
	cmd.Env = append(baseEnv(), n.env...)
	cmd.Stderr = n
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.cmd, n.exited = cmd, make(chan struct{})
	ready := make(chan bool, 2)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			n.mu.Lock()
			n.stdout = append(n.stdout, sc.Text())
			n.mu.Unlock()
			if strings.Contains(sc.Text(), "serving on") {
				ready <- true
			}
		}
		ready <- false
	}()
	go func() { cmd.Wait(); close(n.exited) }()
	t.Cleanup(func() {
		n.stop()
		n.keepLog(t)
	})
	return ready
}

// keepLog writes the node's log, when the test failed, into the directory
// TALLY_E2E_KEEPLOGS names, if set, for a look at what the node did.
func (n *cnode) keepLog(t *testing.T) {
	dir := os.Getenv("TALLY_E2E_KEEPLOGS")
	if dir == "" || !t.Failed() {
		return
	}
	name := filepath.Join(dir, fmt.Sprintf("%s-node%d.log", strings.ReplaceAll(t.Name(), "/", "_"), n.id))
	if err := os.WriteFile(name, []byte(n.log()), 0o644); err != nil {
		t.Logf("keep node %d's log: %v", n.id, err)
	}
}

// printed is every line the node has printed on stdout, over its runs.
func (n *cnode) printed() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.stdout)
}

func (n *cnode) log() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stderr.String()
}

// stop ends the node with SIGTERM, then SIGKILL if it lingers.
func (n *cnode) stop() {
	if n.cmd == nil {
		return
	}
	select {
	case <-n.exited:
		return
	default:
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(5 * time.Second):
		n.cmd.Process.Kill()
		<-n.exited
	}
}

func (n *cnode) kill9() {
	n.cmd.Process.Kill()
	<-n.exited
}

var httpc = &http.Client{Timeout: 3 * time.Second}

// declare posts a declaration under an idempotency key; ok is false when no
// answer came.
func declare(addr, session, key, body string) (code int, resp string, ok bool) {
	req, err := http.NewRequest("POST", "http://"+addr+"/v1/tenants/acme/sessions/"+session+"/promises", strings.NewReader(body))
	if err != nil {
		return 0, err.Error(), false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tally-Actor", "alice")
	req.Header.Set("Idempotency-Key", key)
	res, err := httpc.Do(req)
	if err != nil {
		return 0, err.Error(), false
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err == nil
}

func clusterStatus(addr string) (cluster.Status, error) { return clusterStatusAs(addr, "") }

// clusterStatusAs reads a node's status with a bearer token (a node with
// tokens serves it to an admin of every tenant only).
func clusterStatusAs(addr, token string) (cluster.Status, error) {
	req, err := http.NewRequest("GET", "http://"+addr+cluster.StatusPath, nil)
	if err != nil {
		return cluster.Status{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := httpc.Do(req)
	if err != nil {
		return cluster.Status{}, err
	}
	defer res.Body.Close()
	var st cluster.Status
	return st, json.NewDecoder(res.Body).Decode(&st)
}

// settled reports whether every group has a leader and every member
// (three at least) holds it as its placement wants: each data group on
// min(replicas, members) voters, the meta group on its odd goal with the
// other members following as learners (groupsAt).
func settled(st cluster.Status) bool {
	return len(st.Members) >= 3 && groupsAt(st, len(st.Members))
}

// groupsAt reports whether, as a node sees them, every group has a leader
// and is placed as a cluster of members nodes wants it: a data group on
// min(replicas, members) voters (every member when no factor is
// recorded), the meta group on min(5, members) made odd, with the rest of
// the members its learners.
func groupsAt(st cluster.Status, members int) bool {
	data := members
	if st.Placement.Replicas > 0 {
		data = min(st.Placement.Replicas, members)
	}
	meta := members
	if st.Placement.Replicas > 0 {
		if meta = min(5, members); meta%2 == 0 {
			meta--
		}
	}
	for _, g := range st.Groups {
		want, learners := data, 0
		if g.Kind == "meta" {
			want, learners = meta, members-meta
		}
		if g.Leader == 0 || len(g.Voters) != want || len(g.Learners) != learners {
			return false
		}
	}
	return len(st.Groups) > 0
}

func waitUntil(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	poll.Until(t, what, d, cond)
}

// Three nodes, writes through every one; the leader of the loaded group
// killed with SIGKILL under load: a new leader takes over, writes resume,
// and after the killed node restarts and catches up every acknowledged
// write is on every node exactly once, the logs byte-identical and whole.
func TestClusterKillLeaderUnderLoad(t *testing.T) {
	nodes := startCluster(t, t.TempDir())
	n1 := nodes[0]

	// Writes through every node, one session each and one shared.
	for i := 0; i < 12; i++ {
		n := nodes[i%3]
		session := []string{"s1", "s2", "shared"}[i%3]
		code, resp, _ := declare(n.addr, session, fmt.Sprintf("warm-%d", i), fmt.Sprintf(`{"promise":"warm %d","to":"bob","until":"2h"}`, i))
		if code != 201 {
			t.Fatalf("write %d through node %d: %d %s", i, n.id, code, resp)
		}
	}

	// Load on one session; kill its group's leader while it runs, and go
	// on until writes sent after the kill are acknowledged.
	const session, workers = "load", 6
	st, err := clusterStatus(n1.addr)
	if err != nil {
		t.Fatal(err)
	}
	group := replica.GroupOf(cluster.DefaultGroups, "acme", session)
	var leader *cnode
	for _, g := range st.Groups {
		if g.Group == group {
			leader = nodes[g.Leader-1]
		}
	}
	var (
		mu        sync.Mutex
		acked     []string
		killedAt  time.Time
		firstAck  time.Duration
		afterKill int
		failovers int
		stop      atomic.Bool
		history   []porcupine.Operation
	)
	deadline := time.Now().Add(40 * time.Second)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for j := 0; !stop.Load(); j++ {
				text := fmt.Sprintf("load w%d-%d", w, j)
				body := fmt.Sprintf(`{"promise":%q,"to":"bob","until":"2h"}`, text)
				key := fmt.Sprintf("load-%d-%d", w, j)
				mu.Lock()
				sentAfterKill := !killedAt.IsZero()
				mu.Unlock()
				called := time.Now()
				// Retry under the same key, through the next node, until answered.
				for try := w; ; try++ {
					if time.Now().After(deadline) {
						t.Errorf("worker %d: %s unanswered by the deadline", w, key)
						return
					}
					n := nodes[try%3]
					code, resp, ok := declare(n.addr, session, key, body)
					if ok && code == 201 {
						var doc struct{ Seq uint64 }
						if err := json.Unmarshal([]byte(resp), &doc); err != nil || doc.Seq == 0 {
							t.Errorf("worker %d: answer %s", w, resp)
							return
						}
						mu.Lock()
						// Each write is its promise record and its request
						// record: the k-th promise is line 2k-1.
						history = append(history, porcupine.Operation{ClientId: w, Input: model.Op{Session: session, Value: text},
							Call: called.UnixNano(), Output: model.Out{Seq: (doc.Seq + 1) / 2}, Return: time.Now().UnixNano()})
						acked = append(acked, text)
						if sentAfterKill {
							if afterKill == 0 {
								firstAck = time.Since(killedAt)
							}
							afterKill++
						}
						mu.Unlock()
						break
					}
					if ok && code != 503 {
						t.Errorf("worker %d: %s through node %d: %d %s", w, key, n.id, code, resp)
						return
					}
					mu.Lock()
					failovers++
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
				}
			}
		}(w)
	}
	// A reader through every node in turn: each read it gets answered is
	// an operation of the history porcupine checks.
	wg.Add(1)
	go func() {
		defer wg.Done()
		readHistory(stop.Load, &mu, &history, workers, session, func(r int) ([]string, bool) {
			code, texts := listPromises(nodes[r%3].addr, session)
			return texts, code == 200
		})
	}()
	// The kill comes under load: once the workers have had writes
	// acknowledged, two each on average.
	waitUntil(t, "writes acknowledged before the kill", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 2*workers || t.Failed()
	})
	mu.Lock()
	before := len(acked)
	killedAt = time.Now()
	mu.Unlock()
	leader.kill9()
	waitUntil(t, "writes sent after the kill acknowledged", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return afterKill >= 30 || t.Failed()
	})
	stop.Store(true)
	wg.Wait()
	if t.Failed() {
		return
	}
	res := porcupine.CheckOperationsTimeout(model.Linear, history, 20*time.Second)
	if res == porcupine.Illegal {
		t.Fatalf("the history of %d operations is not linearizable", len(history))
	}
	t.Logf("porcupine: %d operations: %s", len(history), res)
	t.Logf("killed node %d (leader of group %d) after %d acknowledged writes; the first write sent after the kill acknowledged %v after it; %d writes in all, %d retries",
		leader.id, group, before, firstAck, len(acked), failovers)
	live := nodes[leader.id%3]
	st, err = clusterStatus(live.addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range st.Groups {
		if g.Group == group && (g.Leader == 0 || g.Leader == leader.id) {
			t.Fatalf("group %d's leader is %d after node %d was killed", group, g.Leader, leader.id)
		}
	}

	// The killed node restarts on its data and catches up.
	leader.joinArgs = nil
	leader.start(t)
	waitCaughtUp(t, nodes)

	// Every node: the same bytes in every session's log, a whole chain,
	// and each acknowledged write exactly once.
	var want map[string][32]byte
	for i, n := range nodes {
		sums := map[string][32]byte{}
		for name, b := range nodeLogs(t, n) {
			sums[name] = sha256.Sum256(b)
			if name != "acme/"+session {
				continue
			}
			declared := declaredIn(t, fmt.Sprintf("node %d: %s", n.id, name), b)
			for _, text := range acked {
				if c := declared[text]; c != 1 {
					t.Errorf("node %d holds %q %d times", n.id, text, c)
				}
			}
			if len(declared) != len(acked) {
				t.Errorf("node %d declares %d promises in %s, %d acknowledged", n.id, len(declared), name, len(acked))
			}
		}
		if len(sums) != 4 {
			t.Errorf("node %d holds %d sessions, want 4", n.id, len(sums))
		}
		if i == 0 {
			want = sums
			continue
		}
		for k, v := range want {
			if sums[k] != v {
				t.Errorf("node %d's log of %s differs from node 1's", n.id, k)
			}
		}
	}
}

// declaredIn counts, for each promise text, the promises a session's log
// b declares; what names the log in a failure.
func declaredIn(t *testing.T, what string, b []byte) map[string]int {
	t.Helper()
	declared := map[string]int{}
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var rec struct{ Type, Promise string }
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if rec.Type == "promise" {
			declared[rec.Promise]++
		}
	}
	return declared
}

// waitCaughtUp waits until every node has applied what every group has
// committed, the same on every node.
func waitCaughtUp(t *testing.T, nodes []*cnode) {
	t.Helper()
	waitUntil(t, "every node applying every group's commit", 30*time.Second, func() bool {
		var commits map[uint64]uint64
		for i, n := range nodes {
			st, err := clusterStatus(n.addr)
			if err != nil || !settled(st) {
				return false
			}
			cur := map[uint64]uint64{}
			for _, g := range st.Groups {
				if g.Applied != g.Commit {
					return false
				}
				cur[g.Group] = g.Applied
			}
			if i == 0 {
				commits = cur
				continue
			}
			for g, a := range cur {
				if commits[g] != a {
					return false
				}
			}
		}
		return true
	})
}

// nodeLogs verifies a node's replica ledger with `tally verify` and reads
// every session's log, by tenant/session.
func nodeLogs(t *testing.T, n *cnode) map[string][]byte {
	t.Helper()
	root := filepath.Join(n.data, "ledger")
	if r := run(t, runOpts{}, "verify", "--dir", root); r.code != 0 {
		t.Fatalf("verify on node %d: %v", n.id, r)
	}
	ss, err := store.Sessions(root, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, se := range ss {
		sd, _ := store.SessionDir(root, se.Tenant, se.Name)
		b, err := os.ReadFile(store.LogPath(sd))
		if err != nil {
			t.Fatal(err)
		}
		out[se.String()] = b
	}
	return out
}

// listPromises reads a session's promises through a node (a linearizable
// read): the status and the promise texts.
func listPromises(addr, session string) (int, []string) {
	code, log := readEntries(addr, session)
	var out []string
	for _, e := range log {
		out = append(out, e.Value)
	}
	return code, out
}

// A leader cut off (SIGSTOP) commits nothing while the others elect a
// leader and commit; woken, it never answers a read without what they
// committed meanwhile: it refuses (503) until it has it.
func TestClusterStoppedLeaderServesNoStaleRead(t *testing.T) {
	nodes := startCluster(t, t.TempDir())
	n1 := nodes[0]
	const session = "cut"
	group := replica.GroupOf(cluster.DefaultGroups, "acme", session)
	st, err := clusterStatus(n1.addr)
	if err != nil {
		t.Fatal(err)
	}
	var leader *cnode
	for _, g := range st.Groups {
		if g.Group == group {
			leader = nodes[g.Leader-1]
		}
	}
	if code, resp, _ := declare(leader.addr, session, "before", `{"promise":"before","to":"bob","until":"2h"}`); code != 201 {
		t.Fatalf("write before: %d %s", code, resp)
	}
	if err := leader.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { leader.cmd.Process.Signal(syscall.SIGCONT) }
	defer cont()
	other := nodes[leader.id%3]
	// Asked for, a stale read through a follower answers at once from its
	// replica, leader or none, and says so.
	stale := run(t, runOpts{env: []string{"TALLY_URL=" + other.url(), "TALLY_ACTOR=alice"}}, "--session", "acme/"+session, "ls", "--all", "--consistency", "stale")
	if stale.code != 0 || !strings.Contains(stale.out, "before") || !strings.Contains(stale.err, "stale reads") {
		t.Fatalf("stale read through node %d: %v", other.id, stale)
	}
	waitUntil(t, "a write through another node while the leader is stopped", 30*time.Second, func() bool {
		code, _, _ := declare(other.addr, session, "after", `{"promise":"after","to":"bob","until":"2h"}`)
		return code == 201
	})
	cont()
	reads, refused := 0, 0
	waitUntil(t, "the woken node answering a read", 30*time.Second, func() bool {
		code, texts := listPromises(leader.addr, session)
		switch code {
		case 200:
			reads++
			if !slices.Contains(texts, "after") {
				t.Fatalf("the woken leader answered a stale read: %q", texts)
			}
			return true
		case 503, 0:
			refused++
		default:
			t.Fatalf("read at the woken node: %d", code)
		}
		return false
	})
	t.Logf("the woken node refused %d read(s) before answering with the write it missed", refused)
	waitCaughtUp(t, nodes)
	for _, n := range nodes {
		res, err := httpc.Get("http://" + n.addr + cluster.HealthPath)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("node %d's health: %d", n.id, res.StatusCode)
		}
	}
	// The operator's view, from any node.
	if r := run(t, runOpts{}, "cluster", "status", "--node", nodes[2].addr); r.code != 0 || !strings.Contains(r.out, "3 voters on 3 nodes in 1 zone: tolerates 1 node, 0 zones") {
		t.Errorf("cluster status: %v", r)
	}
	r := run(t, runOpts{}, "cluster", "groups", "--json", "--node", nodes[1].addr)
	var gs cluster.Status
	if err := json.Unmarshal([]byte(r.out), &gs); r.code != 0 || err != nil || len(gs.Groups) != cluster.DefaultGroups+1 {
		t.Errorf("cluster groups --json: %v (%v)", r, err)
	}
	if r := run(t, runOpts{}, "cluster", "transfer-leader", "--group", "2", "--to", "1", "--node", nodes[0].addr); r.code != 2 {
		t.Errorf("transfer-leader without the join secret: %v", r)
	}
	logs := nodeLogs(t, nodes[0])
	for _, n := range nodes[1:] {
		for name, b := range nodeLogs(t, n) {
			if !bytes.Equal(b, logs[name]) {
				t.Errorf("node %d's log of %s differs from node 1's", n.id, name)
			}
		}
	}
}
