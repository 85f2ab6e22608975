package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/expect"
	"tally/ledger"
	"tally/store"
)

var t0 = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	t      testing.TB
	srv    *Server
	ts     *httptest.Server
	root   string
	tokens map[string]string // participant → token
}

func newFixture(t testing.TB, tune ...func(*Config)) *fixture {
	root := t.TempDir()
	if err := store.Init(root); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Root = root
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Ledger.Now = func() time.Time { return t0 }
	cfg.StreamPoll = 50 * time.Millisecond
	for _, fn := range tune {
		fn(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); s.Close() })
	f := &fixture{t: t, srv: s, ts: ts, root: root, tokens: map[string]string{}}
	for _, who := range []string{"reviewer", "author", "observer"} {
		tok, _, err := fileTokens(s).Create("acme", who, "agent", t0)
		if err != nil {
			t.Fatal(err)
		}
		f.tokens[who] = tok
	}
	tok, _, _ := fileTokens(s).Create("other", "reviewer", "agent", t0)
	f.tokens["foreign"] = tok
	return f
}

func (f *fixture) do(method, path, who, body string, hdr ...string) (int, string, http.Header) {
	req, _ := http.NewRequest(method, f.ts.URL+path, strings.NewReader(body))
	if who != "" {
		req.Header.Set("Authorization", "Bearer "+f.tokens[who])
	}
	if body != "" { // the route's media type (PUT routes take bytes), unless hdr says otherwise
		req.Header.Set("Content-Type", map[bool]string{true: "application/octet-stream", false: "application/json"}[method == "PUT"])
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

const base = "/v1/tenants/acme/sessions/main"

func (f *fixture) logBytes() []byte {
	b, _ := os.ReadFile(filepath.Join(f.root, "sessions", "acme", "main", "log.jsonl"))
	return b
}

func TestPromiseLifecycleOverHTTP(t *testing.T) {
	f := newFixture(t)
	code, body, _ := f.do("POST", base+"/promises", "reviewer", `{"id":"desk/ship-91","promise":"hand back a reviewed schema","to":"author","until":"2026-09-01T17:00:00Z"}`)
	if code != 201 || !strings.Contains(body, `"id":"desk/ship-91"`) || !strings.Contains(body, `"state":"owed"`) {
		t.Fatalf("declare: %d %s", code, body)
	}
	// A slash in an id travels escaped in the path.
	code, body, _ = f.do("POST", base+"/promises/desk%2Fship-91/amend", "reviewer", `{"until":"2026-09-01T18:00:00Z","reason":"nudge 1"}`)
	if code != 200 || !strings.Contains(body, `"horizons":["2026-09-01T17:00:00Z","2026-09-01T18:00:00Z"]`) {
		t.Fatalf("amend: %d %s", code, body)
	}
	code, body, _ = f.do("POST", base+"/promises/desk%2Fship-91/assess", "observer", `{"note":"late"}`)
	if code != 200 || !strings.Contains(body, `"observer":"observer"`) {
		t.Fatalf("assess: %d %s", code, body)
	}
	code, body, _ = f.do("POST", base+"/promises/desk%2Fship-91/resolve", "reviewer", `{"as":"satisfied","evidence":["https://example.org/reviews/91"]}`)
	if code != 200 || !strings.Contains(body, `"state":"satisfied"`) {
		t.Fatalf("resolve: %d %s", code, body)
	}
	code, body, _ = f.do("GET", base+"/promises/desk%2Fship-91?now=2026-09-02T10:00:00Z", "author", "")
	want := `{"schema_version":1,"now":"2026-09-02T10:00:00Z","promise":{"id":"desk/ship-91","promise":"hand back a reviewed schema","by":"reviewer","to":"author","on":null,"task":null,"until":"2026-09-01T18:00:00Z","horizons":["2026-09-01T17:00:00Z","2026-09-01T18:00:00Z"],"state":"satisfied","overdue":false,"evidence":["https://example.org/reviews/91"],"reason":null,"resolved_by":"reviewer","resolved_at":"2026-09-01T12:00:00Z","assessments":[{"observer":"observer","state":"violated","note":"late","ts":"2026-09-01T12:00:00Z"}],"declared":"2026-09-01T12:00:00Z","seq":1,"meta":null}}` + "\n"
	if code != 200 || body != want {
		t.Fatalf("show:\n got %d %s\nwant %s", code, body, want)
	}
	code, body, _ = f.do("GET", base+"/promises?state=all", "author", "")
	if code != 200 || !strings.Contains(body, `"promises":[{"id":"desk/ship-91"`) {
		t.Fatalf("list: %d %s", code, body)
	}
}

func TestRolesComeFromTheToken(t *testing.T) {
	f := newFixture(t)
	f.do("POST", base+"/promises", "reviewer", `{"id":"p1","promise":"x","to":"author","until":"2h"}`)
	before := f.logBytes()
	cases := []struct {
		name, method, path, who, body string
		code                          int
		field                         string
	}{
		{"no token", "POST", base + "/promises", "", `{"promise":"x","to":"b","until":"2h"}`, 401, ""},
		{"declare for another by body field", "POST", base + "/promises", "author", `{"promise":"x","by":"reviewer","to":"b","until":"2h"}`, 403, "by"},
		{"amend by the creditor", "POST", base + "/promises/p1/amend", "author", `{"until":"3h"}`, 403, "by"},
		{"release by the debtor", "POST", base + "/promises/p1/resolve", "reviewer", `{"as":"released"}`, 403, "by"},
		{"assess as someone else", "POST", base + "/promises/p1/assess", "observer", `{"observer":"author"}`, 403, "observer"},
		{"foreign tenant", "POST", base + "/promises/p1/amend", "foreign", `{"until":"3h"}`, 404, ""},
		{"foreign tenant read", "GET", base + "/promises/p1", "foreign", ``, 404, ""},
		{"unknown member", "POST", base + "/promises", "reviewer", `{"promise":"x","to":"b","until":"2h","priority":1}`, 400, "priority"},
		{"bad deadline", "POST", base + "/promises", "reviewer", `{"promise":"x","to":"b","until":"soon"}`, 400, "until"},
		{"not JSON", "POST", base + "/promises", "reviewer", `{"promise":`, 400, "body"},
		{"unknown promise", "POST", base + "/promises/nope/amend", "reviewer", `{"until":"3h"}`, 404, "promise"},
		{"bad session name", "GET", "/v1/tenants/acme/sessions/..hidden/promises", "reviewer", ``, 400, ""},
		{"body too large", "POST", base + "/promises", "reviewer", `{"promise":"` + strings.Repeat("x", 2<<20) + `"}`, 413, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body, _ := f.do(c.method, c.path, c.who, c.body)
			if code != c.code {
				t.Fatalf("status %d, want %d: %s", code, c.code, body)
			}
			var doc struct {
				V     int    `json:"schema_version"`
				Error string `json:"error"`
				Code  string `json:"code"`
			}
			if err := json.Unmarshal([]byte(body), &doc); err != nil || doc.V != 1 || doc.Error == "" {
				t.Fatalf("problem document: %s", body)
			}
			if c.field != "" && !strings.HasPrefix(doc.Error, c.field+":") {
				t.Fatalf("error %q does not name %s", doc.Error, c.field)
			}
		})
	}
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a refused request changed the log")
	}
}

