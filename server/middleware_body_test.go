package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"tally/store"
)

func TestBodyRoutesCheckTheContentType(t *testing.T) {
	f := newFixture(t)
	f.want(201, "POST", base+"/promises", "reviewer", declareBody, "Content-Type", "application/json; charset=utf-8")
	before := f.logBytes()
	cases := []struct{ method, path, who, body, ct string }{
		{"POST", base + "/promises", "reviewer", declareBody, "text/plain"},
		{"POST", base + "/promises", "reviewer", "promise=p&to=author&until=2h", "application/x-www-form-urlencoded"},
		{"POST", base + "/promises", "reviewer", declareBody, ""},
		{"POST", base + "/promises", "reviewer", declareBody, "application/json;;"},
		{"POST", base + "/promises/p/amend", "reviewer", `{"until":"3h"}`, "text/plain"},
		{"POST", base + "/claims", "reviewer", `{"id":"C1","deliverable":"d","slots":[]}`, "text/plain"},
		{"POST", base + "/expectations", "reviewer", `{}`, "text/plain"},
		{"POST", base + "/a2a/rest/message:send", "reviewer", `{"message":{}}`, "text/plain"},
		{"PUT", base + "/claims/C1/artifacts/a?slot=s&generation=1&kind=patch", "reviewer", "bytes", "application/json"},
		{"POST", base + "/import", "reviewer", `{}`, "application/json"},
	}
	for _, c := range cases {
		hdr := []string{"Content-Type", c.ct}
		code, body, _ := f.do(c.method, c.path, c.who, c.body, hdr...)
		if c.path == base+"/import" && code == 403 {
			continue // an import is judged by its role first
		}
		if code != 415 || !strings.Contains(body, `"code":"UnsupportedMediaType"`) || !strings.Contains(body, "Content-Type: must be") {
			t.Errorf("%s %s as %q: %d %s", c.method, c.path, c.ct, code, body)
		}
	}
	// Identity is checked first: a stranger learns nothing of the body's rules.
	if code, _, _ := f.do("POST", base+"/promises", "", declareBody, "Content-Type", "text/plain"); code != 401 {
		t.Errorf("no token, wrong type: %d", code)
	}
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a refused body was appended")
	}
}

// rawRequest writes head and body on a fresh connection to addr, closes
// its sending side if closeWrite, and reads the answer.
func rawRequest(t *testing.T, addr, head, body string, closeWrite bool) (*http.Response, string, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, head+"\r\n"+body); err != nil {
		t.Fatal(err)
	}
	if closeWrite {
		conn.(*net.TCPConn).CloseWrite()
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer after %v: %v", time.Since(start), err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), time.Since(start)
}

func declareHead(f *fixture, length int) string {
	return fmt.Sprintf("POST %s/promises HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", base, f.tokens["reviewer"], length)
}

