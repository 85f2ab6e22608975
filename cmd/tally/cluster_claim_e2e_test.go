package main

// The claims family against a cluster: the CLI with TALLY_URL at a node
// that does not lead the session's group, as against `tally serve`.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tally/store"
)

// waitSpread waits until the leadership of the groups has spread over the
// nodes (each leads some, none more than one above another), so that no
// leadership moves under the writes that follow.
func waitSpread(t *testing.T, nodes []*cnode) {
	t.Helper()
	waitUntil(t, "the leadership spread over the nodes", 30*time.Second, func() bool {
		st, err := clusterStatus(nodes[0].addr)
		if err != nil || !settled(st) {
			return false
		}
		leads := map[uint64]int{}
		for _, g := range st.Groups {
			leads[g.Leader]++
		}
		lo, hi := len(st.Groups), 0
		for _, n := range nodes {
			lo, hi = min(lo, leads[n.id]), max(hi, leads[n.id])
		}
		return lo > 0 && hi-lo <= 1
	})
}

// The seed's story with `tally claim …`, `tally artifact put/get` and the
// check verbs through a follower of the session's group: an artifact of
// several chunks put there is read back whole through another node; every
// node's logs are the same bytes and verify; every node holds the same
// objects, the artifact's among them.
func TestClusterClaimVerbsThroughAFollower(t *testing.T) {
	nodes := startCluster(t, t.TempDir())
	leader := parserLeader(t, nodes)
	follower, other := nodes[leader.id%3], nodes[(leader.id+1)%3]
	work := t.TempDir()
	patch := bytes.Repeat([]byte("+\tif len(s) < 6 { return errIncomplete } // fixed escape\n"), 30000) // > 1 MiB
	for name, b := range map[string][]byte{"patch.txt": patch, "tests.log": []byte("4 of 4 pass\n"), "review.md": []byte("unchecked read after the escape\n")} {
		if err := os.WriteFile(filepath.Join(work, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// tally runs a verb through node n; one the node could not serve now
	// (503, a leader moving) is retried under its request id.
	tally := func(n *cnode, stdin string, args ...string) string {
		t.Helper()
		return tallyThrough(t, n, work, stdin, args...)
	}
	const c17 = `{"claim":"C17","respondent":"parser","work":"reject incomplete Unicode escapes",
 "slots":[{"name":"change","mode":"required","checks":[
  {"id":"behavior","validator":{"name":"command","version":"1"},"evaluator":"maintainer","mode":"required","attempts":2},
  {"id":"review","validator":{"name":"review","version":"1"},"evaluator":"maintainer","mode":"required","phases":["quality"],"attempts":1}]}]}`
	tally(follower, c17, "claim", "create", "-", "--as", maintainer, "--request-id", "create")
	tally(follower, "", "claim", "post", "C17", "--as", maintainer, "--request-id", "post")
	tally(follower, "", "receipt", "acquire", "C17", "--as", parser, "--request-id", "receipt")
	put := tally(follower, "", "artifact", "put", "patch.txt", "--claim", "C17", "--slot", "change", "--generation", "1", "--kind", "patch",
		"--id", "patch-a", "--as", parser, "--request-id", "put", "--json")
	var doc struct{ Records []struct{ Size int64 } }
	if err := json.Unmarshal([]byte(put), &doc); err != nil || len(doc.Records) != 1 || doc.Records[0].Size != int64(len(patch)) {
		t.Fatalf("artifact put: %v %.300s", err, put)
	}
	tally(follower, "", "testament", "close", "C17", "--id", "T1", "--generation", "1", "--outcome", "complete", "--summary", "length check",
		"--bind", "change=patch-a", "--as", parser, "--request-id", "close")
	tally(follower, "", "testament", "post", "C17", "T1", "--as", parser, "--request-id", "tpost")
	tally(follower, "", "testament", "receive", "C17", "T1", "--as", maintainer, "--request-id", "treceive")
	tally(follower, "", "check", "begin", "behavior", "--claim", "C17", "--artifact", "patch-a", "--as", maintainer, "--request-id", "begin")
	tally(follower, "", "check", "report", "behavior", "--claim", "C17", "--artifact", "patch-a", "--result", "pass",
		"--evidence-file", "tests.log", "--as", maintainer, "--request-id", "behavior")
	tally(other, "", "check", "report", "review", "--claim", "C17", "--artifact", "patch-a", "--result", "fail",
		"--evidence-file", "review.md", "--note", "unchecked read", "--as", maintainer, "--request-id", "review")
	if show := tally(other, "", "claim", "show", "C17"); !strings.Contains(show, "ValidationFailed") {
		t.Fatalf("claim show through node %d:\n%s", other.id, show)
	}

	// The bytes, read back through another node; its custody verified.
	got := filepath.Join(work, "got.patch")
	tally(other, "", "artifact", "get", "patch-a", "--claim", "C17", "-o", got)
	if b, err := os.ReadFile(got); err != nil || !bytes.Equal(b, patch) {
		t.Fatalf("patch-a read back through node %d: %d bytes, want %d (%v)", other.id, len(b), len(patch), err)
	}
	if out := tally(leader, "", "artifact", "verify"); strings.Count(out, " ok") != 3 {
		t.Fatalf("artifact verify through node %d:\n%s", leader.id, out)
	}

	waitCaughtUp(t, nodes)
	sameLogs(t, nodes)
	var objects []string
	for i, n := range nodes {
		got := objectsOf(t, n)
		if i == 0 {
			objects = got
			continue
		}
		if !slices.Equal(got, objects) || len(got) != 3 {
			t.Errorf("node %d holds objects %v, node %d %v", n.id, got, nodes[0].id, objects)
		}
	}
}

// objectsOf lists the content store objects of a node's replica ledger.
func objectsOf(t *testing.T, n *cnode) []string {
	t.Helper()
	root := store.ObjectsDir(filepath.Join(n.data, "ledger"))
	var out []string
	fans, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, fan := range fans {
		if !fan.IsDir() || fan.Name() == "tmp" {
			continue
		}
		files, err := os.ReadDir(filepath.Join(root, fan.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			out = append(out, fan.Name()+f.Name())
		}
	}
	return out
}
