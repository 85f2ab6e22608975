package server

import (
	"strings"
	"testing"
)

// Both A2A transports pass the same middleware, in its order: the caller
// first (401, whatever the body), then the body's media type and size,
// each refusal in the transport's own form, and nothing appended.
func TestA2AMiddleware(t *testing.T) {
	f := newFixture(t)
	f.srv.cfg.BodyMax = 1024
	const ext = "urn:tally:ext:promise"
	send := `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}],"metadata":{"` + ext + `":{"id":"p","promise":"x","to":"author","until":"2026-09-01T17:00:00Z"}}}}`
	rpc := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":` + send + `}`
	big := `{"metadata":{"reason":"` + strings.Repeat("x", 2048) + `"}}`
	typeErr := func(got string) string { return `Content-Type: must be application/json (got ` + got + `)` }
	for _, c := range []struct {
		name, method, path, who, body, ct string
		code                              int
		want                              string // the answer, or (prefixed "~") a part of it
	}{
		{"JSON-RPC without a token", "POST", a2aBase, "", rpc, "text/plain", 401, `~"code":"unauthenticated"`},
		{"HTTP+JSON send without a token", "POST", a2aBase + "/rest/message:send", "", send, "text/plain", 401, `~"code":"unauthenticated"`},
		{"HTTP+JSON cancel without a token", "POST", a2aBase + "/rest/tasks/p:cancel", "", big, "text/plain", 401, `~"code":"unauthenticated"`},
		{"JSON-RPC of another type", "POST", a2aBase, "reviewer", rpc, "text/plain", 415,
			rpcErr("null", -32600, typeErr(`"text/plain"`), "INVALID_REQUEST")},
		{"JSON-RPC without a type", "POST", a2aBase, "reviewer", rpc, "", 415, rpcErr("null", -32600, typeErr("none"), "INVALID_REQUEST")},
		{"HTTP+JSON send of another type", "POST", a2aBase + "/rest/message:send", "reviewer", send, "text/plain", 415,
			`~"code":"UnsupportedMediaType"`},
		{"HTTP+JSON cancel of another type", "POST", a2aBase + "/rest/tasks/p:cancel", "reviewer", `{}`, "text/plain", 415,
			`~"code":"UnsupportedMediaType"`},
		{"HTTP+JSON cancel over the limit", "POST", a2aBase + "/rest/tasks/p:cancel", "reviewer", big, "application/json", 413,
			`~"body: at most 1024 bytes"`},
		{"HTTP+JSON cancel not an object", "POST", a2aBase + "/rest/tasks/p:cancel", "reviewer", `[1]`, "application/json", 400,
			`~body: must be a CancelTaskRequest object`},
		// A read's type is not judged: it reaches the handler (which finds no session yet).
		{"a read of another type", "GET", a2aBase + "/rest/tasks", "reviewer", "", "text/plain", 404, `~"reason":"TASK_NOT_FOUND"`},
	} {
		code, body, h := f.do(c.method, c.path, c.who, c.body, "A2A-Extensions", ext, "Content-Type", c.ct)
		ok := body == c.want
		if part, found := strings.CutPrefix(c.want, "~"); found {
			ok = strings.Contains(body, part)
		}
		if code != c.code || !ok {
			t.Errorf("%s: %d %s\nwant %d %s", c.name, code, body, c.code, c.want)
		}
		if c.code == 401 && h.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: no WWW-Authenticate", c.name)
		}
		if c.code != 401 && h.Get("A2A-Extensions") != ext {
			t.Errorf("%s: the activated extension is not echoed: %v", c.name, h)
		}
	}
	if len(f.logBytes()) != 0 {
		t.Fatalf("a refused request appended: %s", f.logBytes())
	}
}
