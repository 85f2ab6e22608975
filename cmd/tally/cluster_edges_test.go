package main

// The cluster's edges, across processes: operator requests that cannot be
// played again, a node's status and metrics kept to the operator,
// malformed addresses and refused joins that leave nothing, and a node on
// a full disk that says why and stays cheap.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tally/cluster"
	"tally/cluster/replica"
	"tally/internal/proctest"
)

// capture is a proxy in front of a node that keeps the body of every POST
// it forwards, as someone on the wire would.
type capture struct {
	mu       sync.Mutex
	bodies   map[string][]byte // path → the last body posted
	statuses map[string]int    // path → the node's answer to it
}

func newCapture(t *testing.T, n *cnode) (*capture, string) {
	c := &capture{bodies: map[string][]byte{}, statuses: map[string]int{}}
	target, _ := url.Parse(n.url())
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(res *http.Response) error {
		c.mu.Lock()
		c.statuses[res.Request.URL.Path] = res.StatusCode
		c.mu.Unlock()
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			c.mu.Lock()
			c.bodies[r.URL.Path] = b
			c.mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return c, strings.TrimPrefix(srv.URL, "http://")
}

func (c *capture) body(t *testing.T, path string) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.bodies[path]
	if b == nil {
		t.Fatalf("no request to %s went through the proxy", path)
	}
	return b
}

