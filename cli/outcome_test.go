package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"tally/api"
)

// Over TALLY_URL a write to a cluster node that gives no --request-id
// carries one of the client's own, sent again under it while the node
// answers that its outcome is unknown; when the sends are spent the
// refusal names that id (with --json, in the message and as the
// document's request_id), and a rerun with --request-id ID is answered
// from the write's record.
func TestRemoteUnknownOutcomeNamesRequestID(t *testing.T) {
	p := remoteSide(t, parityScenario{tokens: map[string]string{"reviewer": "agent"}}, t.TempDir())
	var mu sync.Mutex
	var keys []string // of the writes
	committed := ""   // the key whose write the node says committed
	leader := p.env["TALLY_URL"]
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(api.ReplicatedHeader, "true")
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		if r.Method == http.MethodPost {
			keys = append(keys, key)
		}
		done := committed != "" && key == committed
		mu.Unlock()
		if r.Method != http.MethodPost || done {
			// Reads, and the rerun under the id, go to the real server.
			req, _ := http.NewRequest(r.Method, leader+r.URL.RequestURI(), r.Body)
			req.Header = r.Header.Clone()
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			defer res.Body.Close()
			for k, v := range res.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(res.StatusCode)
			io.Copy(w, res.Body)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"schema_version":1,"error":"group 1 did not answer the write at this node: node: timed out waiting for the group; the write may have committed: retry it with the same request id \"%s\", which answers it from its record if it did","code":"UnknownOutcome","group":1,"request_id":"%s"}`+"\n", key, key)
	}))
	defer proxy.Close()
	p.env["TALLY_URL"] = proxy.URL

	code, out, errs := p.run(step("reviewer", ExitError, "promise", "x", "--id", "r1", "--to", "author", "--until", "2h", "--json"))
	var doc struct {
		Error     string `json:"error"`
		Code      string `json:"code"`
		RequestID string `json:"request_id"`
	}
	if code != ExitError || out != "" || json.Unmarshal([]byte(errs), &doc) != nil || doc.Code != "UnknownOutcome" || !strings.HasPrefix(doc.RequestID, "req-") ||
		!strings.Contains(doc.Error, fmt.Sprintf("retry it with the same request id %q", doc.RequestID)) {
		t.Fatalf("a write of unknown outcome: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	mu.Lock()
	got := append([]string(nil), keys...)
	committed = doc.RequestID
	mu.Unlock()
	if len(got) < 2 {
		t.Fatalf("sent %d times, want it sent again", len(got))
	}
	for _, k := range got {
		if k != doc.RequestID {
			t.Fatalf("keys %q, the refusal names %q", got, doc.RequestID)
		}
	}
	// The rerun by hand, under the id the refusal named.
	if code, out, errs := p.run(step("reviewer", ExitOK, "promise", "x", "--id", "r1", "--to", "author", "--until", "2h", "--request-id", doc.RequestID)); code != ExitOK || out != "r1\n" {
		t.Fatalf("the rerun: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}
