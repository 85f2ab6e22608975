package main

// A new voter establishes custody before new evaluations begin: on three
// nodes at --replicas 3, an artifact held by every voter; a fourth node
// joins and the third is drained, so the placement driver adds the fourth
// as a voter of every group (a new placement epoch). While the new node's
// content store cannot take a copy (its staging directory replaced by a
// file: a disk fault), `check begin` is refused CustodyPending naming it;
// repaired, it fetches a verified copy, commits its receipt at the new
// epoch, and the same begin succeeds. The custody policy is set and shown
// through the CLI on the way.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"tally/cluster"
	"tally/internal/proctest"
)

func TestClusterNewVoterEstablishesCustody(t *testing.T) {
	dir := t.TempDir()
	nodes := startPlaced(t, dir, []string{"a", "b", "c"}, "--replicas", "3")
	waitUntil(t, "every data group at 3 voters", 60*time.Second, func() bool {
		_, ok := placedAt(nodes[0], 3)
		return ok
	})
	asked := nodes[0]
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "patch.txt"), []byte(strings.Repeat("+\tif len(s) < 6 { return errIncomplete }\n", 2000)), 0o644); err != nil {
		t.Fatal(err)
	}
	tally := func(stdin string, args ...string) {
		t.Helper()
		tallyThrough(t, asked, work, stdin, args...)
	}
	publishC17(t, asked, work)
	custody := regexp.MustCompile(`patch-a +group \d+, epoch (\d+) +held by node ([\d, ]+?) +whole`)
	var before uint64
	waitUntil(t, "custody whole on nodes 1, 2, 3", 60*time.Second, func() bool {
		show := run(t, runOpts{env: []string{"TALLY_URL=" + asked.url()}}, "claim", "show", "C17", "--session", "acme/parser")
		m := custody.FindStringSubmatch(show.out)
		if show.code != 0 || m == nil || m[2] != "1, 2, 3" {
			return false
		}
		before, _ = strconv.ParseUint(m[1], 10, 64)
		return true
	})

	// The policy: a value that is not named is refused, naming the field;
	// status shows the policy in force.
	if r := run(t, secretEnv(), "cluster", "configure", "--custody", "most", "--node", asked.addr); r.code != 2 || !strings.Contains(r.err, `custody: must be "all" or "majority", not "most"`) {
		t.Fatalf("configure --custody most: %v", r)
	}
	if r := run(t, runOpts{}, "cluster", "status", "--node", nodes[1].addr); r.code != 0 || !strings.Contains(r.out, "\ncustody: all: a check begins once every voter of its artifact's group holds a verified copy\n") {
		t.Fatalf("status: %v", r)
	}

	// The fourth node joins; its content store takes nothing (a disk
	// fault) until repaired below.
	n4 := newCNode(t, dir, 4, "--join", asked.addr)
	n4.extra = []string{"--zone", "c", "--raft-tick", "50ms"}
	n4.start(t)
	nodes = append(nodes, n4)
	repair := breakStaging(t, n4)
	if r := run(t, secretEnv(), "cluster", "drain", "3", "--node", asked.addr); r.code != 0 {
		t.Fatalf("drain 3: %v", r)
	}
	waitUntil(t, "node 4 a voter of every data group in node 3's place", 90*time.Second, func() bool {
		st, ok := placedAt(asked, 3, 3)
		if !ok {
			return false
		}
		for _, g := range st.Placement.Groups {
			if g.Group != 1 && !slices.ContainsFunc(g.Voters, func(v cluster.NodeRef) bool { return v.ID == 4 }) {
				return false
			}
		}
		return true
	})

	// Refused, naming node 4, for as long as its copy cannot be stored.
	begin := func() (int, string) {
		code, body, _ := beginC17(t, asked)
		return code, body
	}
	var doc struct {
		Code    string   `json:"code"`
		Epoch   uint64   `json:"epoch"`
		Missing []uint64 `json:"missing"`
	}
	waitUntil(t, "a refusal naming node 4 alone", 60*time.Second, func() bool {
		code, body := begin()
		if code != http.StatusServiceUnavailable {
			t.Fatalf("begin while node 4 holds no copy: %d %s", code, body)
		}
		if json.Unmarshal([]byte(body), &doc) != nil || doc.Code == cluster.CodeUnavailable {
			return false // a leader moving
		}
		if doc.Code != "CustodyPending" {
			t.Fatalf("begin while node 4 holds no copy: %s", body)
		}
		return len(doc.Missing) == 1 && doc.Missing[0] == 4
	})
	if doc.Epoch <= before {
		t.Fatalf("the refusal's epoch %d is not past the one custody was whole at, %d", doc.Epoch, before)
	}
	for range 3 {
		if code, body := begin(); code != http.StatusServiceUnavailable || !strings.Contains(body, "CustodyPending") {
			t.Fatalf("begin while node 4 holds no copy: %d %s", code, body)
		}
	}

	// Repaired: node 4 fetches, verifies, receipts; the begin goes in.
	repair()
	tally("", "check", "begin", "behavior", "--claim", "C17", "--artifact", "patch-a", "--as", maintainer, "--request-id", "begin")
	show := run(t, runOpts{env: []string{"TALLY_URL=" + asked.url()}}, "claim", "show", "C17", "--session", "acme/parser")
	m := custody.FindStringSubmatch(show.out)
	if show.code != 0 || m == nil || m[2] != "1, 2, 4" {
		t.Fatalf("claim show once node 4 holds a copy: %v", show)
	}
	if e, _ := strconv.ParseUint(m[1], 10, 64); e <= before {
		t.Fatalf("custody whole at epoch %d, not past %d", e, before)
	}
	if got := hashFile(n4.objectPath(hashFile(filepath.Join(work, "patch.txt")))); got != hashFile(filepath.Join(work, "patch.txt")) {
		t.Fatalf("node 4 holds %q", got)
	}

	// What the nodes count: node 4's fetch and receipt, the refusals at
	// the node asked, the scrubber's bytes.
	for _, m := range []struct {
		n    *cnode
		name string
	}{
		{n4, "tally_cluster_custody_fetched_total"}, {n4, "tally_cluster_custody_receipts_total"},
		{asked, "tally_cluster_custody_pending_refusals_total"}, {asked, "tally_cluster_custody_receipts_total"},
	} {
		if v := metricOf(t, m.n, m.name); v < 1 {
			t.Errorf("node %d: %s %v", m.n.id, m.name, v)
		}
	}
	for _, name := range []string{"tally_cluster_custody_pending", "tally_cluster_custody_repaired_total", "tally_artifact_scrubbed_bytes_total", "tally_artifact_damaged_found_total", "tally_artifact_collected_bytes_total"} {
		if v := metricOf(t, n4, name); v < 0 {
			t.Errorf("node 4 has no %s", name)
		}
	}

	// Majority from now on, shown by status.
	if r := run(t, secretEnv(), "cluster", "configure", "--custody", "majority", "--node", nodes[1].addr); r.code != 0 || !strings.Contains(r.out, "custody majority (was all): a check begins once more than half the voters") {
		t.Fatalf("configure --custody majority: %v", r)
	}
	waitUntil(t, "status showing the majority policy", 10*time.Second, func() bool {
		r := run(t, runOpts{}, "cluster", "status", "--node", n4.addr)
		return r.code == 0 && strings.Contains(r.out, "\ncustody: majority: ")
	})
}

