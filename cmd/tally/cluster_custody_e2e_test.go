package main

// Evidence custody on a cluster of three processes: an artifact published
// while one voter is stopped (SIGSTOP) commits with the other two, but a
// check on it does not begin until the stopped node, woken, has verified
// its copy and committed its custody receipt: until then the begin is
// refused with 503 CustodyPending naming that node.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"tally/cluster"
	"tally/cluster/replica"
)

func TestClusterCheckBeginWaitsForEveryVotersCustody(t *testing.T) {
	nodes := startCluster(t, t.TempDir())
	leader := parserLeader(t, nodes)
	asked, stopped := nodes[leader.id%3], nodes[(leader.id+1)%3]
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "patch.txt"), bytes.Repeat([]byte("+\tif len(s) < 6 { return errIncomplete }\n"), 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	takeC17(t, asked, work)

	if err := stopped.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { stopped.cmd.Process.Signal(syscall.SIGCONT) }
	defer cont()
	deliverC17(t, asked, work)

	// One request, not retried: refused, naming the stopped node alone
	// once the two running nodes' receipts have committed.
	begin := func() (int, string, http.Header) { return beginC17(t, asked) }
	var doc struct {
		Code    string   `json:"code"`
		Missing []uint64 `json:"missing"`
	}
	waitUntil(t, "a refusal naming only the stopped node", 30*time.Second, func() bool {
		code, body, hdr := begin()
		if code != http.StatusServiceUnavailable {
			t.Fatalf("begin while node %d is stopped: %d %s", stopped.id, code, body)
		}
		if json.Unmarshal([]byte(body), &doc) != nil || doc.Code == cluster.CodeUnavailable {
			return false // a leader moving
		}
		if doc.Code != "CustodyPending" || hdr.Get("Retry-After") == "" {
			t.Fatalf("begin while node %d is stopped: %s (Retry-After %q)", stopped.id, body, hdr.Get("Retry-After"))
		}
		return len(doc.Missing) == 1 && doc.Missing[0] == stopped.id
	})
	show := run(t, runOpts{env: []string{"TALLY_URL=" + asked.url()}}, "claim", "show", "C17", "--session", "acme/parser")
	if show.code != 0 || !strings.Contains(show.out, "\ncustody\n") || !strings.Contains(show.out, fmt.Sprintf("pending: no receipt from node %d", stopped.id)) {
		t.Fatalf("claim show while node %d is stopped: %v", stopped.id, show)
	}
	cont()
	// Woken, it verifies its copy and commits its receipt; the CLI sends
	// the begin again by itself until then.
	tallyThrough(t, asked, work, "", "check", "begin", "behavior", "--claim", "C17", "--artifact", "patch-a", "--as", maintainer, "--request-id", "begin")
	show = run(t, runOpts{env: []string{"TALLY_URL=" + asked.url()}}, "claim", "show", "C17", "--session", "acme/parser")
	if show.code != 0 || !regexp.MustCompile(`patch-a +group \d+, epoch \d+ +held by node 1, 2, 3 +whole`).MatchString(show.out) {
		t.Fatalf("claim show once custody is whole: %v", show)
	}
}

// parserLeader waits for the nodes to spread the groups' leaders and is
// the one leading session acme/parser's group.
func parserLeader(t *testing.T, nodes []*cnode) *cnode {
	t.Helper()
	waitSpread(t, nodes)
	return leaderOf(t, nodes, nodes[0], replica.GroupOf(cluster.DefaultGroups, "acme", "parser"))
}

// beginC17 asks n, in one request that is not retried, to begin check
// behavior of claim C17 on artifact patch-a as the maintainer: the
// answer's status, body and headers.
func beginC17(t *testing.T, n *cnode) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("POST", n.url()+"/v1/tenants/acme/sessions/parser/claims/C17/checks/behavior/begin", strings.NewReader(`{"artifact":"patch-a"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tally-Actor", maintainer)
	res, err := httpc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

// tallyThrough runs a verb in session acme/parser through node n, from
// the directory work; one the node could not serve now (503, a leader
// moving) is retried under its request id. It returns stdout.
func tallyThrough(t *testing.T, n *cnode, work, stdin string, args ...string) string {
	t.Helper()
	o := runOpts{stdin: stdin, cwd: work, env: []string{"TALLY_URL=" + n.url()}}
	args = append(args, "--session", "acme/parser")
	r := run(t, o, args...)
	for try := 0; try < 10 && r.code != 0 && strings.Contains(r.err, cluster.CodeUnavailable); try++ {
		time.Sleep(200 * time.Millisecond)
		r = run(t, o, args...)
	}
	if r.code != 0 {
		t.Fatalf("through node %d: %v", n.id, r)
	}
	return r.out
}
