package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tally/ledger"
	"tally/ledgerservice"
	"tally/mcp"
	"tally/refuse"
	"tally/service"
	"tally/store"
)

// t0 is the seed's declaration time: every write happens then.
var t0 = time.Date(2026, 8, 28, 20, 14, 3, 0, time.UTC)

// dirSessions opens the sessions of one ledger directory, as the CLI does:
// a session without a log is created only by a write.
type dirSessions struct {
	root    string
	cfg     ledger.Config
	ledgers ledger.OpenOnce
}

func (d *dirSessions) Open(_ context.Context, tenant, session string, create bool) (*ledger.Ledger, error) {
	key := tenant + "/" + session
	return d.ledgers.Get(key, func() (*ledger.Ledger, error) {
		dir, err := store.SessionDir(d.root, tenant, session)
		if err != nil {
			return nil, err
		}
		if !create && !store.HasLog(dir) {
			return nil, refuse.New("NoSuchSession", "session", "no session "+key)
		}
		return ledger.Open(dir, d.cfg)
	})
}

func (d *dirSessions) close() { d.ledgers.Close() }

// fixture is one ledger directory and its Service, which MCP servers of
// several identities share.
type fixture struct {
	t        testing.TB
	sessions *dirSessions
	svc      service.Service
	changes  func(ctx context.Context, tenant, session string) (<-chan struct{}, error)
	// readPaths lets the servers made after it is set read files.
	readPaths bool
	// logger, when set, is the log of the servers made after it is set.
	logger *slog.Logger
}

// subscriptionsTaken is a log handler that tells, on the channel, the URI
// of each subscription the server has taken (the SDK logs it once it
// holds it), and drops every other line.
type subscriptionsTaken chan string

func (s subscriptionsTaken) Enabled(context.Context, slog.Level) bool { return true }

func (s subscriptionsTaken) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "resource subscribed" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "uri" {
				select {
				case s <- a.Value.String():
				default: // nobody waits for so many: the server must not
				}
			}
			return true
		})
	}
	return nil
}

func (s subscriptionsTaken) WithAttrs([]slog.Attr) slog.Handler { return s }
func (s subscriptionsTaken) WithGroup(string) slog.Handler      { return s }

func newFixture(t testing.TB) *fixture {
	t.Helper()
	root := t.TempDir()
	if err := store.Init(root); err != nil {
		t.Fatal(err)
	}
	cfg := ledger.DefaultConfig()
	cfg.Now = func() time.Time { return t0 }
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ds := &dirSessions{root: root, cfg: cfg}
	t.Cleanup(ds.close)
	return &fixture{t: t, sessions: ds, svc: ledgerservice.New(ds, ledgerservice.Config{Now: cfg.Now, Timekeeper: cfg.Timekeeper,
		Root: func() (string, error) { return root, nil }})}
}

// server is an MCP server acting as who.
func (f *fixture) server(who mcp.Who) *mcp.Server {
	f.t.Helper()
	return f.serverOf(who, f.svc, nil)
}

// serverWith is an MCP server of svc with retry, acting as reviewer.
func (f *fixture) serverWith(svc service.Service, retry *service.Retry) *mcp.Server {
	f.t.Helper()
	return f.serverOf(mcp.Who{Actor: "reviewer"}, svc, retry)
}

func (f *fixture) serverOf(who mcp.Who, svc service.Service, retry *service.Retry) *mcp.Server {
	f.t.Helper()
	cfg := mcp.DefaultConfig()
	cfg.Service, cfg.Retry = svc, retry
	cfg.Identify = func(context.Context, *sdk.RequestExtra) (mcp.Who, error) { return who, nil }
	cfg.Now = func() time.Time { return t0.Add(4 * 24 * time.Hour) }
	cfg.Changes = f.changes
	cfg.ReadPaths = f.readPaths
	if f.logger != nil {
		cfg.Logger = f.logger
	}
	s, err := mcp.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(s.Close)
	return s
}

// client connects to a server acting as actor through the in-memory
// transport.
func (f *fixture) client(actor string) *sdk.ClientSession {
	return f.connect(f.server(mcp.Who{Actor: actor}), nil)
}

