package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tally/api"
	"tally/cluster/replica"
	"tally/internal/poll"
	"tally/internal/proctest"
	"tally/ledger"
	"tally/ledgerservice"
	"tally/promise"
	"tally/rest"
	"tally/server"
	"tally/service"
	"tally/store"
)

type testNode struct {
	*Node
	cfg     Config
	hs      *http.Server
	srv     *server.Server
	stopped bool
}

func startNode(t testing.TB, cfg Config) *testNode {
	t.Helper()
	n, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start node %d: %v", cfg.NodeID, err)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := serveNode(t, n, cfg)
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	return &testNode{Node: n, cfg: cfg, hs: hs, srv: srv}
}

// serveNode is the node's HTTP server, as tally serve --cluster mounts
// it: the node's operations in the server's route table.
func serveNode(t testing.TB, n *Node, cfg Config) *server.Server {
	t.Helper()
	sc := server.DefaultConfig()
	sc.Root, sc.Insecure, sc.Tokens = n.Replica().Root(), true, n
	sc.Logger = slog.New(slog.DiscardHandler)
	if cfg.Ledger.Validate() == nil {
		sc.Ledger = cfg.Ledger
	}
	srv, err := server.NewCluster(sc, n, n)
	if err != nil {
		t.Fatalf("serve node %d: %v", cfg.NodeID, err)
	}
	return srv
}

// target is the node as a signed request names it.
func (tn *testNode) target() Target { return Target{ClusterID: tn.ClusterID(), NodeID: tn.ID()} }

// resign signs r again with secret, after a test changed its envelope.
func resign(secret string, r signedRequest) {
	what, s, fields := r.envelope()
	s.MAC = s.sum(secret, what, fields)
}

func (tn *testNode) stop(t testing.TB) {
	if tn.stopped {
		return
	}
	tn.stopped = true
	tn.hs.Close()
	tn.srv.Close()
	if err := tn.Close(); err != nil {
		t.Errorf("close node %d: %v", tn.cfg.NodeID, err)
	}
}

