package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"tally/auth"
)

// FuzzA2AJSONRPC feeds arbitrary JSON-RPC bodies, under every family's
// extension, to the A2A endpoint as a valid token: no panic, never a 5xx,
// and every answer is one JSON-RPC response (a result or an error with a
// code), so a hostile request cannot crash or confuse the server.
//
//	go test ./server -run '^$' -fuzz '^FuzzA2AJSONRPC$' -fuzztime 60s
func FuzzA2AJSONRPC(f *testing.F) {
	seeds := []string{
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"x"}],"metadata":{"urn:tally:ext:promise":{"promise":"review","to":"author","until":"2h"}}}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"m2","role":"ROLE_USER","parts":[{"raw":"eA==","filename":"e"}],"metadata":{"urn:tally:ext:claim":{"action":"check.report","claim":"C1","check":"c","artifact":"A","result":"pass"}}}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":"m3","role":"ROLE_USER","parts":[{"text":"x"}],"metadata":{"urn:tally:ext:expect":{"kind":"k","subject":{"type":"t","id":"1"},"satisfiedBy":{"factKey":"f"},"dueAt":"2026-09-02T00:00:00Z","basis":"declared"}}}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"GetTask","params":{"id":"p1"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"ListTasks","params":{}}`,
		`{"jsonrpc":"2.0","id":6,"method":"CancelTask","params":{"id":"p1","metadata":{"reason":"r"}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"metadata":{"urn:tally:ext:claim":{"action":"create","claim":"C2","respondent":"r","work":"w","slots":[{"name":"s","mode":"required","checks":[]}]}}}}}`,
		`[]`, `{}`, `{"jsonrpc":"2.0"`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	fx := newFixture(f)
	fx.srv.cfg.WatchEvery = 0
	fx.token("maintainer", auth.RoleAgent)
	h := fx.srv.Handler()
	exts := "urn:tally:ext:promise, urn:tally:ext:claim, urn:tally:ext:expect"
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", a2aBase, strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+fx.tokens["maintainer"])
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Extensions", exts)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		if rec.Code != http.StatusOK {
			return // refused before JSON-RPC (size, media type): an HTTP error document
		}
		var r struct {
			JSONRPC string           `json:"jsonrpc"`
			Result  json.RawMessage  `json:"result"`
			Error   *json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.JSONRPC != "2.0" || (r.Result == nil) == (r.Error == nil) {
			t.Fatalf("not one JSON-RPC response for %q: %s (%v)", body, rec.Body, err)
		}
	})
}