func (f *fixture) connect(s *mcp.Server, opts *sdk.ClientOptions) *sdk.ClientSession {
	f.t.Helper()
	ct, st := sdk.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.MCP().Connect(ctx, st, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "0"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// logSize is the default session's log, in bytes: what a refusal must
// leave as it was.
func (f *fixture) logSize(tenant, session string) int64 {
	dir, err := store.SessionDir(f.sessions.root, tenant, session)
	if err != nil {
		f.t.Fatal(err)
	}
	fi, err := os.Stat(store.LogPath(dir))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return fi.Size()
}

// call calls a tool, failing the test on a protocol error. name is a
// tool's, or TOOL/ACTION: the tool, given that action among args.
func call(t *testing.T, cs *sdk.ClientSession, name string, args any) *sdk.CallToolResult {
	t.Helper()
	name, args = withAction(name, args)
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// withAction splits TOOL/ACTION, setting the action among a copy of args.
func withAction(name string, args any) (string, any) {
	tool, action, ok := strings.Cut(name, "/")
	m, isMap := args.(map[string]any)
	if !ok || !isMap {
		return tool, args
	}
	with := map[string]any{"action": action}
	for k, v := range m {
		with[k] = v
	}
	return tool, with
}

// ok calls a tool that must succeed and returns its answer: its document,
// once, as text, with no structured content beside it.
func ok(t *testing.T, cs *sdk.ClientSession, name string, args any) map[string]any {
	t.Helper()
	res := call(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s %v: refused: %s", name, args, text(res))
	}
	if res.StructuredContent != nil || len(res.Content) != 1 {
		t.Fatalf("%s: the answer is not one text: %d contents, structured %v", name, len(res.Content), res.StructuredContent)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(text(res)), &m); err != nil {
		t.Fatalf("%s: the text is not a document: %q", name, text(res))
	}
	if m["schema_version"] != float64(1) {
		t.Fatalf("%s: no schema_version: %v", name, m)
	}
	return m
}

// wantRefused calls a tool as who that must be refused with code ("" any),
// its message holding says and, but for an idempotency refusal (the
// ledger's words), naming the field at fault ("FIELD: RULE"); and the
// default session's log must be as it was.
func (f *fixture) wantRefused(t *testing.T, who *sdk.ClientSession, name string, args any, code, says string) {
	t.Helper()
	size := f.logSize("default", "default")
	msg, got := refusal(t, who, name, args)
	if code != "" && got != code || !strings.Contains(msg, says) || got != "IdempotencyConflict" && !strings.Contains(msg, ": ") {
		t.Errorf("%s %.80v: %q (%s), want %s saying %q", name, args, msg, got, code, says)
	}
	if after := f.logSize("default", "default"); after != size {
		t.Fatalf("%s %.80v: the log grew from %d to %d bytes", name, args, size, after)
	}
}

// refusal calls a tool that must be refused and returns its error document.
func refusal(t *testing.T, cs *sdk.ClientSession, name string, args any) (msg, code string) {
	t.Helper()
	res := call(t, cs, name, args)
	if !res.IsError {
		t.Fatalf("%s %v: not refused: %s", name, args, text(res))
	}
	if res.StructuredContent != nil {
		t.Fatalf("%s: a refusal carries structured content %v", name, res.StructuredContent)
	}
	var doc struct {
		SchemaVersion int    `json:"schema_version"`
		Error         string `json:"error"`
		Code          string `json:"code"`
	}
	if err := json.Unmarshal([]byte(text(res)), &doc); err != nil || doc.SchemaVersion != 1 || doc.Code == "" {
		t.Fatalf("%s: the tool error is not an error document: %q (%v)", name, text(res), err)
	}
	return doc.Error, doc.Code
}

func text(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func jsonEqual(t *testing.T, s string, v any) bool {
	t.Helper()
	var a any
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		t.Fatalf("not JSON: %q", s)
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(v)
	return string(x) == string(y)
}

// tools lists the server's tools by name.
func tools(t *testing.T, cs *sdk.ClientSession) map[string]*sdk.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*sdk.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

func str(m map[string]any, path ...string) string {
	var v any = m
	for _, p := range path {
		mm, _ := v.(map[string]any)
		v = mm[p]
	}
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}
