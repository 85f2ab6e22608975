package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"tally/cluster/replica"
)

// A signed request is good once, at the node it names, in the cluster it
// names: played again at the same node it is refused (403 Replayed), and
// so it is after that node restarted and forgot what it saw, since the
// meta group recorded its nonce; played at another node it names the
// wrong node, and at another cluster with the same secret the wrong
// cluster. A backup, a read, is good once at its node too.
func TestSignedRequestsAreOneTime(t *testing.T) {
	dir := t.TempDir()
	n1 := startFirst(t, dir)
	n2 := startJoiner(t, dir, 2, n1)
	waitFor(t, "two voters in every group", 20*time.Second, func() bool { return allVoters(n1.Node, 2) })
	other := startFirst(t, t.TempDir()) // another cluster, the same secret
	secret := n1.cfg.Secret

	add := Sign(secret, n1.target(), AddRequest{Member: replica.Member{ID: 7, RaftAddr: "127.0.0.1:17", Addr: "127.0.0.1:18"}})
	if code, body := post(t, n1.cfg.Addr, AddNodePath, add); code != 200 {
		t.Fatalf("add-node: %d %s", code, body)
	}
	remove := Sign(secret, n1.target(), RemoveRequest{ID: 7})
	if code, body := post(t, n1.cfg.Addr, RemoveNodePath, remove); code != 200 {
		t.Fatalf("remove-node: %d %s", code, body)
	}
	for _, c := range []struct {
		name string
		at   *testNode
		req  any
		path string
		code string
	}{
		{"the add again at node 1", n1, add, AddNodePath, CodeReplayed},
		{"the add at node 2", n2, add, AddNodePath, CodeWrongNode},
		{"the add at another cluster", other, add, AddNodePath, CodeWrongCluster},
		{"the removal at another cluster", other, remove, RemoveNodePath, CodeWrongCluster},
	} {
		code, body := post(t, c.at.cfg.Addr, c.path, c.req)
		if code != http.StatusForbidden || !strings.Contains(body, `"code":"`+c.code+`"`) {
			t.Fatalf("%s: %d %s, want 403 %s", c.name, code, body, c.code)
		}
	}
	if slices.ContainsFunc(n1.Replica().Members(), func(m replica.Member) bool { return m.ID == 7 }) {
		t.Fatal("a replayed add-node added node 7 back")
	}

	// Restarted, node 1 has forgotten the nonces it saw; the meta group
	// has not.
	n1.stop(t)
	n1 = startNode(t, n1.cfg)
	t.Cleanup(func() { n1.stop(t) })
	waitFor(t, "node 1 healthy again", 20*time.Second, func() bool { return healthy(n1) && healthy(n2) })
	code, body := post(t, n1.cfg.Addr, AddNodePath, add)
	if code != http.StatusForbidden || !strings.Contains(body, `"code":"Replayed"`) || !strings.Contains(body, "at this node or another") {
		t.Fatalf("the add replayed at node 1 restarted: %d %s", code, body)
	}
	if slices.ContainsFunc(n1.Replica().Members(), func(m replica.Member) bool { return m.ID == 7 }) {
		t.Fatal("a replayed add-node added node 7 back")
	}

	// A backup request is one-time at its node, and taken by no other.
	var bk SignedAt
	waitFor(t, "a backup through node 2", 20*time.Second, func() bool {
		bk = SignBackup(secret, n2.target(), time.Now())
		code, _, _ := takeSigned(t, n2, bk)
		return code == 200
	})
	for _, at := range []*testNode{n2, n1} {
		if code, body, _ := takeSigned(t, at, bk); code != http.StatusForbidden {
			t.Fatalf("the backup replayed at node %d: %d %s", at.ID(), code, body)
		}
	}
}