func TestRevocationIsImmediate(t *testing.T) {
	f := newFixture(t)
	toks, _ := fileTokens(f.srv).List()
	if code, _, _ := f.do("GET", "/v1/tenants/acme/whoami", "author", ""); code != 200 {
		t.Fatal("token refused before revocation")
	}
	for _, tk := range toks {
		if tk.Participant == "author" {
			if err := fileTokens(f.srv).Revoke(tk.ID, t0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if code, _, _ := f.do("GET", base+"/promises", "author", ""); code != 401 {
		t.Fatalf("revoked token still accepted: %d", code)
	}
}

func TestIdempotencyOverHTTP(t *testing.T) {
	f := newFixture(t)
	body := `{"promise":"minted","to":"author","until":"2h"}`
	c1, r1, _ := f.do("POST", base+"/promises", "reviewer", body, "Idempotency-Key", "req-1")
	c2, r2, h2 := f.do("POST", base+"/promises", "reviewer", body, "Idempotency-Key", "req-1")
	if c1 != 201 || c2 != 201 || r1 != r2 || h2.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %s / %d %s", c1, r1, c2, r2)
	}
	c3, r3, _ := f.do("POST", base+"/promises", "reviewer", `{"promise":"other","to":"author","until":"2h"}`, "Idempotency-Key", "req-1")
	if c3 != 409 || !strings.Contains(r3, `"code":"IdempotencyConflict"`) {
		t.Fatalf("conflict: %d %s", c3, r3)
	}
	// After a restart the recorded response comes back byte for byte.
	f.srv.Close()
	s2, err := New(f.srv.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts2 := httptest.NewServer(s2.Handler())
	defer ts2.Close()
	defer s2.Close()
	f.ts.URL = ts2.URL
	c4, r4, _ := f.do("POST", base+"/promises", "reviewer", body, "Idempotency-Key", "req-1")
	if c4 != 201 || r4 != r1 {
		t.Fatalf("after restart: %d %s want %s", c4, r4, r1)
	}
	code, list, _ := f.do("GET", base+"/promises?state=all", "reviewer", "")
	if code != 200 || strings.Count(list, `"promise":"minted"`) != 1 {
		t.Fatalf("executed twice: %s", list)
	}
	// Past the retained history: 410, never a second execution.
	s2.cfg.Ledger.Now = func() time.Time { return t0.Add(48 * time.Hour) }
	s2.Close()
	s3, _ := New(s2.cfg)
	ts3 := httptest.NewServer(s3.Handler())
	defer ts3.Close()
	defer s3.Close()
	f.ts.URL = ts3.URL
	c5, r5, _ := f.do("POST", base+"/promises", "reviewer", body, "Idempotency-Key", "req-1")
	if c5 != 410 || !strings.Contains(r5, `"code":"RequestHistoryExpired"`) {
		t.Fatalf("expired: %d %s", c5, r5)
	}
}

func TestConcurrentWritersGroupCommit(t *testing.T) {
	f := newFixture(t)
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			code, body, _ := f.do("POST", base+"/promises", "reviewer", fmt.Sprintf(`{"id":"c%d","promise":"x","to":"author","until":"2h"}`, i))
			if code != 201 {
				errs <- body
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	l, _ := f.srv.session("acme", "main")
	if rep := l.Verify(); !rep.Whole() || rep.Lines != 64 {
		t.Fatalf("verify: %+v", rep)
	}
	_, metrics, _ := f.do("GET", "/metrics", "", "")
	for _, m := range []string{"tally_appends_total 64", "tally_fsync_seconds_count", "tally_group_commit_records_bucket", `tally_http_request_seconds_count{code="201",route="promise.declare"} 64`, `tally_obligations{family="promise",state="owed"} 64`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %s", m)
		}
	}
}

func TestEventStreamResumes(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 3; i++ {
		f.do("POST", base+"/promises", "reviewer", fmt.Sprintf(`{"id":"e%d","promise":"x","to":"author","until":"2h"}`, i))
	}
	read := func(after string, n int, write func()) []string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", f.ts.URL+base+"/events?after="+after, nil)
		req.Header.Set("Authorization", "Bearer "+f.tokens["author"])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if write != nil {
			go write()
		}
		var ids []string
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() && len(ids) < n {
			if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				ids = append(ids, id)
			}
		}
		return ids
	}
	if got := read("0", 3, nil); strings.Join(got, ",") != "1,2,3" {
		t.Fatalf("from 0: %v", got)
	}
	got := read("2", 2, func() {
		f.do("POST", base+"/promises", "reviewer", `{"id":"live","promise":"x","to":"author","until":"2h"}`)
	})
	if strings.Join(got, ",") != "3,4" {
		t.Fatalf("resume after 2 with a live write: %v", got)
	}
}

func TestOpenAPIMatchesRoutes(t *testing.T) {
	f := newFixture(t)
	code, body, _ := f.do("GET", "/v1/openapi.json", "", "")
	if code != 200 {
		t.Fatal(code)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi: %v", err)
	}
	n := 0
	for path, ops := range doc.Paths {
		for method := range ops {
			n++
			// Every documented operation is routed: the mux answers it with
			// something other than its own 404/405.
			p := strings.NewReplacer("{tenant}", "acme", "{session}", "main", "{id}", "x").Replace(path)
			req := httptest.NewRequest(strings.ToUpper(method), p, strings.NewReader("{}"))
			_, pattern := f.srv.mux.Handler(req)
			if pattern != strings.ToUpper(method)+" "+path && pattern != strings.ToUpper(method)+" "+path+"{$}" {
				t.Errorf("%s %s routes to %q", method, path, pattern)
			}
		}
	}
	if n != len(f.srv.routes) {
		t.Fatalf("%d documented operations, %d routes", n, len(f.srv.routes))
	}
}

// The server keeps time itself: an expectation that passes its due time
// gets its lapse committed by the built-in timekeeper, once.
func TestBuiltInWatcher(t *testing.T) {
	root := t.TempDir()
	store.Init(root)
	clock := t0
	var mu sync.Mutex
	cfg := DefaultConfig()
	cfg.Root = root
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Ledger.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	cfg.WatchEvery = 20 * time.Millisecond
	cfg.Watch.Sinks = nil
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.session("acme", "main")
	if err != nil {
		t.Fatal(err)
	}
	raise := expect.Raise{ExpectationID: "arrive", Kind: "shipment", Subject: expect.Subject{Type: "shipment", ID: "S1"},
		FactKey: "shipment.arrived", DueAt: t0.Add(time.Hour), Basis: "declared"}
	if _, err := l.SubmitExpect(context.Background(), expect.RaiseCommand{Raise: raise}, false, ledger.WriteOptions{Actor: "agent"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	clock = t0.Add(2 * time.Hour)
	mu.Unlock()
	lapses := func() int {
		n := 0
		l.Read(func(st *ledger.State) { n = len(st.Expects.Lapses(time.Time{})) })
		return n
	}
	waitFor(t, "the built-in watcher's lapse", func() bool { return lapses() > 0 })
	sweptAgain(t, s, "acme/main") // more sweeps must not add another
	if n := lapses(); n != 1 {
		t.Fatalf("%d lapses after more sweeps", n)
	}
}

// Every write route of the route table, as a stranger: without a token it
// is 401, with another tenant's token 404 (a foreign session is not
// distinguishable from a missing one), and the session's log is unchanged.
func TestEveryWriteRouteRefusesStrangers(t *testing.T) {
	f := newFixture(t)
	if code, body, _ := f.do("POST", base+"/promises", "reviewer", `{"id":"p1","promise":"x","to":"author","until":"2h"}`); code != 201 {
		t.Fatalf("setup: %d %s", code, body)
	}
	before := f.logBytes()
	fill := strings.NewReplacer("{tenant}", "acme", "{session}", "main", "{id}", "p1", "{check}", "c", "{testament}", "t",
		"{artifact}", "a", "{task}", "t1")
	n := 0
	for _, rt := range f.srv.routes {
		if !rt.write || !strings.HasPrefix(rt.pattern, sessionPath) {
			continue
		}
		n++
		path := fill.Replace(rt.pattern)
		for _, c := range []struct {
			who  string
			code int
		}{{"", 401}, {"foreign", 404}} {
			code, body, _ := f.do(rt.method, path, c.who, "{}", "Content-Type", "application/json")
			if code != c.code {
				t.Errorf("%s %s as %q: want %d, got %d %.200s", rt.method, path, c.who, c.code, code, body)
			}
		}
	}
	if n < 30 {
		t.Fatalf("only %d write routes under a session", n)
	}
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a stranger's request changed the log")
	}
}

// TestBodiesRefuseDuplicateMembers: every family's body goes through the
// one api decoder, so a member given twice is refused by name (a claim or
// expectation body used to keep the last) and nothing is appended.
func TestBodiesRefuseDuplicateMembers(t *testing.T) {
	f := newFixture(t)
	if code, body, _ := f.do("POST", base+"/promises", "reviewer", `{"id":"p1","promise":"x","to":"author","until":"2h"}`); code != 201 {
		t.Fatalf("setup: %d %s", code, body)
	}
	before := f.logBytes()
	for _, c := range []struct{ path, body, want string }{
		{base + "/promises", `{"promise":"x","to":"author","to":"other","until":"2h"}`, `"error":"to: appears twice"`},
		{base + "/claims", `{"claim":"C1","respondent":"author","respondent":"other","work":"w","slots":[]}`, `"error":"respondent: appears twice"`},
		{base + "/expectations", `{"subject":{"type":"s","id":"1","id":"2"},"dueAt":"2026-12-02T00:00:00Z"}`, `"error":"subject.id: appears twice"`},
		{base + "/promises/p1/amend", `{"until":"3h","Until":"4h"}`, `"error":"Until: is not a field of this command (id, meta, reason, until)"`},
	} {
		code, body, _ := f.do("POST", c.path, "reviewer", c.body)
		if code != 400 || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %s, want 400 %s", c.path, c.body, code, body, c.want)
		}
	}
	if !bytes.Equal(f.logBytes(), before) {
		t.Fatal("a refused body was appended")
	}
}
