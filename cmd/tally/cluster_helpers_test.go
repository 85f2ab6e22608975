package main

// Helpers of the multi-process cluster tests (partition, snapshot,
// history), over the node processes of cluster_e2e_test.go.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"tally/cluster"
	"tally/cluster/model"
	"tally/cluster/replica"
)

// startCluster starts a bootstrap node and joins two more, and waits until
// every group has three voters and a leader.
func startCluster(t *testing.T, dir string) []*cnode { return startClusterWith(t, dir, nil) }

// startClusterWith is startCluster with each node set up by tune (its
// flags, tokens) before it starts.
func startClusterWith(t *testing.T, dir string, tune func(*cnode)) []*cnode {
	t.Helper()
	var nodes []*cnode
	for id := uint64(1); id <= 3; id++ {
		join := []string{"--join", dir}
		if id == 1 {
			// Five replicas: every data group on every node, a joiner's
			// too, as these tests expect.
			join = []string{"--bootstrap", "--replicas", "5"}
		} else {
			join[1] = nodes[0].addr
		}
		n := newCNode(t, dir, id, join...)
		if tune != nil {
			tune(n)
		}
		n.start(t)
		nodes = append(nodes, n)
	}
	if nodes[0].secure {
		var admin string
		waitUntil(t, "the first admin token on node 1's stdout", 30*time.Second, func() bool {
			admin = firstToken(nodes[0].printed())
			return admin != ""
		})
		for _, n := range nodes {
			n.operator = admin
		}
	}
	waitUntil(t, "three voters and a leader in every group", 30*time.Second, func() bool {
		st, err := clusterStatusAs(nodes[0].addr, nodes[0].operator)
		return err == nil && settled(st)
	})
	return nodes
}

// sameLogs verifies every node's replica ledger and requires each
// session's log to be the same bytes on every node as on the first; it
// returns the first node's logs.
func sameLogs(t *testing.T, nodes []*cnode) map[string][]byte {
	t.Helper()
	ref := nodeLogs(t, nodes[0])
	for _, n := range nodes[1:] {
		logs := nodeLogs(t, n)
		if len(logs) != len(ref) {
			t.Errorf("node %d holds %d sessions, node %d holds %d", n.id, len(logs), nodes[0].id, len(ref))
		}
		for name, b := range ref {
			if !bytes.Equal(b, logs[name]) {
				t.Errorf("node %d's log of %s differs from node %d's", n.id, name, nodes[0].id)
			}
		}
	}
	return ref
}

// groupStatus is group g as node n sees it.
func groupStatus(n *cnode, g uint64) (cluster.GroupStatus, bool) {
	st, err := clusterStatusAs(n.addr, n.operator)
	if err != nil {
		return cluster.GroupStatus{}, false
	}
	for _, gs := range st.Groups {
		if gs.Group == g {
			return gs, true
		}
	}
	return cluster.GroupStatus{}, false
}

// leaderOf is the node leading group g, as the live node asks sees it.
func leaderOf(t *testing.T, nodes []*cnode, ask *cnode, g uint64) *cnode {
	t.Helper()
	var leader *cnode
	waitUntil(t, fmt.Sprintf("a leader of group %d", g), 20*time.Second, func() bool {
		gs, ok := groupStatus(ask, g)
		if !ok || gs.Leader == 0 {
			return false
		}
		leader = nodes[gs.Leader-1]
		return true
	})
	return leader
}

// sessionOf names a session (prefix, prefix-1, …) that lands in group g.
func sessionOf(prefix string, g uint64) string {
	s := prefix
	for i := 1; replica.GroupOf(cluster.DefaultGroups, "acme", s) != g; i++ {
		s = fmt.Sprintf("%s-%d", prefix, i)
	}
	return s
}

// declareText declares a promise of that text under key and returns the
// status and the sequence the ledger gave it.
func declareText(addr, session, key, text string) (code int, seq uint64, resp string) {
	code, resp, ok := declare(addr, session, key, fmt.Sprintf(`{"promise":%q,"to":"bob","until":"2h"}`, text))
	if !ok || code != 201 {
		return code, 0, resp
	}
	var doc struct{ Seq uint64 }
	if err := json.Unmarshal([]byte(resp), &doc); err != nil {
		return 0, 0, resp
	}
	return code, doc.Seq, resp
}

// entry is a promise as a read returns it: its text and its sequence.
type entry struct {
	Value string
	Seq   uint64
}

// texts are the entries' texts, in order.
func texts(log []entry) []string {
	out := []string{}
	for _, e := range log {
		out = append(out, e.Value)
	}
	return out
}

// readEntries reads a session's promises through a node (a linearizable
// read): each one's text and sequence, in log order. A session no write
// has made yet reads as empty.
func readEntries(addr, session string) (int, []entry) {
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/tenants/acme/sessions/"+session+"/promises?state=all", nil)
	req.Header.Set("X-Tally-Actor", "alice")
	res, err := httpc.Do(req)
	if err != nil {
		return 0, nil
	}
	defer res.Body.Close()
	var doc struct {
		Code     string `json:"code"`
		Promises []struct {
			Promise string
			Seq     uint64
		} `json:"promises"`
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		return 0, nil
	}
	if res.StatusCode == http.StatusNotFound && doc.Code == "NoSuchSession" {
		return 200, []entry{}
	}
	if res.StatusCode != 200 {
		return res.StatusCode, nil
	}
	out := []entry{}
	for _, p := range doc.Promises {
		out = append(out, entry{Value: p.Promise, Seq: p.Seq})
	}
	return 200, out
}

// exchange sends req through httpc and returns the status and the whole
// body, failing the test if either cannot be had.
func exchange(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	res, err := httpc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// readHistory reads through read until stopped, and records each read
// answered as an operation of *history (under mu) by client, for
// porcupine to check; an unanswered read has no effect.
func readHistory(stopped func() bool, mu *sync.Mutex, history *[]porcupine.Operation, client int, session string, read func(r int) ([]string, bool)) {
	for r := 0; !stopped(); r++ {
		called := time.Now()
		values, ok := read(r)
		if !ok {
			continue
		}
		mu.Lock()
		*history = append(*history, porcupine.Operation{ClientId: client, Input: model.Op{Read: true, Session: session},
			Call: called.UnixNano(), Output: model.Out{Values: values}, Return: time.Now().UnixNano()})
		mu.Unlock()
	}
}