// replay posts a captured body to a node and returns the status and the
// refusal's code.
func replay(t *testing.T, addr, path string, body []byte) (int, string) {
	t.Helper()
	res, err := httpc.Post("http://"+addr+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var doc struct{ Code string }
	_ = json.Unmarshal(b, &doc)
	return res.StatusCode, doc.Code
}

// getAs reads a route of n with a bearer token ("" for none).
func getAs(t *testing.T, n *cnode, path, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", n.url()+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := httpc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// A signed operator request captured on the wire is good once: played
// again at its node it is refused (403 Replayed), and so after that node
// restarted (the meta group holds its nonce); at another node it names the
// wrong node, at another cluster with the same secret the wrong cluster. A
// backup request too. With tokens, a node's status and metrics are the
// operator's only, health is anyone's. add-node with malformed addresses
// is refused (exit 2) with nothing recorded, and a join refused for its
// secret leaves no directory.
func TestClusterOperatorRequestsAreOneTime(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	dir := t.TempDir()
	nodes := startClusterWith(t, dir, func(n *cnode) { n.secure = true })
	admin := nodes[0].operator
	secretEnv := "TALLY_JOIN_SECRET=" + clusterSecret

	// Status and metrics: the operator's; health: anyone's.
	agent := strings.TrimSpace(run(t, runOpts{env: []string{"TALLY_URL=" + nodes[0].url(), "TALLY_TOKEN=" + admin}},
		"token", "create", "--tenant", "acme", "--participant", "alice").out)
	for _, path := range []string{cluster.StatusPath, "/metrics"} {
		for _, c := range []struct {
			token string
			want  int
		}{{"", 401}, {agent, 403}, {admin, 200}} {
			if got := getAs(t, nodes[1], path, c.token); got != c.want {
				t.Errorf("GET %s with token %.12q: %d, want %d", path, c.token, got, c.want)
			}
		}
	}
	if got := getAs(t, nodes[1], "/healthz", ""); got != 200 {
		t.Errorf("GET /healthz without a token: %d", got)
	}
	if r := run(t, runOpts{env: []string{"TALLY_TOKEN=" + admin}}, "cluster", "status", "--node", nodes[1].addr); r.code != 0 || !strings.Contains(r.out, "seen from node 2") {
		t.Errorf("cluster status with the admin token: %v", r)
	}
	if r := run(t, runOpts{}, "cluster", "status", "--node", nodes[1].addr); r.code != 1 || !strings.Contains(r.err, "401") {
		t.Errorf("cluster status without a token: %v", r)
	}

	// A transfer asked through a proxy in front of the group's leader (as
	// the CLI found it: leadership moves by itself too).
	const g = 3
	var (
		leader    *cnode
		wire      *capture
		proxyAddr string
		transfer  []byte
	)
	waitUntil(t, "a transfer taken at the leader through the proxy", 30*time.Second, func() bool {
		st, err := clusterStatusAs(nodes[0].addr, admin)
		if err != nil || st.Groups[g-1].Leader == 0 {
			return false
		}
		leader = nodes[st.Groups[g-1].Leader-1]
		to := st.Groups[g-1].Voters[0]
		if to == leader.id {
			to = st.Groups[g-1].Voters[1]
		}
		wire, proxyAddr = newCapture(t, leader)
		if r := run(t, runOpts{env: []string{secretEnv}}, "cluster", "transfer-leader", "--group", fmt.Sprint(g), "--to", fmt.Sprint(to), "--node", proxyAddr); r.code != 0 {
			if strings.Contains(r.err, "has not within") {
				return false // the leadership moved meanwhile (the driver spreads it): ask again
			}
			t.Fatalf("transfer-leader: %v", r)
		}
		wire.mu.Lock()
		defer wire.mu.Unlock()
		transfer = wire.bodies[cluster.TransferLeaderPath]
		return wire.statuses[cluster.TransferLeaderPath] == 200
	})
	backupFile := filepath.Join(dir, "cluster.backup")
	if r := run(t, runOpts{env: []string{secretEnv}}, "backup", "--to", backupFile, "--node", proxyAddr); r.code != 0 {
		t.Fatalf("backup: %v", r)
	}
	backup := wire.body(t, cluster.BackupPath)

	other := newCNode(t, t.TempDir(), 1, "--bootstrap") // another cluster, the same secret
	other.start(t)
	for _, c := range []struct {
		name, addr, path string
		body             []byte
		code             string
	}{
		{"the transfer again at its node", leader.addr, cluster.TransferLeaderPath, transfer, cluster.CodeReplayed},
		{"the backup again at its node", leader.addr, cluster.BackupPath, backup, cluster.CodeReplayed},
		{"the transfer at another cluster", other.addr, cluster.TransferLeaderPath, transfer, cluster.CodeWrongCluster},
		{"the backup at another cluster", other.addr, cluster.BackupPath, backup, cluster.CodeWrongCluster},
	} {
		if status, code := replay(t, c.addr, c.path, c.body); status != 403 || code != c.code {
			t.Errorf("%s: %d %s, want 403 %s", c.name, status, code, c.code)
		}
	}
	for _, n := range nodes {
		if n == leader {
			continue
		}
		for _, path := range []string{cluster.TransferLeaderPath, cluster.BackupPath} {
			body := map[string][]byte{cluster.TransferLeaderPath: transfer, cluster.BackupPath: backup}[path]
			if status, code := replay(t, n.addr, path, body); status != 403 || code != cluster.CodeWrongNode {
				t.Errorf("%s replayed at node %d: %d %s, want 403 WrongNode", path, n.id, status, code)
			}
		}
	}

	// Restarted, the leader has forgotten what it saw; the meta group
	// refuses the transfer again.
	leader.stop()
	leader.start(t)
	waitUntil(t, "the restarted node healthy", 30*time.Second, func() bool {
		return getAs(t, leader, cluster.HealthPath, "") == 200
	})
	if status, code := replay(t, leader.addr, cluster.TransferLeaderPath, transfer); status != 403 || code != cluster.CodeReplayed {
		t.Errorf("the transfer replayed at its node restarted: %d %s, want 403 Replayed", status, code)
	}

	// add-node with malformed addresses: refused before anything is sent.
	for _, c := range []struct{ raft, addr, want string }{
		{"not an addr", "127.0.0.1:7", `raft-addr: "not an addr" is not HOST:PORT`},
		{"127.0.0.1:7", "::::", `addr: "::::" is not HOST:PORT`},
		{"127.0.0.1:0", "127.0.0.1:7", `raft-addr: "127.0.0.1:0": the port must be a number from 1 to 65535`},
	} {
		r := run(t, runOpts{env: []string{secretEnv}}, "cluster", "add-node", "9", "--raft-addr", c.raft, "--addr", c.addr, "--node", nodes[0].addr)
		if r.code != 2 || !strings.Contains(r.err, c.want) {
			t.Errorf("add-node --raft-addr %q --addr %q: %v, want exit 2 with %q", c.raft, c.addr, r, c.want)
		}
	}
	if st, err := clusterStatusAs(nodes[0].addr, admin); err != nil || len(st.Members) != 3 {
		t.Fatalf("members after refused add-nodes: %+v %v", st.Members, err)
	}

	// A join refused for its secret (wrong, or too short) leaves nothing.
	for _, c := range []struct {
		secret string
		code   int
	}{{"another-secret-0123456789", 1}, {"short", 2}} {
		data := filepath.Join(dir, "refused", "n9")
		r := run(t, runOpts{}, "serve", "--cluster", "--insecure-dev", "--node-id", "9", "--raft-addr", proctest.FreeAddr(t), "--addr", proctest.FreeAddr(t),
			"--data", data, "--join-secret", c.secret, "--join", nodes[0].addr)
		if r.code != c.code {
			t.Errorf("join with secret %q: %v, want exit %d", c.secret, r, c.code)
		}
		if _, err := os.Stat(filepath.Join(dir, "refused")); !os.IsNotExist(err) {
			t.Errorf("join with secret %q left %s behind (%v)", c.secret, filepath.Join(dir, "refused"), err)
		}
	}
}

// cpuTime is the CPU a process has used (user and system), from /proc.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / hz
}

// mountTmpfs mounts a tmpfs of size at dir, unmounted when the test ends;
// it skips the test where that cannot be done, but never under CI.
func mountTmpfs(t *testing.T, dir, size string) { proctest.Tmpfs(t, dir, size) }

// fill writes a file on the file system of dir until it is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !strings.Contains(err.Error(), "no space") {
				t.Fatal(err)
			}
			break
		}
	}
	for len(chunk) > 1 { // the last blocks
		chunk = chunk[:len(chunk)/2]
		for {
			if _, err := f.Write(chunk); err != nil {
				break
			}
		}
	}
}

