package server

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// benchA2A serves one JSON-RPC request body again and again in process (no
// network): the middleware, the envelope, the handler and the mapping, on
// a session of 100 promises.
func benchA2A(b *testing.B, body string) {
	f := newFixture(b)
	const ext = "urn:tally:ext:promise"
	for i := range 100 {
		id := "p" + strconv.Itoa(i)
		rec := map[string]any{"id": id, "promise": "review " + id, "to": "author", "until": "2026-09-01T17:00:00Z"}
		if _, r, _ := f.rpc("reviewer", ext, "SendMessage", sendParams("decl-"+id, ext, rec)); r.Error != nil {
			b.Fatal(r.raw)
		}
	}
	h := f.srv.Handler()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		req := httptest.NewRequest("POST", a2aBase, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.tokens["author"])
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("A2A-Extensions", ext)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 || strings.Contains(rec.Body.String(), `"error"`) {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
	}
}

func BenchmarkA2AGetTask(b *testing.B) {
	benchA2A(b, `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"p50"}}`)
}

func BenchmarkA2AListTasks(b *testing.B) {
	benchA2A(b, `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":100}}`)
}
