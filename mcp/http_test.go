package mcp_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tally/auth"
	"tally/server"
	"tally/store"
)

// bearer adds a token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// httpServer is `tally serve`'s handler on 127.0.0.1 with a token for each
// of who (tenant/participant).
func httpServer(t *testing.T, who ...string) (url string, tokens map[string]string) {
	return httpServerWith(t, nil, who...)
}

// httpServerWith is httpServer with its configuration tuned.
func httpServerWith(t *testing.T, tune func(*server.Config), who ...string) (url string, tokens map[string]string) {
	t.Helper()
	root := t.TempDir()
	if err := store.Init(root); err != nil {
		t.Fatal(err)
	}
	cfg := server.DefaultConfig()
	cfg.Root = root
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Ledger.Now = func() time.Time { return t0 }
	cfg.StreamPoll = 50 * time.Millisecond
	cfg.WatchEvery = 0
	if tune != nil {
		tune(&cfg)
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); s.Close() })
	tokens = map[string]string{}
	st := auth.Open(root)
	for _, w := range who {
		tenant, participant, _ := strings.Cut(w, "/")
		secret, _, err := st.Create(tenant, participant, auth.RoleAgent, t0)
		if err != nil {
			t.Fatal(err)
		}
		tokens[participant] = secret
	}
	return ts.URL, tokens
}

func httpClient(t *testing.T, url, token string, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	return httpClientVia(t, url, bearer{token, http.DefaultTransport}, opts)
}

func httpClientVia(t *testing.T, url string, rt http.RoundTripper, opts *sdk.ClientOptions) *sdk.ClientSession {
	t.Helper()
	tr := &sdk.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, opts).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Over streamable HTTP each call acts as its token's identity, in its
// token's tenant only; a subscribed resource is told of the commit that
// changes it, and a subscriber of another tenant is told nothing.
func TestStreamableHTTP(t *testing.T) {
	url, tokens := httpServer(t, "acme/reviewer", "acme/author", "globex/foreign")
	updates := make(chan string, 16)
	foreignUpdates := make(chan string, 16)
	author := httpClient(t, url, tokens["author"], &sdk.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
		updates <- r.Params.URI
	}})
	foreign := httpClient(t, url, tokens["foreign"], &sdk.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
		foreignUpdates <- r.Params.URI
	}})
	reviewer := httpClient(t, url, tokens["reviewer"], nil)
	ctx := context.Background()
	for _, cs := range []*sdk.ClientSession{author, foreign} {
		if err := cs.Subscribe(ctx, &sdk.SubscribeParams{URI: "tally://owed/reviewer"}); err != nil {
			t.Fatal(err)
		}
	}

	d := ok(t, reviewer, "tally_promise_declare", map[string]any{"id": "h1", "promise": "x", "to": "author", "until": "2h"})
	if str(d, "promise", "by") != "reviewer" {
		t.Fatalf("declared as %v", d)
	}
	select {
	case uri := <-updates:
		if uri != "tally://owed/reviewer" {
			t.Fatalf("update of %s", uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no resource update after the declaration")
	}
	// The token is the identity: a call cannot act as anyone else.
	if msg, code := refusal(t, author, "tally_promise_amend", map[string]any{"id": "h1", "until": "3h"}); code != "forbidden" || !strings.Contains(msg, "debtor") {
		t.Fatalf("author amending: %q %s", msg, code)
	}
	// Another tenant's token sees nothing of acme.
	for _, args := range []map[string]any{{"id": "h1", "session": "acme/default"}, {"id": "h1"}} {
		if _, code := refusal(t, foreign, "tally_promise_show", args); code != "not_found" && code != "NoSuchSession" {
			t.Fatalf("foreign show %v: %s", args, code)
		}
	}
	res, err := foreign.ReadResource(ctx, &sdk.ReadResourceParams{URI: "tally://owed/reviewer"})
	if err == nil && strings.Contains(res.Contents[0].Text, "h1") {
		t.Fatalf("the foreign tenant read acme's promise: %s", res.Contents[0].Text)
	}
	select {
	case uri := <-foreignUpdates:
		t.Fatalf("the foreign tenant was told of %s", uri)
	case <-time.After(200 * time.Millisecond):
	}
	// Without a token there is no session at all.
	bare := &sdk.StreamableClientTransport{Endpoint: url + "/mcp", MaxRetries: -1}
	if _, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, nil).Connect(ctx, bare, nil); err == nil {
		t.Fatal("connected without a token")
	}
	// Behind a reverse proxy on the same host the Host is the proxy's: a
	// request with a token is served all the same.
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
	preq, _ := http.NewRequest("POST", url+"/mcp", strings.NewReader(init))
	preq.Host = "tally.example.org"
	preq.Header.Set("Authorization", "Bearer "+tokens["author"])
	preq.Header.Set("Content-Type", "application/json")
	preq.Header.Set("Accept", "application/json, text/event-stream")
	presp, err := http.DefaultClient.Do(preq)
	if err != nil {
		t.Fatal(err)
	}
	presp.Body.Close()
	if presp.StatusCode != http.StatusOK {
		t.Fatalf("initialize through a proxy's Host: %d", presp.StatusCode)
	}
	// A session is bound to its token: another token cannot continue it.
	req, _ := http.NewRequest("POST", url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer "+tokens["foreign"])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", reviewer.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Fatalf("another token continued the reviewer's session: %d", resp.StatusCode)
	}
}

// header sets one header on every request.
type header struct {
	name, value string
	next        http.RoundTripper
}

func (h header) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return h.next.RoundTrip(r)
}

// Under --insecure-dev a call acts as its X-Tally-Actor header, in any
// tenant, as a REST request does.
func TestStreamableHTTPInsecureDev(t *testing.T) {
	url, _ := httpServerWith(t, func(c *server.Config) { c.Insecure = true })
	reviewer := httpClientVia(t, url, header{"X-Tally-Actor", "reviewer", http.DefaultTransport}, nil)
	d := ok(t, reviewer, "tally_promise_declare", map[string]any{"id": "d1", "promise": "x", "to": "author", "until": "2h", "session": "acme/work"})
	if str(d, "promise", "by") != "reviewer" {
		t.Fatalf("declared as %v", d)
	}
	author := httpClientVia(t, url, header{"X-Tally-Actor", "author", http.DefaultTransport}, nil)
	if _, code := refusal(t, author, "tally_promise_amend", map[string]any{"id": "d1", "until": "3h", "session": "acme/work"}); code != "forbidden" {
		t.Fatalf("author amending: %s", code)
	}
}
