package mcp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tally/auth"
	"tally/ledger"
	"tally/ledgerservice"
	"tally/mcp"
	"tally/promise"
	"tally/server"
	"tally/service"
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

	d := ok(t, reviewer, "tally_promise/declare", map[string]any{"id": "h1", "promise": "x", "to": "author", "until": "2h"})
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
	if msg, code := refusal(t, author, "tally_promise/amend", map[string]any{"id": "h1", "until": "3h"}); code != "forbidden" || !strings.Contains(msg, "debtor") {
		t.Fatalf("author amending: %q %s", msg, code)
	}
	// Another tenant's token sees nothing of acme.
	for _, args := range []map[string]any{{"id": "h1", "session": "acme/default"}, {"id": "h1"}} {
		if _, code := refusal(t, foreign, "tally_promise_read/show", args); code != "not_found" && code != "NoSuchSession" {
			t.Fatalf("foreign show %v: %s", args, code)
		}
	}
	res, err := foreign.ReadResource(ctx, &sdk.ReadResourceParams{URI: "tally://owed/reviewer"})
	if err == nil && strings.Contains(res.Contents[0].Text, "h1") {
		t.Fatalf("the foreign tenant read acme's promise: %s", res.Contents[0].Text)
	}
	// Told of a commit of its own tenant, made after acme's, and of
	// nothing before it: the update of acme's commit, had it leaked,
	// would come first. (A session other than the one subscribed above,
	// so that the commit changes that subscription's resource in no way.)
	if err := foreign.Subscribe(ctx, &sdk.SubscribeParams{URI: "tally://sessions/other/open"}); err != nil {
		t.Fatal(err)
	}
	ok(t, foreign, "tally_promise/declare", map[string]any{"session": "other", "id": "g1", "promise": "x", "to": "someone", "until": "2h"})
	select {
	case uri := <-foreignUpdates:
		if uri != "tally://sessions/other/open" {
			t.Fatalf("the foreign tenant was told of %s", uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no resource update after the foreign tenant's own declaration")
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
	d := ok(t, reviewer, "tally_promise/declare", map[string]any{"id": "d1", "promise": "x", "to": "author", "until": "2h", "session": "acme/work"})
	if str(d, "promise", "by") != "reviewer" {
		t.Fatalf("declared as %v", d)
	}
	author := httpClientVia(t, url, header{"X-Tally-Actor", "author", http.DefaultTransport}, nil)
	if _, code := refusal(t, author, "tally_promise/amend", map[string]any{"id": "d1", "until": "3h", "session": "acme/work"}); code != "forbidden" {
		t.Fatalf("author amending: %s", code)
	}
}

// A session that ends without unsubscribing holds nothing: with room for
// one watched resource, a second session's subscription is watched (its
// update sent) once the first session, which held another, is gone.
func TestSubscriptionsEndWithTheirSession(t *testing.T) {
	f := newFixture(t)
	var mu sync.Mutex
	var watching []chan struct{}
	f.changes = func(ctx context.Context, _, _ string) (<-chan struct{}, error) {
		ch := make(chan struct{}, 1)
		mu.Lock()
		watching = append(watching, ch)
		mu.Unlock()
		return ch, nil
	}
	commit := func() {
		mu.Lock()
		defer mu.Unlock()
		for _, ch := range watching {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	cfg := mcp.DefaultConfig()
	cfg.Service = f.svc
	cfg.Identify = func(context.Context, *sdk.RequestExtra) (mcp.Who, error) { return mcp.Who{Actor: "reviewer"}, nil }
	cfg.Changes = f.changes
	cfg.SubscriptionsMax = 1
	s, err := mcp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	ctx := context.Background()
	first := f.connect(s, nil)
	if err := first.Subscribe(ctx, &sdk.SubscribeParams{URI: "tally://owed/reviewer"}); err != nil {
		t.Fatal(err)
	}
	// The first holds its resource (the subscription is a stream; wait for
	// its watch).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(watching)
		mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first subscription is not watched")
		}
	}
	first.Close()
	updates := make(chan string, 16)
	second := f.connect(s, &sdk.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
		updates <- r.Params.URI
	}})
	reviewer := f.client("reviewer")
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		// Subscribing again until the first's hold is released: one past
		// the bound is refused while it stands.
		second.Unsubscribe(ctx, &sdk.UnsubscribeParams{URI: "tally://sessions/default/open"})
		if err := second.Subscribe(ctx, &sdk.SubscribeParams{URI: "tally://sessions/default/open"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		ok(t, reviewer, "tally_promise/declare", map[string]any{"id": fmt.Sprintf("p%d", i), "promise": "x", "to": "author", "until": "2h"})
		commit()
		select {
		case uri := <-updates:
			if uri != "tally://sessions/default/open" {
				t.Fatalf("update of %s", uri)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the ended session still holds its subscription: the second is never watched")
		}
	}
}

// rawSession is a session of the protocol's 2025-06-18 version (where a
// subscription is a request of its own) over pipes, line by line.
type rawSession struct {
	in   *io.PipeWriter
	out  *bufio.Scanner
	done chan error
}

func newRawSession(t *testing.T, s *mcp.Server) *rawSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	r := &rawSession{in: inW, out: bufio.NewScanner(outR), done: make(chan error, 1)}
	go func() { r.done <- s.Run(context.Background(), &sdk.IOTransport{Reader: inR, Writer: outW}) }()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	r.call(t, 1, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}`)
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	return r
}

// call sends a request and returns its answer's line.
func (r *rawSession) call(t *testing.T, id int, method, params string) string {
	t.Helper()
	fmt.Fprintf(r.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", id, method, params)
	for r.out.Scan() {
		if strings.Contains(r.out.Text(), fmt.Sprintf(`"id":%d,`, id)) {
			return r.out.Text()
		}
	}
	t.Fatalf("%s: no answer", method)
	return ""
}

// Under the 2025-06-18 protocol a session that ends without unsubscribing
// releases what it held: past the bound, a second session's subscription
// is refused while the first stands and taken once it has gone.
func TestLegacySubscriptionsEndWithTheirSession(t *testing.T) {
	f := newFixture(t)
	cfg := mcp.DefaultConfig()
	cfg.Service = f.svc
	cfg.Identify = func(context.Context, *sdk.RequestExtra) (mcp.Who, error) { return mcp.Who{Actor: "reviewer"}, nil }
	cfg.SubscriptionsMax = 1
	s, err := mcp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	first := newRawSession(t, s)
	if got := first.call(t, 2, "resources/subscribe", `{"uri":"tally://owed/a"}`); strings.Contains(got, `"error"`) {
		t.Fatalf("first: %s", got)
	}
	second := newRawSession(t, s)
	if got := second.call(t, 2, "resources/subscribe", `{"uri":"tally://owed/b"}`); !strings.Contains(got, "at most 1 resources") {
		t.Fatalf("past the bound: %s", got)
	}
	first.in.Close()
	<-first.done
	for deadline, id := time.Now().Add(10*time.Second), 3; ; id++ {
		got := second.call(t, id, "resources/subscribe", `{"uri":"tally://owed/b"}`)
		if !strings.Contains(got, `"error"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ended session still holds its subscription: %s", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// On a local ledger (tally mcp), a subscribed resource is told of a
// commit made through the server and of one another process appended,
// through the Service's change feed (ledgerservice.Local.Changes).
func TestFollowLocalLedger(t *testing.T) {
	f := newFixture(t)
	feed := ledgerservice.New(f.sessions, ledgerservice.Config{FeedPoll: 20 * time.Millisecond})
	f.changes = func(ctx context.Context, tenant, session string) (<-chan struct{}, error) {
		return feed.Changes(ctx, service.Call{Tenant: tenant, Session: session})
	}
	taken := make(subscriptionsTaken, 4)
	f.logger = slog.New(taken)
	updates := make(chan string, 16)
	cs := f.connect(f.server(mcp.Who{Actor: "reviewer"}), &sdk.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) {
		updates <- r.Params.URI
	}})
	ok(t, cs, "tally_promise/declare", map[string]any{"id": "p0", "promise": "x", "to": "author", "until": "2h"})
	if err := cs.Subscribe(context.Background(), &sdk.SubscribeParams{URI: "tally://owed/reviewer"}); err != nil {
		t.Fatal(err)
	}
	// A subscription is a stream that Subscribe does not wait for: wait
	// until the server has taken it (read the resource and holds it), as
	// its log says.
	select {
	case uri := <-taken:
		if uri != "tally://owed/reviewer" {
			t.Fatalf("the server took a subscription of %s", uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription was never taken")
	}
	wait := func(what string) {
		t.Helper()
		select {
		case <-updates:
		case <-time.After(10 * time.Second):
			t.Fatalf("no update after %s", what)
		}
	}
	ok(t, cs, "tally_promise/declare", map[string]any{"id": "p1", "promise": "x", "to": "author", "until": "2h"})
	wait("a tool's declaration")
	// Another process: a ledger of its own on the same directory.
	dir, err := store.SessionDir(f.sessions.root, "default", "default")
	if err != nil {
		t.Fatal(err)
	}
	other, err := ledger.Open(dir, f.sessions.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, _, _, err := other.Execute(context.Background(), ledger.Command{Promise: promise.Declare{ID: "p2", Text: "y", By: "reviewer", To: "author", Until: t0.Add(time.Hour)}}, ledger.WriteOptions{Actor: "reviewer"}, nil); err != nil {
		t.Fatal(err)
	}
	wait("another process's declaration")
}
