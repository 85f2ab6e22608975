package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearerRT adds a bearer token to every request.
type bearerRT struct{ token string }

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects an MCP client to a node's /mcp with a token.
func mcpSession(t *testing.T, n *cnode, token string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	tr := &sdk.StreamableClientTransport{Endpoint: n.url() + "/mcp", HTTPClient: &http.Client{Transport: bearerRT{token}}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "0"}, opts).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("mcp connect to node %d: %v", n.id, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// MCP against a cluster: a tenant's token minted through one node works on
// every node's /mcp; a promise declared through one node's tool is read
// through another's, and a subscriber on a third hears of it.
func TestClusterMCP(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startClusterWith(t, t.TempDir(), func(n *cnode) { n.secure = true })
	var admin string
	waitUntil(t, "the first admin token", 30*time.Second, func() bool {
		admin = firstToken(nodes[0].printed())
		return admin != ""
	})
	mint := func(participant string) string {
		r := run(t, runOpts{env: []string{"TALLY_URL=" + nodes[0].url(), "TALLY_TOKEN=" + admin}}, "token", "create", "--tenant", "acme", "--participant", participant)
		if r.code != 0 {
			t.Fatalf("token: %v", r)
		}
		return strings.TrimSpace(r.out)
	}
	reviewer, author := mint("reviewer"), mint("author")

	updates := make(chan string, 16)
	sub := mcpSession(t, nodes[2], author, &sdk.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
		updates <- r.Params.URI
	}})
	ctx := context.Background()
	if err := sub.Subscribe(ctx, &sdk.SubscribeParams{URI: "tally://sessions/mcp/owed/reviewer"}); err != nil {
		t.Fatal(err)
	}
	writer := mcpSession(t, nodes[1], reviewer, nil)
	var res *sdk.CallToolResult
	waitUntil(t, "a declaration through node 2's MCP tool", 30*time.Second, func() bool {
		var err error
		res, err = writer.CallTool(ctx, &sdk.CallToolParams{Name: "tally_promise",
			Arguments: map[string]any{"action": "declare", "session": "mcp", "id": "m1", "promise": "review 92", "to": "author", "until": "2h", "request_id": "mcp-1"}})
		return err == nil && !res.IsError
	})
	reader := mcpSession(t, nodes[0], author, nil)
	list, err := reader.CallTool(ctx, &sdk.CallToolParams{Name: "tally_promise_read", Arguments: map[string]any{"action": "list", "session": "mcp", "state": "all"}})
	if err != nil || list.IsError {
		t.Fatalf("list through node 1: %v %+v", err, list)
	}
	b := list.Content[0].(*sdk.TextContent).Text
	if !strings.Contains(b, `"id":"m1"`) || !strings.Contains(b, `"by":"reviewer"`) {
		t.Fatalf("list through node 1: %s", b)
	}
	select {
	case uri := <-updates:
		if uri != "tally://sessions/mcp/owed/reviewer" {
			t.Fatalf("update of %s", uri)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the subscriber on node 3 heard nothing of the declaration")
	}
}
