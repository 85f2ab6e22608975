package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// openFDs counts the process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(es)
}

// sessionDirs lists tenant/session directories under the fixture's root.
func (f *fixture) sessionDirs() []string {
	var out []string
	ts, _ := os.ReadDir(filepath.Join(f.root, "sessions"))
	for _, t := range ts {
		ss, _ := os.ReadDir(filepath.Join(f.root, "sessions", t.Name()))
		for _, s := range ss {
			out = append(out, t.Name()+"/"+s.Name())
		}
		if len(ss) == 0 {
			out = append(out, t.Name()+"/")
		}
	}
	return out
}

// openCount is the number of sessions the server holds open.
func (s *Server) openCount() int {
	s.sessions.closers.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions.open) - s.sessions.closingN
}

const declareBody = `{"promise":"p","to":"author","until":"2026-09-02T12:00:00Z"}`

func TestReadsOfAMissingSessionAnswerNoSuchSession(t *testing.T) {
	f := newFixture(t)
	ghost := "/v1/tenants/acme/sessions/ghost"
	for _, path := range []string{"/promises", "/promises/p1", "/claims", "/expectations", "/events", "/export", "/verify", "/a2a/rest/tasks/p1", "/a2a/rest/tasks"} {
		code, body := f.getWithin(ghost+path, "author") // an event stream that opens never ends
		if code != 404 || !strings.Contains(body, "NoSuchSession") && !strings.Contains(path, "/a2a/") {
			t.Errorf("GET %s: %d %s", path, code, body)
		}
	}
	_, r, _ := f.rpcAt(ghost+"/a2a", "author", "GetTask", map[string]any{"id": "p1"})
	if r.Error == nil || !strings.Contains(r.raw, "TaskNotFound") && r.Error.Code != -32001 {
		t.Errorf("JSON-RPC GetTask of a missing session: %s", r.raw)
	}
	if dirs := f.sessionDirs(); len(dirs) != 0 {
		t.Fatalf("reads created %v", dirs)
	}
}

// getWithin GETs path as who, giving up after a few seconds (a stream).
func (f *fixture) getWithin(path, who string) (int, string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.ts.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+f.tokens[who])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("GET %s: %d, then %v", path, resp.StatusCode, err)
	}
	return resp.StatusCode, string(b)
}

// rpcAt is fixture.rpc against another session's endpoint.
func (f *fixture) rpcAt(endpoint, who, method string, params any) (int, rpcResponse, string) {
	f.t.Helper()
	p, _ := json.Marshal(params)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, p)
	code, out, h := f.do("POST", endpoint, who, body)
	var r rpcResponse
	if code == 200 {
		_ = json.Unmarshal([]byte(out), &r)
	}
	r.raw = out
	return code, r, h.Get("A2A-Extensions")
}

func TestTenThousandMadeUpReadsLeaveNothingBehind(t *testing.T) {
	f := newFixture(t)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 3 * time.Second}
	get := func(path string) int {
		req, _ := http.NewRequest("GET", f.ts.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+f.tokens["author"])
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	get("/v1/tenants/acme/whoami") // the server's lazily made files, before counting
	client.CloseIdleConnections()
	settled := func() int { // connections closed on one side close on the other a little later
		n := openFDs(t)
		for range 100 {
			time.Sleep(10 * time.Millisecond)
			if m := openFDs(t); m == n {
				return n
			} else {
				n = m
			}
		}
		return n
	}
	start := settled()
	routes := []string{"/promises", "/claims", "/events", "/expectations"}
	for i := range 10000 {
		if code := get(fmt.Sprintf("/v1/tenants/acme/sessions/made-up-%d%s", i, routes[i%len(routes)])); code != 404 {
			t.Fatalf("read %d: %d", i, code)
		}
	}
	if dirs := f.sessionDirs(); len(dirs) != 0 {
		t.Fatalf("reads left %d directories, e.g. %v", len(dirs), dirs[0])
	}
	if n := f.srv.openCount(); n != 0 {
		t.Fatalf("%d sessions open after reads only", n)
	}
	client.CloseIdleConnections()
	if now := settled(); now > start {
		t.Fatalf("descriptors: %d before the reads, %d after", start, now)
	}
	// New sessions still take writes, and then exist for reads.
	for i := range 3 {
		s := fmt.Sprintf("/v1/tenants/acme/sessions/real-%d", i)
		f.want(201, "POST", s+"/promises", "reviewer", declareBody)
		f.want(200, "GET", s+"/promises", "author", "")
	}
}