// takeSigned posts a signed backup request to n.
func takeSigned(t *testing.T, n *testNode, req SignedAt) (int, []byte, http.Header) {
	t.Helper()
	b, _ := json.Marshal(req)
	res, err := http.Post("http://"+n.cfg.Addr+BackupPath, "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, body, res.Trailer
}

// A transfer to a voter that does not answer is asked of raft and not
// completed: 504 TransferPending, never a 500.
func TestTransferToAStoppedVoter(t *testing.T) {
	nodes := startThree(t)
	ctx := context.Background()
	st, err := nodes[0].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g := st.Groups[1]
	leader := nodes[g.Leader-1]
	var stopped *testNode
	for _, n := range nodes {
		if n != leader {
			stopped = n
		}
	}
	stopped.stop(t)
	start := time.Now()
	code, body := post(t, leader.cfg.Addr, TransferLeaderPath, Sign(leader.cfg.Secret, leader.target(), TransferRequest{Group: g.Group, To: stopped.ID()}))
	if code != http.StatusGatewayTimeout || !strings.Contains(body, `"code":"TransferPending"`) || !strings.Contains(body, "has not within") {
		t.Fatalf("transfer to stopped node %d: %d %s", stopped.ID(), code, body)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("the transfer was answered after %v", d)
	}
}

// healthy says n reaches a quorum in every group.
func healthy(n *testNode) bool {
	res, err := http.Get("http://" + n.cfg.Addr + HealthPath)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// The join and the operator's requests are decoded strictly by the
// server's route table: a member the document does not have is refused by
// name, at the top or inside the member record (400; BadJoin for a join),
// a body of another media type (415) or past RequestMax (413) before it is
// used; each leaves the membership and the node's nonces as they were.
func TestClusterRequestsAreDecodedStrictly(t *testing.T) {
	n := startFirst(t, t.TempDir())
	waitFor(t, "node 1 a member", 20*time.Second, func() bool { return len(n.Replica().Members()) == 1 })
	members := n.Replica().Members()
	send := func(path, media, body string) (int, string) {
		res, err := http.Post("http://"+n.cfg.Addr+path, media, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	add := Sign(n.cfg.Secret, n.target(), AddRequest{Member: replica.Member{ID: 2, RaftAddr: "127.0.0.1:1", Addr: "127.0.0.1:2"}})
	withMember := func(v any, name string, inside bool) string {
		b, _ := json.Marshal(v)
		var doc map[string]any
		json.Unmarshal(b, &doc)
		if inside {
			doc["member"].(map[string]any)[name] = "z"
		} else {
			doc[name] = 1
		}
		b, _ = json.Marshal(doc)
		return string(b)
	}
	doc := func(msg, code string) string {
		b, _ := json.Marshal(msg)
		return `{"schema_version":1,"error":` + string(b) + `,"code":"` + code + `"}` + "\n"
	}
	for _, c := range []struct {
		what, path, media, body string
		status                  int
		doc                     string
	}{
		{"an unknown member", TransferLeaderPath, "application/json", withMember(Sign(n.cfg.Secret, n.target(), TransferRequest{Group: 1, To: 1}), "too", false), 400,
			doc("too: is not a field of this command (at, cluster_id, group, mac, node_id, nonce, to)", "invalid")},
		{"an unknown member of the member", AddNodePath, "application/json", withMember(add, "zone_name", true), 400,
			doc("zone_name: is not a field of this command (at, cluster_id, mac, member, node_id, nonce)", "invalid")},
		{"an unknown member of a join", JoinPath, "application/json", withMember(newJoinRequest(n.cfg, ""), "secret", false), 400,
			doc("join: secret: is not a field of this command (at, cluster_id, mac, member, nonce)", CodeBadJoin)},
		{"another media type", RemoveNodePath, "text/plain", `{}`, 415,
			doc(`Content-Type: must be application/json (got "text/plain")`, "UnsupportedMediaType")},
		{"a body past RequestMax", PlacePath, "application/json", `{"tenant":"` + strings.Repeat("t", RequestMax) + `"}`, 413,
			doc(fmt.Sprintf("body: at most %d bytes", RequestMax), "invalid")},
	} {
		code, body := send(c.path, c.media, c.body)
		if code != c.status || body != c.doc {
			t.Errorf("%s: %d %s, want %d %s", c.what, code, body, c.status, c.doc)
		}
	}
	if got := n.Replica().Members(); !reflect.DeepEqual(got, members) {
		t.Fatalf("members after refused requests: %+v", got)
	}
	// The add's nonce was not taken: the same request, well formed, is.
	b, _ := json.Marshal(add)
	if code, body := send(AddNodePath, "application/json", string(b)); code != 200 {
		t.Fatalf("add-node after the refusals: %d %s", code, body)
	}
}