// publishC17 creates claim C17 in acme/parser through node asked, with a
// check, and takes it through to a received testament binding artifact
// patch-a, the bytes of work/patch.txt, published through that node.
func publishC17(t *testing.T, asked *cnode, work string) {
	t.Helper()
	takeC17(t, asked, work)
	deliverC17(t, asked, work)
}

// takeC17 creates and posts claim C17 (one required check, behavior, on
// slot change) through asked, and its respondent acquires the receipt.
func takeC17(t *testing.T, asked *cnode, work string) {
	t.Helper()
	tally := func(stdin string, args ...string) {
		t.Helper()
		tallyThrough(t, asked, work, stdin, args...)
	}
	tally(`{"claim":"C17","respondent":"parser","work":"w","slots":[{"name":"change","mode":"required","checks":[{"id":"behavior","validator":{"name":"command","version":"1"},"evaluator":"maintainer","mode":"required","attempts":2}]}]}`,
		"claim", "create", "-", "--as", maintainer, "--request-id", "create")
	tally("", "claim", "post", "C17", "--as", maintainer, "--request-id", "post")
	tally("", "receipt", "acquire", "C17", "--as", parser, "--request-id", "receipt")
}

// deliverC17 publishes work/patch.txt as C17's artifact patch-a through
// asked, and closes, posts and receives the testament binding it.
func deliverC17(t *testing.T, asked *cnode, work string) {
	t.Helper()
	tally := func(stdin string, args ...string) {
		t.Helper()
		tallyThrough(t, asked, work, stdin, args...)
	}
	tally("", "artifact", "put", "patch.txt", "--claim", "C17", "--slot", "change", "--generation", "1", "--id", "patch-a", "--as", parser, "--request-id", "put")
	tally("", "testament", "close", "C17", "--id", "T1", "--generation", "1", "--outcome", "complete", "--summary", "s",
		"--bind", "change=patch-a", "--as", parser, "--request-id", "close")
	tally("", "testament", "post", "C17", "T1", "--as", parser, "--request-id", "tpost")
	tally("", "testament", "receive", "C17", "T1", "--as", maintainer, "--request-id", "treceive")
}

