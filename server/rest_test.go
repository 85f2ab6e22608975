package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestEveryRESTRouteAuthenticates: the REST middleware authenticates every
// route the table does not mark public, read or write, stream or not: no
// token is 401 with the challenge, another tenant's token 404; a public
// route answers without one.
func TestEveryRESTRouteAuthenticates(t *testing.T) {
	f := newFixture(t)
	fill := strings.NewReplacer("{tenant}", "acme", "{session}", "main", "{id}", "p1", "{check}", "c", "{testament}", "t",
		"{artifact}", "a", "{task}", "t1", "{content}", strings.Repeat("0", 64))
	n := 0
	for _, rt := range f.srv.routes {
		if rt.handle != nil {
			continue // another binding's route
		}
		path := fill.Replace(rt.pattern)
		if rt.public {
			if code, body, _ := f.do(rt.method, path, "", ""); code != http.StatusOK {
				t.Errorf("public %s %s: %d %.200s", rt.method, path, code, body)
			}
			continue
		}
		n++
		code, body, hdr := f.do(rt.method, path, "", "")
		if code != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") != `Bearer realm="tally"` || !strings.Contains(body, `"code":"unauthenticated"`) {
			t.Errorf("%s %s without a token: %d %q %.200s", rt.method, path, code, hdr.Get("WWW-Authenticate"), body)
		}
		if !strings.HasPrefix(rt.pattern, "/v1/tenants/{tenant}") {
			continue
		}
		if code, body, _ := f.do(rt.method, path, "foreign", ""); code != http.StatusNotFound {
			t.Errorf("%s %s with another tenant's token: %d %.200s", rt.method, path, code, body)
		}
	}
	if n < 45 {
		t.Fatalf("only %d authenticated REST routes", n)
	}
}

// TestWriteAnswerRefusesAnUnknownDocument: an endpoint answering anything
// but a document is the server's fault, answered as an internal error.
func TestWriteAnswerRefusesAnUnknownDocument(t *testing.T) {
	f := newFixture(t)
	w := httptest.NewRecorder()
	f.srv.writeAnswer(w, http.StatusOK, 42)
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), `"code":"error"`) {
		t.Fatalf("got %d %s", w.Code, w.Body)
	}
}
