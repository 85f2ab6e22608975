package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

// The console is served by a cluster node, over what its replica holds: a
// promise declared through one node is in another node's session list,
// summary and promise history once that node applied it.
func TestClusterConsoleReadsTheReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCluster(t, t.TempDir())
	waitUntil(t, "a declaration through node 1", 30*time.Second, func() bool {
		code, _, _ := declare(nodes[0].addr, "console", "c-1", `{"id":"p-1","promise":"show me","to":"bob","until":"2h"}`)
		return code == 201
	})
	get := func(n *cnode, path string) (int, string) {
		res, err := httpc.Get(n.url() + path)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	other := nodes[2]
	waitUntil(t, "node 3's console listing the session", 20*time.Second, func() bool {
		code, body := get(other, "/v1/tenants/acme/sessions")
		return code == 200 && strings.Contains(body, `"console"`)
	})
	// The listing can see the session's directory a moment before the
	// replica has applied the declaration into its log: wait for the record.
	waitUntil(t, "node 3 applying the declaration", 20*time.Second, func() bool {
		code, body := get(other, "/v1/tenants/acme/sessions/console/promises/p-1/history")
		return code == 200 && strings.Contains(body, `"show me"`)
	})
	for path, want := range map[string]string{
		"/": "<html",
		"/v1/tenants/acme/sessions/console/summary":              `"promises"`,
		"/v1/tenants/acme/sessions/console/promises/p-1/history": `"show me"`,
	} {
		code, body := get(other, path)
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET %s on node 3: %d %.300s", path, code, body)
		}
	}
}
