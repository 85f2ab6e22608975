package timekeeper

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/expect"
	"tally/ledger"
	"tally/ledgerservice"
	"tally/service"
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

// withA2A restarts the fixture's timekeeper with the recorder and an A2A sink.
func (f *fixture) withA2A(sink *A2A) {
	f.t.Helper()
	f.w.Close()
	wc := DefaultConfig()
	wc.Sinks = []Sink{f.rec, sink}
	w, err := New(context.Background(), ledgerservice.OneSession(f.l, ledgerservice.Config{}), service.Call{Tenant: "acme", Session: "main"}, wc)
	if err != nil {
		f.t.Fatal(err)
	}
	if sink.Now == nil {
		sink.Now = f.clk.Now
	}
	sink.Journal = w.Journal()
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
	sink := &A2A{ExtensionURI: "urn:tally:ext:expect", Sleep: noSleep, Hosts: []string{"127.0.0.1"}}
	f.withA2A(sink)
	due := t0.Add(time.Hour)
	raise := expect.Raise{ExpectationID: "exp-1", Kind: "doc.review", Subject: expect.Subject{Type: "doc", ID: "d1"},
		FactKey: "doc.reviewed:d1", DueAt: due, Grace: 10 * time.Minute, Basis: expect.BasisDeclared,
		Origin: expect.Origin{TaskID: "task-7", ContextID: "ctx-3"},
		ReplyTo: &expect.ReplyTo{URL: agent.srv.URL + "/.well-known/agent-card.json", Extension: uri, PushURL: agent.srv.URL + "/push", PushToken: "tok-1",
			PushAuthScheme: "Bearer", PushAuthCredentials: "push-secret"}}
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
		p, _ := rt["push"].(map[string]any)
		auth, _ := p["authentication"].(map[string]any)
		if p["token"] != "set" || auth["scheme"] != "Bearer" || auth["credentials"] != "set" {
			t.Fatalf("the push token or credentials leak into the notice: %v", rt)
		}
	}
	if len(push) != 1 || push[0].msg == nil || push[0].msg.ID != wantID || push[0].header.Get(PushTokenHeader) != "tok-1" ||
		push[0].header.Get("Authorization") != "Bearer push-secret" {
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
// timekeeper keeps the lapse and a later sweep sends the same message.
func TestA2ASinkBoundedRetries(t *testing.T) {
	f := newFixture(t)
	agent := newFakeAgent(t, 3)
	var slept []time.Duration
	sink := &A2A{Hosts: []string{"127.0.0.1"}, Attempts: 2, Backoff: time.Second, BackoffMax: time.Second, Sleep: func(_ context.Context, d time.Duration) error {
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

// raiseTo raises exp-<n> due at due, its lapses replied to url.
func (f *fixture) raiseTo(n int, due time.Time, url string) {
	f.t.Helper()
	raise := expect.Raise{ExpectationID: "exp-" + strconv.Itoa(n), Kind: "k", Subject: expect.Subject{Type: "doc", ID: "d" + strconv.Itoa(n)},
		FactKey: "f" + strconv.Itoa(n), DueAt: due, Basis: expect.BasisDeclared, Origin: expect.Origin{TaskID: "task-7"},
		ReplyTo: &expect.ReplyTo{URL: url}}
	if _, err := f.l.SubmitExpect(context.Background(), expect.RaiseCommand{Raise: raise}, false, ledger.WriteOptions{Actor: "agent"}); err != nil {
		f.t.Fatal(err)
	}
}

// The allow-list's patterns: hosts, host:port, *.domain; and, empty, any
// public host but never a loopback, private or link-local one.
func TestA2AHostPolicy(t *testing.T) {
	p, err := NewHostPolicy([]string{"agents.example.org", "127.0.0.1:8080", "*.fleet.example.net", "[::1]:9000"})
	if err != nil {
		t.Fatal(err)
	}
	for u, ok := range map[string]bool{
		"https://agents.example.org/a2a":         true,
		"http://AGENTS.example.org:81/a2a":       true,
		"http://127.0.0.1:8080/rpc":              true,
		"http://127.0.0.1:8081/rpc":              false,
		"http://127.0.0.1/rpc":                   false,
		"https://a.fleet.example.net/x":          true,
		"https://b.a.fleet.example.net/x":        true,
		"https://fleet.example.net/x":            false,
		"https://evilfleet.example.net/x":        false,
		"http://[::1]:9000/":                     true,
		"http://[::1]:9001/":                     false,
		"https://other.example.org/":             false,
		"ftp://agents.example.org/":              false,
		"http://[::ffff:127.0.0.1]:8080/rpc":     true,
		"https://agents.example.org.evil.test/x": false,
	} {
		if err := p.CheckURL(u); (err == nil) != ok {
			t.Errorf("listed: %s: %v, want allowed %v", u, err, ok)
		}
	}
	var open HostPolicy
	for u, ok := range map[string]bool{
		"https://agents.example.org/a2a": true, // a name: judged again on what it resolves to
		"http://127.0.0.1:8080/":         false,
		"http://localhost:8080/":         false,
		"http://10.1.2.3/":               false,
		"http://192.168.1.1/":            false,
		"http://169.254.169.254/latest":  false,
		"http://[::1]/":                  false,
		"http://[fe80::1]/":              false,
		"http://[fd00::1]/":              false,
		"http://0.0.0.0/":                false,
		"http://[::ffff:10.0.0.1]/":      false,
		"http://93.184.216.34/":          true,
	} {
		if err := open.CheckURL(u); (err == nil) != ok {
			t.Errorf("open: %s: %v, want allowed %v", u, err, ok)
		}
	}
	for _, bad := range []string{"a/b", "host:99999", "*", "x@y"} {
		if _, err := NewHostPolicy([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// At connect time the resolved address counts: a name that resolves to
	// loopback is refused unless listed.
	agent := newFakeAgent(t, 0)
	port := agent.srv.URL[strings.LastIndex(agent.srv.URL, ":")+1:]
	if _, err := open.Client(2 * time.Second).Get("http://localhost:" + port + "/.well-known/agent-card.json"); !errors.Is(err, ErrHostNotAllowed) {
		t.Fatalf("localhost dialled under the open policy: %v", err)
	}
	listed, _ := NewHostPolicy([]string{"localhost"})
	resp, err := listed.Client(2 * time.Second).Get("http://localhost:" + port + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatalf("listed localhost refused: %v", err)
	}
	resp.Body.Close()
}

// With the default (empty) allow-list a 127.0.0.1 agent is never called:
// the lapse is journaled as undeliverable at once, never retried. Listed,
// the same agent gets it.
func TestA2ALapseHostRefusedAtDelivery(t *testing.T) {
	f := newFixture(t)
	agent := newFakeAgent(t, 0)
	sink := &A2A{Sleep: noSleep}
	f.withA2A(sink)
	due := t0.Add(time.Hour)
	f.raiseTo(1, due, agent.srv.URL+"/rpc")
	other := &A2A{Sleep: noSleep, Hosts: []string{"agents.example.org"}}
	rep := f.sweepAt(due.Add(time.Minute))
	if rep.Delivered != 1 || rep.Failed != 0 {
		t.Fatalf("report %+v", rep)
	}
	key := expect.LapseID("exp-1", expect.LapseOverdue, due)
	if rpcs, _ := agent.calls(); len(rpcs) != 0 {
		t.Fatalf("a refused target was called %d times", len(rpcs))
	}
	if got := f.w.Journal().Outcome(string(key)); got != OutcomeUndeliverable {
		t.Fatalf("journaled outcome %q", got)
	}
	f.sweepAt(due.Add(time.Hour))
	if rpcs, _ := agent.calls(); len(rpcs) != 0 {
		t.Fatal("retried")
	}
	// A list that does not name the agent refuses it too; one that does lets it through.
	f.withA2A(other)
	f.raiseTo(2, due.Add(time.Hour), agent.srv.URL+"/rpc")
	f.sweepAt(due.Add(2 * time.Hour))
	if rpcs, _ := agent.calls(); len(rpcs) != 0 {
		t.Fatal("an unlisted host was called")
	}
	f.withA2A(&A2A{Sleep: noSleep, Hosts: []string{"127.0.0.1"}})
	f.raiseTo(3, due.Add(2*time.Hour), agent.srv.URL+"/rpc")
	if rep := f.sweepAt(due.Add(3 * time.Hour)); rep.Delivered != 1 || rep.Failed != 0 {
		t.Fatalf("report %+v", rep)
	}
	if rpcs, _ := agent.calls(); len(rpcs) != 1 {
		t.Fatalf("%d calls to a listed agent", len(rpcs))
	}
	// The journal line says why, and a reopened journal reads it back.
	j, err := OpenJournal(filepath.Join(f.l.Dir(), ledgerservice.JournalDirName))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if j.Outcome(string(key)) != OutcomeUndeliverable || j.Outcome(string(expect.LapseID("exp-3", expect.LapseOverdue, due.Add(2*time.Hour)))) != "" {
		t.Fatal("outcomes not read back")
	}
}

// An agent that never answers: the lapse is retried on later sweeps, not
// before its sweep backoff, and abandoned after GiveUpSweeps failed sweeps
// (journaled, logged once, never tried again). Another is abandoned on age.
func TestA2AUnreachableAgentAbandoned(t *testing.T) {
	f := newFixture(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/rpc"
	dead.Close() // connection refused from now on
	var logs strings.Builder
	sink := &A2A{Hosts: []string{"127.0.0.1"}, Attempts: 2, Sleep: noSleep, GiveUpSweeps: 3, SweepBackoff: 10 * time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	f.withA2A(sink)
	due := t0.Add(time.Hour)
	f.raiseTo(1, due, deadURL)
	key := string(expect.LapseID("exp-1", expect.LapseOverdue, due))
	at := due.Add(time.Minute)
	if rep := f.sweepAt(at); rep.Failed != 1 || rep.Delivered != 0 {
		t.Fatalf("sweep 1: %+v", rep)
	}
	// Within the backoff: deferred, no request (nothing to count).
	if rep := f.sweepAt(at.Add(5 * time.Minute)); rep.Failed != 1 {
		t.Fatalf("deferred sweep: %+v", rep)
	}
	if rep := f.sweepAt(at.Add(11 * time.Minute)); rep.Failed != 1 { // failure 2
		t.Fatalf("sweep 2: %+v", rep)
	}
	if rep := f.sweepAt(at.Add(25 * time.Minute)); rep.Failed != 1 { // within 20m backoff
		t.Fatalf("deferred sweep 2: %+v", rep)
	}
	if rep := f.sweepAt(at.Add(32 * time.Minute)); rep.Delivered != 1 || rep.Failed != 0 { // failure 3: abandoned
		t.Fatalf("sweep 3: %+v", rep)
	}
	if got := f.w.Journal().Outcome(key); got != OutcomeAbandoned {
		t.Fatalf("outcome %q", got)
	}
	if rep := f.sweepAt(at.Add(5 * time.Hour)); rep.Delivered != 0 || rep.Failed != 0 {
		t.Fatalf("after abandon: %+v", rep)
	}
	if n := strings.Count(logs.String(), "given up"); n != 1 {
		t.Fatalf("logged %d times:\n%s", n, logs.String())
	}
	// Age: a lapse older than GiveUpAge is abandoned on its first failure.
	old := &A2A{Hosts: []string{"127.0.0.1"}, Attempts: 1, Sleep: noSleep, GiveUpAge: time.Hour}
	f.withA2A(old)
	due2 := at.Add(6 * time.Hour)
	f.raiseTo(2, due2, deadURL)
	if rep := f.sweepAt(due2.Add(2 * time.Hour)); rep.Delivered != 1 || rep.Failed != 0 {
		t.Fatalf("old lapse: %+v", rep)
	}
	if got := f.w.Journal().Outcome(string(expect.LapseID("exp-2", expect.LapseOverdue, due2))); got != OutcomeAbandoned {
		t.Fatalf("old lapse outcome %q", got)
	}
}

// The failed sweeps of a delivery are journaled: a timekeeper restarted
// between sweeps keeps the backoff and the count, and still gives the
// delivery up after GiveUpSweeps failures in all.
func TestA2AFailedSweepsSurviveRestarts(t *testing.T) {
	f := newFixture(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/rpc"
	dead.Close()
	fresh := func() *A2A {
		return &A2A{Hosts: []string{"127.0.0.1"}, Attempts: 1, Sleep: noSleep, GiveUpSweeps: 3, SweepBackoff: 10 * time.Minute,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	}
	f.withA2A(fresh())
	due := t0.Add(time.Hour)
	f.raiseTo(1, due, deadURL)
	key := string(expect.LapseID("exp-1", expect.LapseOverdue, due))
	at := due.Add(time.Minute)
	if rep := f.sweepAt(at); rep.Failed != 1 { // failure 1
		t.Fatalf("sweep 1: %+v", rep)
	}
	f.withA2A(fresh()) // restart
	if r, ok := f.w.Journal().Retry(key); !ok || r.Sweeps != 1 || !r.Next.Equal(at.Add(10*time.Minute)) {
		t.Fatalf("journaled retry %+v %v", r, ok)
	}
	if rep := f.sweepAt(at.Add(5 * time.Minute)); rep.Failed != 1 { // still within the backoff: deferred
		t.Fatalf("deferred after restart: %+v", rep)
	}
	if rep := f.sweepAt(at.Add(11 * time.Minute)); rep.Failed != 1 { // failure 2
		t.Fatalf("sweep 2: %+v", rep)
	}
	f.withA2A(fresh())                                                                     // restart
	if rep := f.sweepAt(at.Add(32 * time.Minute)); rep.Delivered != 1 || rep.Failed != 0 { // failure 3: abandoned
		t.Fatalf("sweep 3 after restarts: %+v", rep)
	}
	if got := f.w.Journal().Outcome(key); got != OutcomeAbandoned {
		t.Fatalf("outcome %q", got)
	}
	if _, ok := f.w.Journal().Retry(key); ok {
		t.Fatal("an abandoned delivery keeps its retry record")
	}
}

// Agents that hang: one sweep spends at most about its budget in A2A
// requests, whatever the number of lapses; the rest wait for a later sweep.
// A hanging agent given the budget has failed: here (GiveUpSweeps 1) each
// sweep abandons one lapse, so none is retried forever.
func TestA2ASweepBudgetBoundsDeadAgents(t *testing.T) {
	release := make(chan struct{})
	var hangMu sync.Mutex
	hangCalls := 0
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hangMu.Lock()
		hangCalls++
		hangMu.Unlock()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); hang.Close() })
	f := newFixture(t)
	sink := &A2A{Hosts: []string{"127.0.0.1"}, Attempts: 3, Sleep: noSleep, SweepBudget: 200 * time.Millisecond, GiveUpSweeps: 1}
	f.withA2A(sink)
	due := t0.Add(time.Hour)
	const lapses = 4
	for i := 1; i <= lapses; i++ {
		f.raiseTo(i, due, hang.URL+"/rpc")
	}
	for sweep := range lapses {
		start := time.Now()
		rep := f.sweepAt(due.Add(time.Duration(sweep+1) * time.Minute))
		took := time.Since(start)
		if took > time.Second {
			t.Fatalf("sweep %d took %v with a 200ms budget", sweep, took)
		}
		if rep.Delivered != 1 || rep.Failed != lapses-1-sweep {
			t.Fatalf("sweep %d: %+v", sweep, rep)
		}
		hangMu.Lock()
		n := hangCalls
		hangMu.Unlock()
		if n != sweep+1 {
			t.Fatalf("after sweep %d: %d requests; the budget allows one per sweep", sweep, n)
		}
	}
	for i := 1; i <= lapses; i++ {
		if got := f.w.Journal().Outcome(string(expect.LapseID("exp-"+strconv.Itoa(i), expect.LapseOverdue, due))); got != OutcomeAbandoned {
			t.Fatalf("exp-%d: outcome %q", i, got)
		}
	}
}