func TestABodyShorterThanItsLengthIsTheClients(t *testing.T) {
	f := newFixture(t)
	f.want(201, "POST", base+"/promises", "reviewer", declareBody)
	before := f.logBytes()
	resp, body, _ := rawRequest(t, f.ts.Listener.Addr().String(), declareHead(f, 200), declareBody[:20], true)
	if resp.StatusCode != 400 || !strings.Contains(body, `"code":"BodyIncomplete"`) || !strings.Contains(body, "body: ended before its Content-Length") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	_, metrics, _ := f.do("GET", "/metrics", "", "")
	if !strings.Contains(metrics, `route="promise.declare",le="+Inf"} 1`) || strings.Contains(metrics, `code="500"`) {
		t.Fatalf("metrics count an incomplete body as the server's:\n%s", grepLines(metrics, "promise.declare"))
	}
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("an incomplete body was appended")
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// serving runs a server on a loopback port with the given timeouts.
func serving(t *testing.T, tune func(*Config)) (*fixture, string) {
	t.Helper()
	root := t.TempDir()
	if err := store.Init(root); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Root, cfg.Addr = root, "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Ledger.Now = func() time.Time { return t0 }
	tune(&cfg)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := fileTokens(s).Create("acme", "reviewer", "agent", t0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrc, done := make(chan string, 1), make(chan error, 1)
	go func() { done <- s.Serve(ctx, func(a string) { addrc <- a }) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case a := <-addrc:
		return &fixture{t: t, srv: s, root: root, tokens: map[string]string{"reviewer": tok}}, a
	case err := <-done:
		t.Fatal(err)
	}
	return nil, ""
}

// TestASlowClientCannotHoldTheServer: a body that stops coming is answered
// 400 BodyIncomplete at the body timeout; headers that stop coming, and a
// kept-alive connection left idle, are closed at theirs.
func TestASlowClientCannotHoldTheServer(t *testing.T) {
	const timeout = 300 * time.Millisecond
	f, addr := serving(t, func(c *Config) { c.BodyTimeout, c.ReadHeaderTimeout, c.IdleTimeout = timeout, timeout, timeout })

	resp, body, took := rawRequest(t, addr, declareHead(f, 200), declareBody[:20], false) // and then nothing
	if resp.StatusCode != 400 || !strings.Contains(body, `"code":"BodyIncomplete"`) || !strings.Contains(body, "body timeout") || took > 5*time.Second {
		t.Fatalf("stalled body: %d after %v: %s", resp.StatusCode, took, body)
	}
	if _, err := os.Stat(f.root + "/sessions/acme"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a stalled first write left its session: %v", err)
	}

	// A body that arrives slowly but within the timeout is taken, and a
	// handler may take longer than the body timeout once it has its body.
	resp, body, _ = rawRequest(t, addr, declareHead(f, len(declareBody)), declareBody, false)
	if resp.StatusCode != 201 {
		t.Fatalf("a whole body: %d %s", resp.StatusCode, body)
	}

	closedWithin := func(what, send string) {
		t.Helper()
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, send)
		start := time.Now()
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(conn)
		if strings.HasSuffix(send, "\r\n\r\n") { // a whole request: read its answer first
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			io.ReadAll(resp.Body)
			start = time.Now()
		}
		_, err = r.ReadByte()
		var ne net.Error
		if err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("%s: the connection is still open after %v (%v)", what, time.Since(start), err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s: closed only after %v", what, d)
		}
	}
	closedWithin("headers that stop", "GET /healthz HTTP/1.1\r\nHost: x\r\n")
	closedWithin("an idle connection", "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
}

func TestJSONRefusalsSayWhere(t *testing.T) {
	f := newFixture(t)
	f.want(201, "POST", base+"/promises", "reviewer", declareBody)
	before := f.logBytes()
	deep := `{"promise":"p","to":"author","until":"2h","meta":{"a":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}}`
	cases := []struct{ path, body, want string }{
		{base + "/promises", "{\"promise\":\"p\",\n \"to\": }", "body: invalid JSON at byte offset 23 (line 2, column 8): unexpected character"},
		{base + "/promises", `{"promise":"p"`, "body: invalid JSON at byte offset 14 (line 1, column 15): unterminated object"},
		{base + "/promises", deep, "nesting deeper than 64 levels (the limit)"},
		{base + "/expectations", "{\"subject\":\n\n  {\"type\" \"task\"}}", "body: invalid JSON at byte offset 23 (line 3, column 11): expected ':'"},
		{base + "/expectations", `{"subject":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, "nesting deeper than 64 levels (the limit)"},
		{base + "/claims", `{"claim":"C1",}`, "body: invalid JSON at byte offset 14 (line 1, column 15): expected a member name"},
	}
	for _, c := range cases {
		code, body, _ := f.do("POST", c.path, "reviewer", c.body)
		if code != 400 || !strings.Contains(body, c.want) {
			t.Errorf("POST %s %q: %d %s\nwant %s", c.path, c.body, code, body, c.want)
		}
	}
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a refused body was appended")
	}
}
