package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/api"
	"tally/rest"
	"tally/service"
)

// scripted answers its requests from a script, one step per request (the
// last step repeats), and records each request's key and arrival.
type scripted struct {
	mu    sync.Mutex
	steps []func(w http.ResponseWriter)
	keys  []string
	at    []time.Time
	// single: the server is no cluster node (says nothing of it).
	single bool
}

// replicatedHealth marks an answer as a cluster node's when replicated,
// and answers the health a client asks of a server it has not heard from:
// it reports whether it did.
func replicatedHealth(w http.ResponseWriter, r *http.Request, replicated bool) bool {
	if replicated {
		w.Header().Set(api.ReplicatedHeader, "true")
	}
	if r.URL.Path != "/healthz" {
		return false
	}
	fmt.Fprint(w, `{"status":"ok"}`)
	return true
}

func (s *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if replicatedHealth(w, r, !s.single) {
		return
	}
	s.mu.Lock()
	i := min(len(s.keys), len(s.steps)-1)
	s.keys, s.at = append(s.keys, r.Header.Get("Idempotency-Key")), append(s.at, time.Now())
	step := s.steps[i]
	s.mu.Unlock()
	step(w)
}

func (s *scripted) got() ([]string, []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...), append([]time.Time(nil), s.at...)
}

const unknownDoc = `{"schema_version":1,"error":"group 2 did not answer the write at this node: node: the group's leader changed while the proposal waited; the write may have committed: retry it with the same request id \"k\", which answers it from its record if it did","code":"UnknownOutcome","group":2}` + "\n"

func answer503(doc, retryAfter string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, doc)
	}
}

func answerOK(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprint(w, `{"ok":true}`)
}

