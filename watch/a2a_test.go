package watch

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/expect"
	"tally/ledger"
)

// fakeAgent is a raising agent on 127.0.0.1: an agent card, a JSON-RPC
// endpoint that records SendMessage calls (failing the first fail of
// them with a 500), and a push endpoint that records notifications.
type fakeAgent struct {
	srv  *httptest.Server
	mu   sync.Mutex
	fail int
	rpcs []agentCall // every SendMessage that reached the endpoint, failed ones included
	push []agentCall
}

type agentCall struct {
	header http.Header
	id     any
	msg    *a2a.Message
	failed bool
}

func newFakeAgent(t *testing.T, fail int) *fakeAgent {
	a := &fakeAgent{fail: fail}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
		card := a2a.AgentCard{Name: "raiser", SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(a.srv.URL+"/rest", a2a.TransportProtocolHTTPJSON),
			a2a.NewAgentInterface(a.srv.URL+"/rpc", a2a.TransportProtocolJSONRPC),
		}}
		json.NewEncoder(w).Encode(card)
	})
	mux.HandleFunc("POST /rpc", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req struct {
			ID     any                    `json:"id"`
			Method string                 `json:"method"`
			Params a2a.SendMessageRequest `json:"params"`
		}
		if err := json.Unmarshal(b, &req); err != nil || req.Method != "SendMessage" {
			http.Error(w, "bad request", 400)
			return
		}
		a.mu.Lock()
		c := agentCall{header: r.Header.Clone(), id: req.ID, msg: req.Params.Message}
		if a.fail > 0 {
			a.fail--
			c.failed = true
		}
		a.rpcs = append(a.rpcs, c)
		a.mu.Unlock()
		if c.failed {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		task := &a2a.Task{ID: "lapse-task-1", ContextID: req.Params.Message.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}
		res, _ := json.Marshal(a2a.StreamResponse{Event: task})
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": json.RawMessage(res)})
	})
	mux.HandleFunc("POST /push", func(w http.ResponseWriter, r *http.Request) {
		var sr a2a.StreamResponse
		if err := json.NewDecoder(r.Body).Decode(&sr); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		m, _ := sr.Event.(*a2a.Message)
		a.mu.Lock()
		a.push = append(a.push, agentCall{header: r.Header.Clone(), msg: m})
		a.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fakeAgent) calls() (rpcs, push []agentCall) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]agentCall(nil), a.rpcs...), append([]agentCall(nil), a.push...)
}

// withA2A restarts the fixture's watcher with the recorder and an A2A sink.
func (f *fixture) withA2A(sink *A2A) {
	f.t.Helper()
	f.w.Close()
	wc := DefaultConfig()
	wc.Sinks = []Sink{f.rec, sink}
	w, err := New(f.l, wc)
	if err != nil {
		f.t.Fatal(err)
	}
	f.w = w
	f.t.Cleanup(func() { w.Close() })
}

func noSleep(context.Context, time.Duration) error { return nil }