// The console's claim view shows each artifact's custody on a cluster, in
// a real browser: pending, naming the node without a receipt, while that
// node's content store cannot take a copy; held by every voter once it
// is repaired; and every node's log is the same, the broken node's too.
// (A node stopped instead would soon be settled dead and replaced, and
// custody whole without it.)
func TestClusterConsoleShowsCustody(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		proctest.Skip(t, "the console in a browser: %s is not installed (apt-get install -y chromium)", chromiumPath)
	}
	node, pwDir := playwright.Find(t)
	nodes := startCluster(t, t.TempDir())
	leader := parserLeader(t, nodes)
	asked, bad := nodes[leader.id%3], nodes[(leader.id+1)%3]
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "patch.txt"), []byte("+\tif len(s) < 6 { return errIncomplete }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	repair := breakStaging(t, bad)
	publishC17(t, asked, work)
	browse := func(want string) {
		t.Helper()
		out := proctest.Script{Node: node, Dir: pwDir, Path: filepath.Join("testdata", "console", "custody.mjs"), Lib: []string{filepath.Join("testdata", "console", "page.mjs")}, Timeout: 2 * time.Minute,
			Env: append(baseEnv(), "BASE="+asked.url(), "VIEW=#/acme/parser/claim/C17", "ARTIFACT=patch-a", "WANT="+want, "OUT="+t.TempDir())}.Run(t)
		if !strings.Contains(string(out), "\nok\n") {
			t.Fatal("the browser script did not finish")
		}
	}
	browse(fmt.Sprintf("pending: no receipt from node %d", bad.id))
	repair()
	browse("held by node 1, 2, 3 at epoch ")
	// The node whose store failed applied the publication as the others
	// did: the record does not depend on a replica's disk.
	sameLogs(t, nodes)
}

// breakStaging makes node n's content store take no copy (its staging
// directory replaced by a file: a disk fault), and returns the repair.
func breakStaging(t *testing.T, n *cnode) (repair func()) {
	t.Helper()
	staging := filepath.Join(n.data, "ledger", "objects", "tmp")
	if err := os.RemoveAll(staging); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(staging, []byte("not a directory\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := os.Remove(staging); err != nil {
			t.Fatal(err)
		}
	}
}

// metricOf is the value of metric name in node n's /metrics; -1 when it
// has none.
func metricOf(t *testing.T, n *cnode, name string) float64 {
	t.Helper()
	res, err := httpc.Get(n.url() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("node %d: %s", n.id, l)
			}
			return f
		}
	}
	return -1
}