// dropped reads the request and closes the connection without an answer:
// the request went out, its fate is unknown to the client.
func dropped(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

func scriptedClient(t *testing.T, s *scripted, r Retry) *Client {
	t.Helper()
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	c, err := New(Config{URL: ts.URL, Timeout: 10 * time.Second, Retry: r})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var where = service.Call{Tenant: "acme", Session: "main"}

// A write of unknown outcome, or whose connection was lost after it went
// out, is sent again under the same key (the client's own when the caller
// gave none) until it is answered.
func TestClientRetriesUnknownOutcome(t *testing.T) {
	for _, c := range []struct {
		name string
		key  string
		step func(w http.ResponseWriter)
	}{
		{"unknown outcome, the caller's key", "k", answer503(unknownDoc, "")},
		{"unknown outcome, the client's key", "", answer503(unknownDoc, "")},
		{"connection lost", "", dropped},
		{"not committed", "", answer503(unavailableDoc(""), "")},
	} {
		s := &scripted{steps: []func(http.ResponseWriter){c.step, c.step, answerOK}}
		cl := scriptedClient(t, s, Retry{Pause: time.Millisecond})
		call := where
		call.RequestID = c.key
		doc, err := cl.Do(context.Background(), call, "POST", cl.SessionURL("acme", "main", nil, "promises"), []byte(`{}`))
		keys, _ := s.got()
		if err != nil || string(doc.JSON) != `{"ok":true}` || len(keys) != 3 {
			t.Fatalf("%s: %s %v after %d sends", c.name, doc.JSON, err, len(keys))
		}
		if keys[0] == "" || keys[1] != keys[0] || keys[2] != keys[0] || c.key != "" && keys[0] != c.key {
			t.Fatalf("%s: keys %q", c.name, keys)
		}
	}
}

// The sends are bounded: by Attempts, then the last answer as the server
// sent it; and by Within, past which no pause is begun.
func TestClientRetryBounded(t *testing.T) {
	s := &scripted{steps: []func(http.ResponseWriter){answer503(unknownDoc, "")}}
	cl := scriptedClient(t, s, Retry{Attempts: 4, Pause: time.Millisecond})
	_, err := cl.Do(context.Background(), where, "POST", cl.SessionURL("acme", "main", nil, "promises"), []byte(`{}`))
	var ref *rest.Refusal
	if !errors.As(err, &ref) || !ref.OutcomeUnknown() || string(ref.Document) != unknownDoc {
		t.Fatalf("the last answer: %v", err)
	}
	if keys, _ := s.got(); len(keys) != 4 {
		t.Fatalf("%d sends, want 4", len(keys))
	}

	s = &scripted{steps: []func(http.ResponseWriter){answer503(unknownDoc, "1")}}
	cl = scriptedClient(t, s, Retry{Within: 1500 * time.Millisecond, Pause: time.Millisecond})
	start := time.Now()
	_, err = cl.Do(context.Background(), where, "POST", cl.SessionURL("acme", "main", nil, "promises"), []byte(`{}`))
	if keys, _ := s.got(); !errors.As(err, &ref) || len(keys) != 2 || time.Since(start) > 5*time.Second {
		t.Fatalf("within 1.5s at Retry-After 1: %d sends in %v: %v", len(keys), time.Since(start), err)
	}
}

// A write of unknown outcome to a route that keeps no answer under a key
// (a token minted) is not sent again, nor is one whose connection was
// lost: a second run could not be told from the first. A refusal before
// anything was proposed is.
func TestClientUnkeyedUnknownNotRetried(t *testing.T) {
	for _, c := range []struct {
		name  string
		step  func(w http.ResponseWriter)
		sends int
	}{
		{"unknown outcome", answer503(unknownDoc, ""), 1},
		{"connection lost", dropped, 1},
		{"not committed", answer503(unavailableDoc(""), ""), 2},
	} {
		s := &scripted{steps: []func(http.ResponseWriter){c.step, answerOK}}
		cl := scriptedClient(t, s, Retry{Pause: time.Millisecond})
		_, err := cl.Do(context.Background(), service.Call{}, "POST", cl.URL()+"/v1/tokens", []byte(`{}`))
		keys, _ := s.got()
		var ref *rest.Refusal
		if len(keys) != c.sends || keys[0] != "" || (err == nil) != (c.sends == 2) || err != nil && (!errors.As(err, &ref) || !ref.OutcomeUnknown()) {
			t.Fatalf("%s: %d sends, keys %q: %v", c.name, len(keys), keys, err)
		}
		if c.name == "connection lost" && !strings.Contains(ref.Message, "it carried no request id") {
			t.Fatalf("%s: %s", c.name, ref.Message)
		}
	}
}

// Retry-After is honoured: the next send waits at least that long, though
// the backoff alone would be shorter.
func TestClientHonoursRetryAfter(t *testing.T) {
	s := &scripted{steps: []func(http.ResponseWriter){answer503(unavailableDoc(""), "1"), answerOK}}
	cl := scriptedClient(t, s, Retry{Pause: time.Millisecond})
	if _, err := cl.Do(context.Background(), where, "GET", cl.SessionURL("acme", "main", nil, "promises"), nil); err != nil {
		t.Fatal(err)
	}
	_, at := s.got()
	if len(at) != 2 || at[1].Sub(at[0]) < time.Second {
		t.Fatalf("sends at %v", at)
	}
}

// The pause doubles from Pause up to service.RetryPauseMax, jittered down to no
// less than half, and never below Retry-After.
func TestRetryPause(t *testing.T) {
	r := Retry{Pause: 100 * time.Millisecond}.WithDefaults()
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 6: service.RetryPauseMax, 30: service.RetryPauseMax} {
		for range 20 {
			if d := r.Wait(attempt, 0); d < want/2 || d > want {
				t.Fatalf("attempt %d: %v, want %v to %v", attempt, d, want/2, want)
			}
		}
	}
	if d := r.Wait(1, 3*time.Second); d != 3*time.Second {
		t.Fatalf("under Retry-After 3s: %v", d)
	}
	if !strings.HasPrefix(service.NewRequestID(), "req-") {
		t.Fatal("a request id of the client's own")
	}
}

// A write that never got an answer (its connection lost after it went out,
// every send) is answered by the client as a server answers a write that
// may have committed: 503 UnknownOutcome, naming its request id.
func TestClientLostWriteIsUnknownOutcome(t *testing.T) {
	s := &scripted{steps: []func(http.ResponseWriter){dropped}}
	cl := scriptedClient(t, s, Retry{Attempts: 2, Pause: time.Millisecond})
	_, err := cl.Do(context.Background(), service.Call{Tenant: "acme", Session: "main", RequestID: "k-lost"}, "POST", cl.SessionURL("acme", "main", nil, "promises"), []byte(`{}`))
	var ref *rest.Refusal
	if !errors.As(err, &ref) || !ref.OutcomeUnknown() {
		t.Fatalf("a lost write: %v", err)
	}
	want := `{"schema_version":1,"error":"server ` + cl.URL() + `: EOF; the write may have committed: retry it with the same request id \"k-lost\", which answers it from its record if it did","code":"UnknownOutcome","request_id":"k-lost"}` + "\n"
	if string(ref.Document) != want {
		t.Fatalf("document %s\nwant %s", ref.Document, want)
	}
	// A read that got no answer is an error, not a refusal.
	_, err = cl.Do(context.Background(), where, "GET", cl.SessionURL("acme", "main", nil, "promises"), nil)
	if err == nil || errors.As(err, &ref) {
		t.Fatalf("a lost read: %v", err)
	}
}

// A server that is no cluster node gets a write as the caller sent it: a
// request id of the client's own would append its record to the log.
func TestClientSingleServerWriteUnkeyed(t *testing.T) {
	s := &scripted{steps: []func(http.ResponseWriter){answerOK}, single: true}
	cl := scriptedClient(t, s, Retry{})
	for range 2 {
		if _, err := cl.Do(context.Background(), where, "POST", cl.SessionURL("acme", "main", nil, "promises"), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if keys, _ := s.got(); len(keys) != 2 || keys[0] != "" || keys[1] != "" {
		t.Fatalf("keys %q", keys)
	}
}