// A lapse of an expectation raised with a replyTo goes to the raising agent
// as one SendMessage (and one push): the origin's context, the origin task
// referenced, the lapse id as messageId; a failed attempt is retried with
// the same message; neither another sweep nor a restart sends it again.
func TestA2ASinkDeliversLapseOnce(t *testing.T) {
	f := newFixture(t)
	agent := newFakeAgent(t, 1)
	const uri = "https://rsaxb.com/a2a/expectations/v1"
	sink := &A2A{ExtensionURI: "urn:tally:ext:expect", Sleep: noSleep}
	f.withA2A(sink)
	due := t0.Add(time.Hour)
	raise := expect.Raise{ExpectationID: "exp-1", Kind: "doc.review", Subject: expect.Subject{Type: "doc", ID: "d1"},
		FactKey: "doc.reviewed:d1", DueAt: due, Grace: 10 * time.Minute, Basis: expect.BasisDeclared,
		Origin:  expect.Origin{TaskID: "task-7", ContextID: "ctx-3"},
		ReplyTo: &expect.ReplyTo{URL: agent.srv.URL + "/.well-known/agent-card.json", Extension: uri, PushURL: agent.srv.URL + "/push", PushToken: "tok-1"}}
	if _, err := f.l.SubmitExpect(context.Background(), expect.RaiseCommand{Raise: raise}, false, ledger.WriteOptions{Actor: "agent"}); err != nil {
		t.Fatal(err)
	}
	// A second expectation without replyTo lapses too: the A2A sink leaves it be.
	plain := raise
	plain.ExpectationID, plain.FactKey, plain.ReplyTo = "exp-2", "other", nil
	if _, err := f.l.SubmitExpect(context.Background(), expect.RaiseCommand{Raise: plain}, false, ledger.WriteOptions{Actor: "agent"}); err != nil {
		t.Fatal(err)
	}
	f.sweepAt(due.Add(5 * time.Minute))
	if rpcs, _ := agent.calls(); len(rpcs) != 0 {
		t.Fatalf("%d calls before due + grace", len(rpcs))
	}
	rep := f.sweepAt(due.Add(11 * time.Minute))
	if rep.Lapses != 2 || rep.Delivered != 2 || rep.Failed != 0 {
		t.Fatalf("report %+v", rep)
	}
	wantID := expect.LapseID("exp-1", expect.LapseOverdue, due)
	rpcs, push := agent.calls()
	if len(rpcs) != 2 || !rpcs[0].failed || rpcs[1].failed {
		t.Fatalf("want a failed call then a retry, got %d calls", len(rpcs))
	}
	for _, c := range rpcs {
		m := c.msg
		if m.ID != wantID || m.ContextID != "ctx-3" || len(m.ReferenceTasks) != 1 || m.ReferenceTasks[0] != "task-7" ||
			m.TaskID != "" || m.Role != a2a.MessageRoleUser {
			t.Fatalf("message %+v", m)
		}
		if c.header.Get("A2A-Extensions") != uri || c.header.Get("A2A-Version") != "1.0" || c.id != string(wantID) {
			t.Fatalf("headers %v, id %v", c.header, c.id)
		}
		rec, ok := m.Metadata[uri].(map[string]any)
		if !ok {
			t.Fatalf("no record under %s: %v", uri, m.Metadata)
		}
		lapse, _ := rec["lapse"].(map[string]any)
		if rec["kind"] != "lapse" || lapse["lapseId"] != wantID || lapse["lapse"] != "overdue" || lapse["expectationId"] != "exp-1" {
			t.Fatalf("record %v", rec)
		}
		exp, _ := rec["expectation"].(map[string]any)
		rt, _ := exp["replyTo"].(map[string]any)
		if p, _ := rt["push"].(map[string]any); p["token"] != "set" {
			t.Fatalf("the push token leaks into the notice: %v", rt)
		}
	}
	if len(push) != 1 || push[0].msg == nil || push[0].msg.ID != wantID || push[0].header.Get(PushTokenHeader) != "tok-1" {
		t.Fatalf("push %+v", push)
	}
	f.sweepAt(due.Add(time.Hour))
	f.withA2A(sink) // restart
	f.sweepAt(due.Add(2 * time.Hour))
	if rpcs, push := agent.calls(); len(rpcs) != 2 || len(push) != 1 {
		t.Fatalf("resent: %d calls, %d pushes", len(rpcs), len(push))
	}
}

// An agent that keeps failing: the sink gives up after Attempts, the
// watcher keeps the lapse and a later sweep sends the same message.
func TestA2ASinkBoundedRetries(t *testing.T) {
	f := newFixture(t)
	agent := newFakeAgent(t, 3)
	var slept []time.Duration
	sink := &A2A{Attempts: 2, Backoff: time.Second, BackoffMax: time.Second, Sleep: func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		return nil
	}}
	f.withA2A(sink)
	due := t0.Add(time.Hour)
	raise := expect.Raise{ExpectationID: "exp-1", Kind: "k", Subject: expect.Subject{Type: "doc", ID: "d1"},
		FactKey: "f", DueAt: due, Basis: expect.BasisDeclared, Origin: expect.Origin{TaskID: "task-7"},
		ReplyTo: &expect.ReplyTo{URL: agent.srv.URL + "/rpc"}}
	if _, err := f.l.SubmitExpect(context.Background(), expect.RaiseCommand{Raise: raise}, false, ledger.WriteOptions{Actor: "agent"}); err != nil {
		t.Fatal(err)
	}
	if rep := f.sweepAt(due.Add(time.Minute)); rep.Failed != 1 || rep.Delivered != 0 {
		t.Fatalf("report %+v", rep)
	}
	if rep := f.sweepAt(due.Add(2 * time.Minute)); rep.Delivered != 1 {
		t.Fatalf("report %+v", rep)
	}
	rpcs, _ := agent.calls()
	if len(rpcs) != 4 || len(slept) != 2 {
		t.Fatalf("%d calls, slept %v", len(rpcs), slept)
	}
	for _, c := range rpcs {
		if c.msg.ID != rpcs[0].msg.ID || c.msg.ContextID != "" || c.header.Get("A2A-Extensions") != "urn:tally:ext:expect" {
			t.Fatalf("message %+v, headers %v", c.msg, c.header)
		}
	}
}