func nodeConfig(t testing.TB, dir string, id uint64) Config {
	cfg := Config{NodeID: id, RaftAddr: proctest.FreeAddr(t), GossipAddr: proctest.FreeAddr(t), Addr: proctest.FreeAddr(t), Data: filepath.Join(dir, fmt.Sprint(id)),
		Secret: "a join secret of some length", Groups: 4, Tick: 20 * time.Millisecond, Ledger: ledger.DefaultConfig(),
		Local: func(s ledgerservice.Sessions, lc ledgerservice.Config) service.Service {
			lc.Timekeeper = ledger.DefaultConfig().Timekeeper
			return ledgerservice.New(s, lc)
		}}
	cfg.Ledger.Logger = slog.New(slog.DiscardHandler)
	if os.Getenv("TALLY_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return cfg
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	poll.Until(t, what, d, cond)
}

func allVoters(n *Node, want int) bool {
	st, err := n.Status(context.Background())
	if err != nil {
		return false
	}
	for _, g := range st.Groups {
		if len(g.Voters) != want || len(g.Learners) != 0 {
			return false
		}
	}
	return len(st.Groups) > 0
}

func chainHeads(t *testing.T, n *Node) map[string]store.Position {
	out := map[string]store.Position{}
	ss, err := store.Sessions(n.Replica().Root(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, se := range ss {
		l, err := n.Replica().Open(context.Background(), se.Tenant, se.Name, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Refresh(); err != nil {
			t.Fatal(err)
		}
		out[se.String()] = l.Position()
	}
	return out
}

// startFirst starts node 1 of a new cluster under dir, stopped when the
// test ends.
func startFirst(t *testing.T, dir string) *testNode {
	c1 := nodeConfig(t, dir, 1)
	c1.Bootstrap = true
	n1 := startNode(t, c1)
	t.Cleanup(func() { n1.stop(t) })
	return n1
}

// startAlone starts a bootstrapped first node in dir (startFirst) and waits
// until it is the one voter of every group.
func startAlone(t *testing.T, dir string) *testNode {
	n := startFirst(t, dir)
	waitFor(t, "a voter in every group", 20*time.Second, func() bool { return allVoters(n.Node, 1) })
	return n
}

// startJoiner starts node id joining through first, stopped when the test
// ends.
func startJoiner(t *testing.T, dir string, id uint64, first *testNode) *testNode {
	c := nodeConfig(t, dir, id)
	c.Join = first.cfg.Addr
	n := startNode(t, c)
	t.Cleanup(func() { n.stop(t) })
	return n
}

// startThree starts a bootstrap node and joins two more, and waits until
// every group has three voters and the leadership has spread over the
// three.
func startThree(t *testing.T) []*testNode {
	dir := t.TempDir()
	n1 := startFirst(t, dir)
	nodes := []*testNode{n1, startJoiner(t, dir, 2, n1), startJoiner(t, dir, 3, n1)}
	waitFor(t, "three voters in every group", 20*time.Second, func() bool { return allVoters(n1.Node, 3) })
	// Node 1 led every group at first; leadership spreads over the three.
	waitFor(t, "leaders spread over the nodes", 20*time.Second, func() bool {
		st, err := n1.Status(context.Background())
		if err != nil {
			return false
		}
		leads := map[uint64]int{}
		for _, g := range st.Groups {
			leads[g.Leader]++
		}
		return leads[1] >= 1 && leads[2] >= 1 && leads[3] >= 1 && leads[0] == 0 &&
			max(leads[1], leads[2], leads[3])-min(leads[1], leads[2], leads[3]) <= 1
	})
	return nodes
}

func TestThreeNodesReplicateIdenticalChains(t *testing.T) {
	nodes := startThree(t)
	n1, c1 := nodes[0], nodes[0].cfg

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []string
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			n := nodes[w%3]
			for i := 0; i < 10; i++ {
				// A leader may move meanwhile: the answer is then retryable,
				// and a retry under the same request id runs at most once.
				call := service.Call{Tenant: "acme", Session: fmt.Sprintf("s%d", i%4), Actor: "alice", RequestID: fmt.Sprintf("w%d-%d", w, i)}
				res, err := n.DeclarePromise(ctx, call, api.PromiseDeclare{Promise: "ship", To: "bob", Until: "2h"})
				for try := 0; try < 20 && isUnavailable(err); try++ {
					time.Sleep(50 * time.Millisecond)
					res, err = n.DeclarePromise(ctx, call, api.PromiseDeclare{Promise: "ship", To: "bob", Until: "2h"})
				}
				if err != nil {
					t.Errorf("node %d write: %v", n.ID(), err)
					return
				}
				mu.Lock()
				ids = append(ids, res.Promise.ID)
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// A refusal is the ledger's, the same through any node.
	_, err := nodes[2].DeclarePromise(ctx, service.Call{Tenant: "acme", Session: "s0", Actor: "alice"}, api.PromiseDeclare{ID: ids[0], Promise: "again", To: "bob", Until: "2h"})
	if err == nil {
		t.Fatalf("declaring %s twice was accepted", ids[0])
	}
	// A retry through another node returns the recorded outcome, byte for
	// byte, and appends nothing.
	rc := service.Call{Tenant: "acme", Session: "s1", Actor: "alice", RequestID: "req-1"}
	doc := api.PromiseDeclare{Promise: "once", To: "bob", Until: "2h"}
	first, err := nodes[0].DeclarePromise(ctx, rc, doc)
	if err != nil {
		t.Fatal(err)
	}
	again, err := nodes[2].DeclarePromise(ctx, rc, doc)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || string(again.JSON) != string(first.JSON) || again.Promise.ID != first.Promise.ID {
		t.Fatalf("retry through node 3: replayed %v, %s; first %s", again.Replayed, again.JSON, first.JSON)
	}
	// Every node reads every write.
	for _, n := range nodes {
		total := 0
		for s := 0; s < 4; s++ {
			list, err := n.ListPromises(ctx, service.Call{Tenant: "acme", Session: fmt.Sprintf("s%d", s), Actor: "alice"}, promise.Filter{})
			if err != nil {
				t.Fatalf("node %d read: %v", n.ID(), err)
			}
			total += len(list.Promises)
		}
		if total != 61 {
			t.Errorf("node %d reads %d promises, want 61", n.ID(), total)
		}
	}
	// An import through one node is on every node; each verifies its own.
	imp := service.Call{Tenant: "acme", Session: "imp", Actor: "admin"}
	line := `{"ts":"2026-01-01T00:00:00Z","type":"promise","id":"pnk_000001","promise":"old","by":"carol","to":"dan","until":"2026-02-01T00:00:00Z"}` + "\n"
	if _, err := nodes[1].Import(ctx, imp, []byte(line)); err != nil {
		t.Fatalf("import: %v", err)
	}
	for _, n := range nodes {
		var out bytes.Buffer
		if _, err := n.Export(ctx, imp, "pinki", &out, nil); err != nil || out.String() != line {
			t.Fatalf("export at node %d: %v %q", n.ID(), err, out.String())
		}
		v, err := n.VerifyAll(ctx, service.Call{Tenant: "acme"})
		if err != nil || !v.Whole {
			t.Fatalf("verify at node %d: %v %s", n.ID(), err, v.JSON)
		}
	}
	heads := chainHeads(t, n1.Node)
	if len(heads) != 5 {
		t.Fatalf("node 1 holds %d sessions, want 5", len(heads))
	}
	for _, n := range nodes[1:] {
		if got := chainHeads(t, n.Node); !equalHeads(got, heads) {
			t.Errorf("node %d chains %v differ from node 1's %v", n.ID(), got, heads)
		}
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != 60 {
		t.Errorf("minted ids collide")
	}

	// The operator's changes: a leadership handed over (asked at a node
	// that does not lead the group, which names the leader), a wrong
	// secret refused, and node 3 removed from every group.
	st, err := n1.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := st.Groups[1]
	to := g.Voters[0]
	if to == g.Leader {
		to = g.Voters[1]
	}
	at := nodes[to-1] // not the leader
	if code, body := post(t, at.cfg.Addr, TransferLeaderPath, Sign(c1.Secret, at.target(), TransferRequest{Group: g.Group, To: to})); code != 503 || !strings.Contains(body, `"leader_addr"`) {
		t.Fatalf("transfer asked at a follower: %d %s", code, body)
	}
	leader := nodes[g.Leader-1]
	leaderAddr := leader.cfg.Addr
	if code, body := post(t, leaderAddr, TransferLeaderPath, Sign("another secret of some length", leader.target(), TransferRequest{Group: g.Group, To: to})); code != 403 {
		t.Fatalf("transfer with another secret: %d %s", code, body)
	}
	if code, body := post(t, leaderAddr, TransferLeaderPath, Sign(c1.Secret, leader.target(), TransferRequest{Group: g.Group, To: to})); code != 200 {
		t.Fatalf("transfer at the leader: %d %s", code, body)
	}
	// The meta group's leader may change while the removal waits (the
	// reconciler hands leaderships over): the node then says the outcome
	// is unknown, and the operator asks again; after an unknown outcome,
	// "not a member" means the first one took.
	unknown := false
	for try := 0; ; try++ {
		code, body := post(t, c1.Addr, RemoveNodePath, Sign(c1.Secret, n1.target(), RemoveRequest{ID: 3}))
		if code == 200 || unknown && code == 404 && strings.Contains(body, "not a member") {
			break
		}
		if code != 503 || try == 5 {
			t.Fatalf("remove node 3: %d %s", code, body)
		}
		unknown = unknown || strings.Contains(body, `"UnknownOutcome"`)
		time.Sleep(200 * time.Millisecond)
	}
	waitFor(t, "node 3 out of every group", 20*time.Second, func() bool {
		st, err := n1.Status(ctx)
		if err != nil {
			return false
		}
		for _, g := range st.Groups {
			if slices.Contains(g.Voters, 3) || slices.Contains(g.Learners, 3) || g.Leader == 0 {
				return false
			}
		}
		return true
	})
}

func isUnavailable(err error) bool {
	var u *Unavailable
	var r *rest.Refusal
	return errors.As(err, &u) || errors.As(err, &r) && r.Code == service.CodeCustodyPending
}

func post(t *testing.T, addr, path string, body any) (int, string) {
	b, _ := json.Marshal(body)
	res, err := http.Post("http://"+addr+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(out)
}

func equalHeads(a, b map[string]store.Position) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A join with another secret, or under a node id already a member, is
// refused and changes nothing.
func TestJoinRefusals(t *testing.T) {
	dir := t.TempDir()
	n1 := startFirst(t, dir)
	c1 := n1.cfg
	waitFor(t, "node 1 a member", 20*time.Second, func() bool { return len(n1.Replica().Members()) == 1 })

	bad := nodeConfig(t, dir, 2)
	bad.Join, bad.Secret = c1.Addr, "another secret of some length"
	bad.Data = filepath.Join(dir, "new", "node2")
	if _, err := Start(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "WrongJoinSecret") {
		t.Fatalf("join with another secret: %v", err)
	}
	// A refused join leaves nothing: no data directory, nor its parent
	// that the start made.
	if _, err := os.Stat(filepath.Join(dir, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused join left %s behind: %v", filepath.Join(dir, "new"), err)
	}
	dup := nodeConfig(t, dir, 1)
	dup.Data = filepath.Join(dir, "dup")
	dup.Join = c1.Addr
	if _, err := Start(context.Background(), dup); err == nil || !strings.Contains(err.Error(), "DuplicateNode") {
		t.Fatalf("join as node 1 again: %v", err)
	}
	if ms := n1.Replica().Members(); len(ms) != 1 {
		t.Fatalf("members after refused joins: %+v", ms)
	}
	// A command over the entry bound is refused, not retryable.
	waitFor(t, "a voter in every group", 20*time.Second, func() bool { return allVoters(n1.Node, 1) })
	big := api.PromiseDeclare{Promise: strings.Repeat("x", 2<<20), To: "bob", Until: "2h"}
	_, err := n1.DeclarePromise(context.Background(), service.Call{Tenant: "acme", Session: "big", Actor: "alice"}, big)
	var ref *rest.Refusal
	if !errors.As(err, &ref) || ref.Status != 413 {
		t.Fatalf("a 2 MiB declaration: %v", err)
	}
}

// A node that joins after writes installs each group's snapshot (its
// sessions' logs, streamed from the leader's files) and holds the same
// chains; it then applies new writes like the others.
func TestLateJoinerInstallsSnapshot(t *testing.T) {
	dir := t.TempDir()
	n1 := startAlone(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	write := func(n *Node, i int) {
		call := service.Call{Tenant: "acme", Session: fmt.Sprintf("s%d", i%3), Actor: "alice", RequestID: fmt.Sprintf("r%d", i)}
		if _, err := n.DeclarePromise(ctx, call, api.PromiseDeclare{Promise: fmt.Sprint("p", i), To: "bob", Until: "2h"}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	for i := 0; i < 60; i++ {
		write(n1.Node, i)
	}
	n2 := startJoiner(t, dir, 2, n1)
	waitFor(t, "two voters in every group", 20*time.Second, func() bool { return allVoters(n1.Node, 2) })
	write(n2.Node, 60)
	waitFor(t, "node 2 holding node 1's chains", 20*time.Second, func() bool {
		return equalHeads(chainHeads(t, n1.Node), chainHeads(t, n2.Node))
	})
	if got := len(chainHeads(t, n2.Node)); got != 3 {
		t.Fatalf("node 2 holds %d sessions, want 3", got)
	}
	if n2.Replica().Restores() == 0 {
		t.Fatal("node 2 installed no snapshot with data")
	}
	// Its metrics: the groups' raft state and its proposals' latency.
	reg := prometheus.NewRegistry()
	for _, col := range n2.Collectors() {
		reg.MustRegister(col)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range fams {
		seen[f.GetName()] = true
		if f.GetName() == "tally_cluster_proposal_seconds" && f.GetMetric()[0].GetHistogram().GetSampleCount() != 1 {
			t.Errorf("proposals observed: %v", f.GetMetric())
		}
		// It received its snapshots on streams, with their bodies.
		if n := f.GetName(); (n == "tally_cluster_snapshots_received_total" || n == "tally_cluster_snapshot_received_bytes_total") && f.GetMetric()[0].GetCounter().GetValue() == 0 {
			t.Errorf("%s is 0", n)
		}
	}
	for _, name := range []string{"tally_cluster_group_leader", "tally_cluster_group_applied_index", "tally_cluster_proposal_seconds", "tally_cluster_snapshots_installed_total", "tally_cluster_sent_bytes_total",
		"tally_cluster_group_sent_messages_total", "tally_cluster_group_sent_bytes_total", "tally_cluster_group_sent_snapshots_total",
		"tally_cluster_snapshots_received_total", "tally_cluster_snapshot_received_bytes_total", "tally_cluster_snapshots_sent_total", "tally_cluster_snapshot_send_failures_total"} {
		if !seen[name] {
			t.Errorf("no %s among %v", name, seen)
		}
	}
}

// twoVoters starts a bootstrap node and a second one joining it, and waits
// until both are voters of every group; the first stops when the test
// ends, the caller stops the second.
func twoVoters(t *testing.T) (n1, n2 *testNode) {
	t.Helper()
	dir := t.TempDir()
	n1 = startFirst(t, dir)
	c2 := nodeConfig(t, dir, 2)
	c2.Join = n1.cfg.Addr
	n2 = startNode(t, c2)
	waitFor(t, "two voters in every group", 20*time.Second, func() bool { return allVoters(n1.Node, 2) })
	return n1, n2
}

// Health says whether the node reaches a quorum in every group: with the
// other of two voters gone, it does not.
func TestHealthWithoutQuorum(t *testing.T) {
	n1, n2 := twoVoters(t)
	health := func() int {
		res, err := http.Get("http://" + n1.cfg.Addr + HealthPath)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	waitFor(t, "healthy with both", 10*time.Second, func() bool { return health() == 200 })
	n2.stop(t)
	waitFor(t, "no quorum without node 2", 10*time.Second, func() bool { return health() == 503 })
}

// A read is linearizable unless it asks otherwise: cut off from its
// group's quorum a node serves no linearizable read, and a stale read
// (call.Stale, consistency=stale) answers from what it applied.
func TestStaleReadWithoutQuorum(t *testing.T) {
	n1, n2 := twoVoters(t)
	ctx := context.Background()
	call := service.Call{Tenant: "acme", Session: "stale", Actor: "alice", RequestID: "w1"}
	var err error
	for try := 0; try < 100; try++ {
		if _, err = n1.DeclarePromise(ctx, call, api.PromiseDeclare{ID: "p1", Promise: "ship", To: "bob", Until: "2h"}); !isUnavailable(err) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	read := service.Call{Tenant: "acme", Session: "stale", Actor: "alice"}
	if l, err := n1.ListPromises(ctx, read, promise.Filter{}); err != nil || len(l.Promises) != 1 {
		t.Fatalf("linearizable read with a quorum: %+v %v", l, err)
	}
	n2.stop(t)
	waitFor(t, "no quorum without node 2", 10*time.Second, func() bool {
		rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := n1.ListPromises(rctx, read, promise.Filter{})
		return err != nil
	})
	read.Stale = true
	l, err := n1.ListPromises(ctx, read, promise.Filter{})
	if err != nil || len(l.Promises) != 1 || l.Promises[0].ID != "p1" {
		t.Fatalf("stale read without a quorum: %+v %v", l, err)
	}
}

// add-node records a member before it starts: signed with the join secret
// (else 403), refused without an id or addresses (400) or at a member's
// address (409, DuplicateNode); a join at the recorded addresses is let in
// as that member, and a join under another id at them is refused.
func TestAddNode(t *testing.T) {
	dir := t.TempDir()
	n1 := startFirst(t, dir)
	c1 := n1.cfg
	waitFor(t, "node 1 a member", 20*time.Second, func() bool { return len(n1.Replica().Members()) == 1 })

	c2 := nodeConfig(t, dir, 2)
	c2.Join = c1.Addr
	m := replica.Member{ID: 2, RaftAddr: c2.RaftAddr, Addr: c2.Addr, GossipAddr: c2.GossipAddr}
	for _, c := range []struct {
		req    AddRequest
		status int
		want   string
	}{
		{Sign("another secret of some length", n1.target(), AddRequest{Member: m}), 403, "WrongJoinSecret"},
		{Sign(c1.Secret, n1.target(), AddRequest{Member: replica.Member{RaftAddr: "x:1", Addr: "x:2"}}), 400, "member.id: required"},
		{Sign(c1.Secret, n1.target(), AddRequest{Member: replica.Member{ID: 2, Addr: "x:2"}}), 400, "member.raft_addr"},
		{Sign(c1.Secret, n1.target(), AddRequest{Member: replica.Member{ID: 2, RaftAddr: "not an addr", Addr: "::::"}}), 400, `member.raft_addr: \"not an addr\" is not HOST:PORT`},
		{Sign(c1.Secret, n1.target(), AddRequest{Member: replica.Member{ID: 2, RaftAddr: "127.0.0.1:7", Addr: "::::"}}), 400, `member.addr: \"::::\" is not HOST:PORT`},
		{Sign(c1.Secret, n1.target(), AddRequest{Member: replica.Member{ID: 2, RaftAddr: ":7421", Addr: "127.0.0.1:8"}}), 400, `member.raft_addr: \":7421\": the host must be a name or an IP address`},
		{Sign(c1.Secret, n1.target(), AddRequest{Member: replica.Member{ID: 2, RaftAddr: "127.0.0.1:0", Addr: "127.0.0.1:8"}}), 400, `member.raft_addr: \"127.0.0.1:0\": the port must be a number from 1 to 65535`},
		{Sign(c1.Secret, n1.target(), AddRequest{Member: replica.Member{ID: 2, RaftAddr: "127.0.0.1:7", Addr: "h:65536"}}), 400, `member.addr: \"h:65536\": the port must be a number from 1 to 65535`},
		{Sign(c1.Secret, n1.target(), AddRequest{Member: replica.Member{ID: 2, RaftAddr: c1.RaftAddr, Addr: "x:2"}}), 409, "DuplicateNode"},
		{Sign(c1.Secret, n1.target(), AddRequest{Member: m}), 200, `"added"`},
		{Sign(c1.Secret, n1.target(), AddRequest{Member: m}), 200, `"added"`}, // retried
	} {
		code, body := post(t, c1.Addr, AddNodePath, c.req)
		if code != c.status || !strings.Contains(body, c.want) {
			t.Fatalf("add-node %+v: %d %s, want %d with %q", c.req.Member, code, body, c.status, c.want)
		}
	}
	if ms := n1.Replica().Members(); len(ms) != 2 || ms[1] != m {
		t.Fatalf("members after add-node: %+v", ms)
	}
	other := nodeConfig(t, dir, 3)
	other.RaftAddr, other.Addr, other.Join = c2.RaftAddr, c2.Addr, c1.Addr
	if _, err := Start(context.Background(), other); err == nil || !strings.Contains(err.Error(), "DuplicateNode") {
		t.Fatalf("a join under another id at node 2's addresses: %v", err)
	}
	n2 := startNode(t, c2)
	defer n2.stop(t)
	waitFor(t, "node 2 a voter of every group", 20*time.Second, func() bool { return allVoters(n1.Node, 2) })
}

// A bootstrap whose first start stopped after it wrote the node's identity
// and before every group had its initial state (a crash) is taken up again
// by the next start, with or without --bootstrap: every group gets this
// node as its voter, the node announces itself, and writes are served.
func TestBootstrapInterruptedIsTakenUpAgain(t *testing.T) {
	dir := t.TempDir()
	cfg := nodeConfig(t, dir, 1)
	if err := os.MkdirAll(cfg.Data, 0o755); err != nil {
		t.Fatal(err)
	}
	id := identity{ClusterID: "c0ffee", NodeID: 1, Groups: cfg.Groups, Bootstrapped: true, BootstrapPending: true}
	if err := writeJSONFile(filepath.Join(cfg.Data, identityName), id); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, cfg)
	defer n.stop(t)
	waitFor(t, "a voter in every group", 20*time.Second, func() bool { return allVoters(n.Node, 1) })
	waitFor(t, "the node a member", 20*time.Second, func() bool { return len(n.Replica().Members()) == 1 })
	call := service.Call{Tenant: "acme", Session: "boot", Actor: "alice", RequestID: "b1"}
	var err error
	for try := 0; try < 100; try++ {
		if _, err = n.DeclarePromise(context.Background(), call, api.PromiseDeclare{Promise: "p", To: "bob", Until: "2h"}); !isUnavailable(err) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(cfg.Data, identityName))
	if strings.Contains(string(b), "bootstrap_pending") {
		t.Fatalf("the identity still says the bootstrap is pending: %s", b)
	}
}

// Operator requests and joins are signed at an instant: one signed more
// than SignatureMax from the node's clock is refused (403 StaleRequest)
// and changes nothing, so a request seen on the wire cannot be played
// later; a join's answer is signed with the joiner's nonce, so an answer
// recorded for another join does not pass for this one.
func TestSignedRequestsExpire(t *testing.T) {
	dir := t.TempDir()
	n1 := startFirst(t, dir)
	c1 := n1.cfg
	waitFor(t, "node 1 a member", 20*time.Second, func() bool { return len(n1.Replica().Members()) == 1 })

	old := time.Now().Add(-2 * SignatureMax).UTC().Format(time.RFC3339Nano)
	add := Sign(c1.Secret, n1.target(), AddRequest{Member: replica.Member{ID: 2, RaftAddr: "127.0.0.1:1", Addr: "127.0.0.1:2"}})
	add.At = old
	resign(c1.Secret, &add)
	if code, body := post(t, c1.Addr, AddNodePath, add); code != 403 || !strings.Contains(body, CodeStaleRequest) {
		t.Fatalf("an add-node signed long ago: %d %s", code, body)
	}
	if ms := n1.Replica().Members(); len(ms) != 1 {
		t.Fatalf("a stale add-node changed the members: %+v", ms)
	}
	rm := Sign(c1.Secret, n1.target(), RemoveRequest{ID: 1})
	rm.At = "yesterday"
	resign(c1.Secret, &rm)
	if code, body := post(t, c1.Addr, RemoveNodePath, rm); code != 400 || !strings.Contains(body, "at: must be the RFC 3339 instant") {
		t.Fatalf("a remove-node with no instant: %d %s", code, body)
	}

	c2 := nodeConfig(t, dir, 2)
	c2.Join = c1.Addr
	stale := newJoinRequest(c2, "")
	stale.At = old
	stale.MAC = signJoin(c2.Secret, stale)
	if code, body := post(t, c1.Addr, JoinPath, stale); code != 403 || !strings.Contains(body, CodeStaleRequest) {
		t.Fatalf("a join signed long ago: %d %s", code, body)
	}
	jr := newJoinRequest(c2, "")
	code, body := post(t, c1.Addr, JoinPath, jr)
	if code != 200 {
		t.Fatalf("join: %d %s", code, body)
	}
	var a joinAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatal(err)
	}
	if a.MAC != signJoined(c2.Secret, jr.Nonce, a) || a.MAC == signJoined(c2.Secret, newJoinRequest(c2, "").Nonce, a) {
		t.Fatal("the join's answer is not bound to the request's nonce")
	}
}
