package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/cluster"
	"tally/cluster/replica"
)

// receiver records what reaches an endpoint: lapses posted to a webhook,
// A2A SendMessage requests (each answered with a JSON-RPC result).
type receiver struct {
	mu   sync.Mutex
	hook []string // Idempotency-Key of each webhook post
	a2a  []string // message ids of each A2A lapse
}

func (rc *receiver) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		rc.mu.Lock()
		rc.hook = append(rc.hook, r.Header.Get("Idempotency-Key"))
		rc.mu.Unlock()
	})
	mux.HandleFunc("POST /rpc", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Message struct {
					MessageID string `json:"messageId"`
				} `json:"message"`
			} `json:"params"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		rc.mu.Lock()
		rc.a2a = append(rc.a2a, req.Params.Message.MessageID)
		rc.mu.Unlock()
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"message":{"messageId":"ok","role":"ROLE_AGENT","parts":[{"text":"noted"}]}}}`, req.ID)
	})
	return mux
}

func (rc *receiver) seen() (hook, a2a []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.hook...), append([]string(nil), rc.a2a...)
}

// A cluster keeps time and delivers: an expectation raised over A2A with a
// replyTo through one node lapses by the group leader's sweep (a replicated
// fact, the same on every node), and the lapse goes to the replyTo agent
// and to the webhook from the leader. A kill of that leader hands the
// delivery of a later lapse to the next one.
func TestClusterDeliversLapses(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	var rc receiver
	srv := httptest.NewServer(rc.handler())
	defer srv.Close()
	flags := []string{"--watch-every", "200ms", "--webhook", srv.URL + "/hook", "--a2a-lapse-hosts", strings.TrimPrefix(srv.URL, "http://")}
	nodes := startClusterWith(t, t.TempDir(), func(n *cnode) { n.extra = flags })
	n1 := nodes[0]

	raise := func(through *cnode, id string, due time.Time) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"raise-` + id + `","role":"ROLE_USER","taskId":"task-` + id + `",` +
			`"parts":[{"text":"an expectation"}],"metadata":{"urn:tally:ext:expect":{"expectationId":"` + id + `","kind":"doc.review","subject":{"type":"doc","id":"` + id + `"},` +
			`"satisfiedBy":{"factKey":"k-` + id + `"},"dueAt":"` + due.UTC().Format(time.RFC3339) + `","basis":"declared","by":"carol",` +
			`"replyTo":"` + srv.URL + `/rpc"}}}}}`
		code, out := a2aRPC(t, through.addr, "urn:tally:ext:expect", body)
		if code != 200 || strings.Contains(out, `"error"`) || !strings.Contains(out, `"replyTo"`) {
			t.Fatalf("raise %s with a replyTo through node %d: %d %s", id, through.id, code, out)
		}
	}
	raise(nodes[1], "e-1", time.Now().Add(2*time.Second))
	waitUntil(t, "the lapse at the replyTo agent and the webhook", 30*time.Second, func() bool {
		hook, a2a := rc.seen()
		return len(hook) >= 1 && len(a2a) >= 1
	})
	// The lapse is one replicated record, the same on every node.
	waitCaughtUp(t, nodes)
	logs := sameLogs(t, nodes)
	lapses := 0
	for _, b := range logs {
		lapses += strings.Count(string(b), `"type":"lapse"`)
	}
	if lapses != 1 {
		t.Fatalf("%d lapse records, want 1", lapses)
	}

	// The group's leader dies; its successor delivers the next lapse.
	leader := leaderOf(t, nodes, n1, replica.GroupOf(cluster.DefaultGroups, "acme", "s1"))
	leader.cmd.Process.Kill()
	<-leader.exited
	var live *cnode
	for _, n := range nodes {
		if n != leader {
			live = n
		}
	}
	waitUntil(t, "a raise through a live node after the kill", 30*time.Second, func() bool {
		req, _ := http.NewRequest("POST", live.url()+"/v1/tenants/acme/sessions/s1/a2a",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"task-e-1"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Extensions", "urn:tally:ext:expect")
		res, err := httpc.Do(req)
		if err != nil {
			return false
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		return res.StatusCode == 200 && !strings.Contains(string(out), `"error"`)
	})
	raise(live, "e-2", time.Now().Add(2*time.Second))
	// Both lapses, under two keys: a new leader may send the first again
	// (at least once, under its key), never under another.
	waitUntil(t, "the second lapse delivered by the new leader", 30*time.Second, func() bool {
		hook, a2a := rc.seen()
		return len(distinct(hook)) == 2 && len(distinct(a2a)) == 2
	})
	hook, a2a := rc.seen()
	t.Logf("webhook posts %v, A2A lapses %v", hook, a2a)
}

func distinct(keys []string) map[string]bool {
	out := map[string]bool{}
	for _, k := range keys {
		out[k] = true
	}
	return out
}
