package server

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/a2atask"
	"tally/expect"
	"tally/instant"
	"tally/ledger"
	"tally/store"
)

// raisingAgent is the agent that raised expectations: a JSON-RPC endpoint
// on 127.0.0.1 that records every SendMessage and fails the first ones.
type raisingAgent struct {
	srv  *httptest.Server
	mu   sync.Mutex
	fail int
	got  []raisingCall
}

type raisingCall struct {
	exts   string
	msg    *a2a.Message
	failed bool
}

func newRaisingAgent(t *testing.T, fail int) *raisingAgent {
	a := &raisingAgent{fail: fail}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     any                    `json:"id"`
			Method string                 `json:"method"`
			Params a2a.SendMessageRequest `json:"params"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &req); err != nil || req.Method != "SendMessage" {
			http.Error(w, "bad request", 400)
			return
		}
		a.mu.Lock()
		c := raisingCall{exts: r.Header.Get("A2A-Extensions"), msg: req.Params.Message, failed: a.fail > 0}
		if c.failed {
			a.fail--
		}
		a.got = append(a.got, c)
		a.mu.Unlock()
		if c.failed {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		res, _ := json.Marshal(a2a.StreamResponse{Event: &a2a.Task{ID: "t-lapse", ContextID: req.Params.Message.ContextID,
			Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}})
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": json.RawMessage(res)})
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *raisingAgent) calls() []raisingCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]raisingCall(nil), a.got...)
}

// timedFixture is a fixture whose ledger clock the test moves and whose
// built-in timekeeper sweeps every 20ms.
type timedFixture struct {
	*fixture
	mu    sync.Mutex
	clock time.Time
	// tune adjusts the server's configuration before each start; nil: the
	// agents on 127.0.0.1 are allowed lapse targets.
	tune func(*Config)
}

func (tf *timedFixture) now() time.Time { tf.mu.Lock(); defer tf.mu.Unlock(); return tf.clock }
func (tf *timedFixture) set(t time.Time) {
	tf.mu.Lock()
	tf.clock = t
	tf.mu.Unlock()
}

func newTimedFixture(t *testing.T, tune ...func(*Config)) *timedFixture {
	tf := &timedFixture{clock: t0}
	if len(tune) > 0 {
		tf.tune = tune[0]
	}
	root := t.TempDir()
	if err := store.Init(root); err != nil {
		t.Fatal(err)
	}
	tf.fixture = &fixture{t: t, root: root, tokens: map[string]string{}}
	tf.start()
	for _, who := range []string{"author", "reviewer"} {
		tok, _, err := fileTokens(tf.srv).Create("acme", who, "agent", t0)
		if err != nil {
			t.Fatal(err)
		}
		tf.tokens[who] = tok
	}
	return tf
}

// start (re)starts the server on the fixture's directory: a restart.
func (tf *timedFixture) start() {
	t := tf.t
	if tf.ts != nil {
		tf.ts.Close()
		tf.srv.Close()
	}
	cfg := DefaultConfig()
	cfg.Root = tf.root
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Ledger.Now = tf.now
	cfg.WatchEvery = 20 * time.Millisecond
	cfg.Watch.Sinks = nil
	cfg.A2A.LapseBackoff = 10 * time.Millisecond
	cfg.A2A.LapseHosts = []string{"127.0.0.1"}
	if tf.tune != nil {
		tf.tune(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); s.Close() })
	tf.srv, tf.ts = s, ts
}

func expectSend(msgID, taskID, contextID, key string, record map[string]any) map[string]any {
	m := map[string]any{
		"messageId": msgID, "role": "ROLE_USER",
		"parts":    []any{map[string]any{"text": "an expectation"}},
		"metadata": map[string]any{key: record},
	}
	if taskID != "" {
		m["taskId"] = taskID
	}
	if contextID != "" {
		m["contextId"] = contextID
	}
	return map[string]any{"message": m}
}

// replyDoc returns the document under key in a SendMessage's answer message.
func replyDoc(t *testing.T, r rpcResponse, key string) map[string]any {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error %d: %s", r.Error.Code, r.Error.Message)
	}
	var wrapped struct {
		Message *a2a.Message `json:"message"`
	}
	if err := json.Unmarshal(r.Result, &wrapped); err != nil || wrapped.Message == nil {
		t.Fatalf("not a message: %s", r.raw)
	}
	doc, ok := wrapped.Message.Metadata[key].(map[string]any)
	if !ok {
		t.Fatalf("no document under %q: %s", key, r.raw)
	}
	return doc
}

func (tf *timedFixture) lapses() int {
	l, err := tf.srv.session("acme", "main")
	if err != nil {
		tf.t.Fatal(err)
	}
	n := 0
	l.Refresh()
	l.Read(func(st *ledger.State) { n = len(st.Expects.Lapses(time.Time{})) })
	return n
}

// An expectation raised over A2A (the draft's URI) with a replyTo: once its
// due and grace pass, the built-in timekeeper sends the raising agent exactly
// one SendMessage in the origin context, referencing the origin task, with
// the lapse id as messageId; the failed first attempt is retried with the
// same message; a restarted server does not send it again.
func TestA2AExpectationLapseDelivery(t *testing.T) {
	tf := newTimedFixture(t)
	agent := newRaisingAgent(t, 1)
	due := t0.Add(time.Hour)
	rec := map[string]any{
		"expectationId": "exp-review", "kind": "doc.review", "subject": map[string]any{"type": "doc", "id": "d1"},
		"satisfiedBy": map[string]any{"factKey": "doc.reviewed:d1"}, "dueAt": instant.Format(due), "grace": "PT10M",
		"basis": "declared", "replyTo": agent.srv.URL + "/rpc",
	}
	params := expectSend("m-raise-1", "task-7", "ctx-3", a2atask.ExpectationsDraftURI, rec)
	code, r, echoed := tf.rpc("author", a2atask.ExpectationsDraftURI, "SendMessage", params)
	if code != 200 || echoed != a2atask.ExpectationsDraftURI {
		t.Fatalf("%d %q %s", code, echoed, r.raw)
	}
	view, _ := replyDoc(t, r, a2atask.ExpectationsDraftURI)["expectation"].(map[string]any)
	origin, _ := view["origin"].(map[string]any)
	replyTo, _ := view["replyTo"].(map[string]any)
	if view["by"] != "author" || origin["taskId"] != "task-7" || origin["contextId"] != "ctx-3" ||
		replyTo["url"] != agent.srv.URL+"/rpc" || replyTo["extension"] != a2atask.ExpectationsDraftURI {
		t.Fatalf("view %v", view)
	}
	// A retried SendMessage is the same answer and raises nothing more.
	before := tf.logBytes()
	if _, r2, _ := tf.rpc("author", a2atask.ExpectationsDraftURI, "SendMessage", params); r2.raw != r.raw {
		t.Fatalf("retry answered differently:\n%s\n%s", r.raw, r2.raw)
	}
	if string(before) != string(tf.logBytes()) {
		t.Fatal("a retried raise appended")
	}

	tf.set(due.Add(5 * time.Minute)) // within grace
	sweptAgain(t, tf.srv, "acme/main")
	if n := len(agent.calls()); n != 0 {
		t.Fatalf("%d calls within grace", n)
	}
	tf.set(due.Add(11 * time.Minute))
	waitFor(t, "the failed call and its retry", func() bool { return len(agent.calls()) >= 2 })
	sweptAgain(t, tf.srv, "acme/main") // more sweeps send nothing more
	calls := agent.calls()
	if len(calls) != 2 || !calls[0].failed || calls[1].failed {
		t.Fatalf("want one failed call and its retry, got %+v", calls)
	}
	wantID := expect.LapseID("exp-review", expect.LapseOverdue, due)
	for _, c := range calls {
		m := c.msg
		if m.ID != wantID || m.ContextID != "ctx-3" || len(m.ReferenceTasks) != 1 || m.ReferenceTasks[0] != "task-7" || c.exts != a2atask.ExpectationsDraftURI {
			t.Fatalf("message %+v (A2A-Extensions %q)", m, c.exts)
		}
		doc, _ := m.Metadata[a2atask.ExpectationsDraftURI].(map[string]any)
		lapse, _ := doc["lapse"].(map[string]any)
		if lapse["lapseId"] != wantID || lapse["lapse"] != "overdue" {
			t.Fatalf("record %v", m.Metadata)
		}
	}
	if n := tf.lapses(); n != 1 {
		t.Fatalf("%d lapses", n)
	}
	tf.start() // restart: the journal says it was delivered
	tf.srv.session("acme", "main")
	tf.set(due.Add(2 * time.Hour))
	sweptAgain(t, tf.srv, "acme/main")
	if n := len(agent.calls()); n != 2 {
		t.Fatalf("%d calls after a restart", n)
	}
}

// CancelTask on an origin task records its outcome cancelled: its open
// expectations are withdrawn and no lapse follows. A failed origin (the
// outcome action) does the same; a fact satisfies by key.
func TestA2ACancelTaskWithdrawsOriginExpectations(t *testing.T) {
	tf := newTimedFixture(t)
	agent := newRaisingAgent(t, 0)
	due := t0.Add(time.Hour)
	raise := func(msgID, id, task string) {
		rec := map[string]any{
			"expectationId": id, "kind": "doc.review", "subject": map[string]any{"type": "doc", "id": id},
			"satisfiedBy": map[string]any{"factKey": "done:" + id}, "dueAt": instant.Format(due), "basis": "declared",
		}
		p := expectSend(msgID, task, "ctx-9", "urn:tally:ext:expect", rec)
		p["message"].(map[string]any)["metadata"].(map[string]any)["replyTo"] = agent.srv.URL + "/rpc"
		if _, r, _ := tf.rpc("author", "urn:tally:ext:expect", "SendMessage", p); r.Error != nil {
			t.Fatalf("raise %s: %s", id, r.raw)
		}
	}
	raise("m1", "exp-a", "task-9")
	raise("m2", "exp-b", "task-9")
	raise("m3", "exp-c", "task-10")
	raise("m4", "exp-d", "task-11")

	_, r, _ := tf.rpc("author", "urn:tally:ext:expect", "CancelTask", map[string]any{"id": "task-9"})
	task := r.task(t)
	doc := recordOf(t, task, "urn:tally:ext:expect")
	exps, _ := doc["expectations"].([]any)
	if task.Status.State != a2a.TaskStateCanceled || task.ContextID != "ctx-9" || doc["outcome"] != "cancelled" || len(exps) != 2 {
		t.Fatalf("task %s", r.raw)
	}
	for _, e := range exps {
		if e.(map[string]any)["state"] != "withdrawn" {
			t.Fatalf("not withdrawn: %v", e)
		}
	}
	_, r, _ = tf.rpc("author", "urn:tally:ext:expect", "GetTask", map[string]any{"id": "task-9"})
	if got := r.task(t); got.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("GetTask %s", r.raw)
	}
	if _, r, _ = tf.rpc("author", "urn:tally:ext:expect", "CancelTask", map[string]any{"id": "task-9"}); r.Error == nil || r.Error.Code != -32002 {
		t.Fatalf("second cancel: %s", r.raw)
	}
	// A failed origin, told as an action in the task's own message.
	_, r, _ = tf.rpc("author", "urn:tally:ext:expect", "SendMessage",
		expectSend("m5", "task-10", "ctx-9", "urn:tally:ext:expect", map[string]any{"action": "outcome", "outcome": "failed"}))
	if w, _ := replyDoc(t, r, "urn:tally:ext:expect")["withdrawn"].([]any); len(w) != 1 || w[0] != "exp-c" {
		t.Fatalf("outcome %s", r.raw)
	}
	// A fact satisfies exp-d.
	_, r, _ = tf.rpc("reviewer", "urn:tally:ext:expect", "SendMessage",
		expectSend("m6", "", "", "urn:tally:ext:expect", map[string]any{"action": "fact", "factKey": "done:exp-d", "subject": map[string]any{"type": "doc", "id": "exp-d"}}))
	if f, _ := replyDoc(t, r, "urn:tally:ext:expect")["fact"].(map[string]any); f["factKey"] != "done:exp-d" {
		t.Fatalf("fact %s", r.raw)
	}
	// A member another action has is refused by name.
	_, r, _ = tf.rpc("author", "urn:tally:ext:expect", "SendMessage",
		expectSend("m7", "", "", "urn:tally:ext:expect", map[string]any{"action": "withdraw", "expectationId": "exp-a", "outcome": "x"}))
	if r.Error == nil || r.Error.Code != -32602 {
		t.Fatalf("stray member: %s", r.raw)
	}

	tf.set(due.Add(time.Hour))
	sweptAgain(t, tf.srv, "acme/main")
	if n := tf.lapses(); n != 0 {
		t.Fatalf("%d lapses after withdrawal and satisfaction", n)
	}
	if n := len(agent.calls()); n != 0 {
		t.Fatalf("%d lapse messages sent", n)
	}
}

// A raise's push config may come from the request's
// configuration.taskPushNotificationConfig; the view never shows the token.
func TestA2AExpectationPushConfigFromRequest(t *testing.T) {
	tf := newTimedFixture(t)
	rec := map[string]any{
		"kind": "doc.review", "subject": map[string]any{"type": "doc", "id": "d1"},
		"satisfiedBy": map[string]any{"factKey": "k"}, "dueAt": instant.Format(t0.Add(time.Hour)), "basis": "declared",
	}
	p := expectSend("m1", "task-1", "", "urn:tally:ext:expect", rec)
	p["configuration"] = map[string]any{"taskPushNotificationConfig": map[string]any{"taskId": "task-1", "url": "http://127.0.0.1:9/push", "token": "tok",
		"authentication": map[string]any{"scheme": "Bearer", "credentials": "cred"}}}
	_, r, _ := tf.rpc("author", "urn:tally:ext:expect", "SendMessage", p)
	view, _ := replyDoc(t, r, "urn:tally:ext:expect")["expectation"].(map[string]any)
	rt, _ := view["replyTo"].(map[string]any)
	push, _ := rt["push"].(map[string]any)
	auth, _ := push["authentication"].(map[string]any)
	if push["url"] != "http://127.0.0.1:9/push" || push["token"] != "set" || rt["url"] != nil ||
		auth["scheme"] != "Bearer" || auth["credentials"] != "set" {
		t.Fatalf("view %v", view)
	}
	// The timekeeper gets the credentials themselves.
	l, err := tf.srv.session("acme", "main")
	if err != nil {
		t.Fatal(err)
	}
	id, _ := view["expectationId"].(string)
	var got expect.ReplyTo
	l.Read(func(st *ledger.State) { got, _ = st.Expects.ReplyTo(id) })
	if got.PushAuthScheme != "Bearer" || got.PushAuthCredentials != "cred" || got.PushToken != "tok" {
		t.Fatalf("kept for the watcher: %+v", got)
	}
	// A replyTo that is not an http(s) URL is refused by name.
	rec["replyTo"] = "file:///etc/passwd"
	_, r, _ = tf.rpc("author", "urn:tally:ext:expect", "SendMessage", expectSend("m2", "task-1", "", "urn:tally:ext:expect", rec))
	if r.Error == nil || r.Error.Code != -32602 {
		t.Fatalf("bad replyTo: %s", r.raw)
	}
}