// A node whose disk fills while it runs stops (its status says why) and
// names the leader the others elected, never itself; it stays cheap (CPU,
// log lines) and stops at SIGTERM. Restarted on the disk still full, it
// answers health and status with 503 and why, backs off, logs the failure
// a few times rather than thousands, and burns no core; once space is
// freed it starts.
func TestClusterNodeOnAFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "disk")
	// Larger than the overload floor (liveness.DiskFloor), so that once
	// the filler is gone the node is not overloaded and comes back.
	mountTmpfs(t, disk, "160m")
	nodes := startClusterWith(t, dir, func(n *cnode) {
		if n.id == 3 {
			n.data = filepath.Join(disk, "n3")
		}
	})
	n3 := nodes[2]
	filler := filepath.Join(disk, "filler")
	fill(t, filler)

	// Writes through node 1 until node 3 stops.
	big := strings.Repeat("x", 16000)
	var st cluster.Status
	for i := 0; ; i++ {
		declare(nodes[i%2].addr, fmt.Sprintf("full-%d", i%4), fmt.Sprintf("full-%d", i), fmt.Sprintf(`{"promise":%q,"to":"bob","until":"2h"}`, big))
		var err error
		if st, err = clusterStatus(n3.addr); err == nil && st.Failed != "" {
			break
		}
		if i == 400 {
			t.Fatalf("node 3 did not stop on its full disk after %d writes: %+v", i, st)
		}
	}
	if !strings.Contains(st.Failed, "no space left on device") {
		t.Errorf("node 3 stopped for %q", st.Failed)
	}
	waitUntil(t, "node 3 naming the others' leaders", 20*time.Second, func() bool {
		st, err := clusterStatus(n3.addr)
		if err != nil {
			return false
		}
		for _, g := range st.Groups {
			if g.Leader == 3 || g.Leader == 0 || g.Role == "leader" {
				return false
			}
		}
		return true
	})
	if got := getAs(t, n3, cluster.HealthPath, ""); got != 503 {
		t.Errorf("health of the stopped node: %d", got)
	}
	measure := func(what string) {
		t.Helper()
		n3.mu.Lock()
		lines0 := n3.logLines
		n3.mu.Unlock()
		cpu0 := cpuTime(t, n3.cmd.Process.Pid)
		time.Sleep(5 * time.Second)
		cpu := cpuTime(t, n3.cmd.Process.Pid) - cpu0
		n3.mu.Lock()
		lines := n3.logLines - lines0
		n3.mu.Unlock()
		t.Logf("%s: %v of CPU and %d log lines in 5 s", what, cpu, lines)
		if cpu > 500*time.Millisecond || lines > 20 {
			t.Errorf("%s: %v of CPU and %d log lines in 5 s, want under 0.5 s and 20 lines", what, cpu, lines)
		}
	}
	measure("stopped on its full disk")
	n3.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n3.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the stopped node did not exit at SIGTERM")
	}

	// Restarted on the full disk: it answers why, cheaply.
	ready := n3.launch(t)
	var why string
	waitUntil(t, "node 3 answering why it cannot start", 20*time.Second, func() bool {
		res, err := httpc.Get(n3.url() + "/healthz")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		var doc struct{ Error, Code string }
		_ = json.NewDecoder(res.Body).Decode(&doc)
		why = doc.Error
		return res.StatusCode == 503 && doc.Code == cluster.CodeNodeStarting && strings.Contains(doc.Error, "no space left on device") &&
			res.Header.Get("Retry-After") != ""
	})
	t.Logf("node 3 says: %s", why)
	if got := getAs(t, n3, cluster.StatusPath, ""); got != 503 {
		t.Errorf("status of the node that cannot start: %d", got)
	}
	measure("restarted on its full disk")

	// Space freed, it starts and serves.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("node 3 exited: %s", n3.log())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("node 3 did not start once space was freed: %s", n3.log())
	}
	// Down this long, the failure detector settled it dead and the
	// placement driver took its groups to the others; back, with its disk
	// above the overload floor again, it refutes its death at a higher
	// incarnation, is settled alive and placed again, and every node is
	// healthy.
	waitUntil(t, "node 3 settled alive again", 60*time.Second, func() bool {
		ms, err := membersOf(nodes[0].addr)
		if err != nil {
			return false
		}
		m := memberOf(ms, 3)
		return m.Settled != nil && m.Settled.State == replica.LivenessAlive && m.Settled.Incarnation > 1
	})
	waitUntil(t, "every node healthy", 60*time.Second, func() bool {
		for _, n := range nodes {
			if getAs(t, n, cluster.HealthPath, "") != 200 {
				return false
			}
		}
		return true
	})
}