func TestARefusedFirstWriteLeavesNoSession(t *testing.T) {
	f := newFixture(t)
	cases := []struct{ path, who, body string }{
		{"/v1/tenants/other/sessions/new/promises", "foreign", `{"promise":"p","to":"author"}`}, // no until
		{"/v1/tenants/acme/sessions/new/promises", "reviewer", `{"promise":"p","to":"author","until":"soon"}`},
		{"/v1/tenants/acme/sessions/new/promises/nope/resolve", "reviewer", `{"as":"satisfied"}`},
		{"/v1/tenants/acme/sessions/new/claims", "reviewer", `{}`},
	}
	for _, c := range cases {
		code, body, _ := f.do("POST", c.path, c.who, c.body)
		if code/100 != 4 {
			t.Fatalf("POST %s: %d %s", c.path, code, body)
		}
	}
	if dirs := f.sessionDirs(); len(dirs) != 0 {
		t.Fatalf("refused writes left %v", dirs)
	}
	f.srv.mu.Lock()
	counted := f.srv.sessions.perTenant["acme"] + f.srv.sessions.perTenant["other"]
	f.srv.mu.Unlock()
	if counted != 0 {
		t.Fatalf("refused writes count %d sessions against the quota", counted)
	}
}

func TestMoreSessionsThanTheOpenBound(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.SessionsOpen = 3; c.WatchEvery = 20 * time.Millisecond })
	const n = 12
	path := func(i int) string { return fmt.Sprintf("/v1/tenants/acme/sessions/s%d", i) }
	// Writers on every session at once, twice round, so sessions are closed
	// and reopened under writes.
	for round := range 2 {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := fmt.Sprintf(`{"id":"r%d","promise":"p","to":"author","until":"2026-09-02T12:00:00Z"}`, round)
				if code, out, _ := f.do("POST", path(i)+"/promises", "reviewer", body); code != 201 {
					t.Errorf("write s%d round %d: %d %s", i, round, code, out)
				}
			}()
		}
		wg.Wait()
	}
	if open := f.srv.openCount(); open > 3 {
		t.Fatalf("%d sessions open, bound 3", open)
	}
	for i := range n {
		body := f.want(200, "GET", path(i)+"/promises?state=all", "author", "")
		if !strings.Contains(body, `"id":"r0"`) || !strings.Contains(body, `"id":"r1"`) {
			t.Fatalf("s%d after reopening: %s", i, body)
		}
		f.want(409, "POST", path(i)+"/promises", "reviewer", `{"id":"r0","promise":"p","to":"author","until":"2026-09-02T12:00:00Z"}`)
	}
	if open := f.srv.openCount(); open > 3 {
		t.Fatalf("%d sessions open after reads, bound 3", open)
	}
}

// A session with a subscriber is never closed for the bound: the stream
// sees a write made after many other sessions came and went.
func TestASubscribedSessionStaysOpen(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.SessionsOpen = 1 })
	f.want(201, "POST", base+"/promises", "reviewer", `{"id":"first","promise":"p","to":"author","until":"2026-09-02T12:00:00Z"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.ts.URL+base+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+f.tokens["author"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	waitFor := func(want string) {
		t.Helper()
		for lines.Scan() {
			if strings.Contains(lines.Text(), want) {
				return
			}
		}
		t.Fatalf("stream ended before %s: %v", want, lines.Err())
	}
	waitFor(`"first"`)
	for i := range 5 {
		f.want(201, "POST", fmt.Sprintf("/v1/tenants/acme/sessions/other-%d/promises", i), "reviewer", declareBody)
	}
	f.want(201, "POST", base+"/promises", "reviewer", `{"id":"second","promise":"p","to":"author","until":"2026-09-02T12:00:00Z"}`)
	waitFor(`"second"`)
}

func TestTenantSessionQuota(t *testing.T) {
	tune := func(c *Config) { c.TenantSessionsMax = 2 }
	f := newFixture(t, tune)
	f.want(201, "POST", "/v1/tenants/acme/sessions/a/promises", "reviewer", declareBody)
	f.want(201, "POST", "/v1/tenants/acme/sessions/b/promises", "reviewer", declareBody)
	body := f.want(429, "POST", "/v1/tenants/acme/sessions/c/promises", "reviewer", declareBody)
	if !strings.Contains(body, `"code":"SessionQuotaExceeded"`) {
		t.Fatalf("quota refusal: %s", body)
	}
	f.want(201, "POST", "/v1/tenants/acme/sessions/a/promises", "reviewer", declareBody) // existing ones still take writes
	f.want(201, "POST", "/v1/tenants/other/sessions/c/promises", "foreign", declareBody) // another tenant has its own quota
	if _, err := os.Stat(filepath.Join(f.root, "sessions", "acme", "c")); !os.IsNotExist(err) {
		t.Fatalf("the refused session has a directory: %v", err)
	}
	// The count is taken from disk at startup.
	f.srv.Close()
	cfg := f.srv.cfg
	s2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	f.srv = s2
	f.ts.Config.Handler = s2.Handler()
	f.want(429, "POST", "/v1/tenants/acme/sessions/c/promises", "reviewer", declareBody)
	f.want(201, "POST", "/v1/tenants/acme/sessions/b/promises", "reviewer", declareBody)
}
