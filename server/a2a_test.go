package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/a2atask"
)

const a2aBase = base + "/a2a"

// rpc sends one JSON-RPC call as who with the given A2A-Extensions header
// (none when exts is "") and returns the HTTP status, the decoded envelope
// and the response header.
func (f *fixture) rpc(who, exts, method string, params any, hdr ...string) (int, rpcResponse, string) {
	f.t.Helper()
	p, _ := json.Marshal(params)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, p)
	if exts != "" {
		hdr = append(hdr, "A2A-Extensions", exts)
	}
	code, out, h := f.do("POST", a2aBase, who, body, hdr...)
	var r rpcResponse
	if code == 200 {
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			f.t.Fatalf("%s: %v: %s", method, err, out)
		}
	}
	r.raw = out
	return code, r, h.Get("A2A-Extensions")
}

type rpcResponse struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw string
}

func (r rpcResponse) task(t *testing.T) *a2a.Task {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("error %d: %s", r.Error.Code, r.Error.Message)
	}
	var wrapped struct {
		Task *a2a.Task `json:"task"`
	}
	if err := json.Unmarshal(r.Result, &wrapped); err == nil && wrapped.Task != nil {
		return wrapped.Task
	}
	var task a2a.Task
	if err := json.Unmarshal(r.Result, &task); err != nil || task.ID == "" {
		t.Fatalf("not a task: %s", r.raw)
	}
	return &task
}

func sendParams(msgID string, key string, record map[string]any) map[string]any {
	return map[string]any{"message": map[string]any{
		"messageId": msgID, "role": "ROLE_USER",
		"parts":    []any{map[string]any{"text": "a promise"}},
		"metadata": map[string]any{key: record},
	}}
}

func recordOf(t *testing.T, task *a2a.Task, key string) map[string]any {
	t.Helper()
	m, ok := task.Metadata[key].(map[string]any)
	if !ok {
		t.Fatalf("task %s has no record under %q: %v", task.ID, key, task.Metadata)
	}
	return m
}

func TestA2AAgentCard(t *testing.T) {
	f := newFixture(t)
	for _, path := range []string{"/.well-known/agent-card.json", a2aBase + "/.well-known/agent-card.json"} {
		code, body, h := f.do("GET", path, "", "")
		if code != 200 || h.Get("ETag") == "" || !strings.Contains(h.Get("Cache-Control"), "max-age=") {
			t.Fatalf("%s: %d %v", path, code, h)
		}
		var card a2a.AgentCard
		if err := json.Unmarshal([]byte(body), &card); err != nil {
			t.Fatal(err)
		}
		exts := card.Capabilities.Extensions
		if len(exts) != 3 || exts[0].URI != "urn:tally:ext:promise" || exts[1].URI != "urn:tally:ext:claim" || exts[2].URI != "urn:tally:ext:expect" {
			t.Fatalf("extensions: %+v", exts)
		}
		for _, e := range exts {
			if e.Required || e.Params["keepsTime"] != true || !strings.HasSuffix(fmt.Sprint(e.Params["events"]), "/events") {
				t.Fatalf("extension %s: %+v", e.URI, e)
			}
		}
		if al, _ := exts[0].Params["aliases"].([]any); len(al) != 1 || al[0] != a2atask.PinkiPromiseURI {
			t.Fatalf("promise aliases: %v", exts[0].Params)
		}
		if acts, _ := exts[1].Params["actions"].([]any); len(acts) != len(a2aClaimActions) || acts[0] != "create" || !strings.Contains(exts[1].Description, "CancelTask cancels as the claimant") {
			t.Fatalf("claim extension: %+v", exts[1])
		}
		if al, _ := exts[2].Params["aliases"].([]any); len(al) != 1 || al[0] != a2atask.ExpectationsDraftURI {
			t.Fatalf("expect aliases: %v", exts[2].Params)
		}
		ifs := card.SupportedInterfaces
		if len(ifs) != 2 || ifs[0].ProtocolBinding != a2a.TransportProtocolJSONRPC || ifs[1].ProtocolBinding != a2a.TransportProtocolHTTPJSON ||
			ifs[0].ProtocolVersion != "1.0" || ifs[1].ProtocolVersion != "1.0" {
			t.Fatalf("interfaces: %+v %+v", ifs[0], ifs[1])
		}
		if path != "/.well-known/agent-card.json" && (ifs[0].URL != f.ts.URL+a2aBase || ifs[1].URL != f.ts.URL+a2aBase+"/rest") {
			t.Fatalf("session card URLs: %s %s", ifs[0].URL, ifs[1].URL)
		}
		code, body, h2 := f.do("GET", path, "", "", "If-None-Match", h.Get("ETag"))
		if code != 304 || body != "" || h2.Get("ETag") != h.Get("ETag") {
			t.Fatalf("conditional GET: %d %q", code, body)
		}
	}
	// The URIs are configurable.
	f.srv.cfg.A2A.PromiseURI = "urn:example:promise"
	_, body, _ := f.do("GET", "/.well-known/agent-card.json", "", "")
	if !strings.Contains(body, `"uri":"urn:example:promise"`) {
		t.Fatalf("configured URI missing: %s", body)
	}
}

func TestA2ASendMessageCreatesPromise(t *testing.T) {
	f := newFixture(t)
	rec := map[string]any{"id": "desk/ship-91", "promise": "hand back a reviewed schema", "to": "author", "until": "2026-09-01T17:00:00Z", "meta": map[string]any{"ticket": 91}}
	code, r, echo := f.rpc("reviewer", "urn:tally:ext:promise, urn:unknown:ext", "SendMessage", sendParams("m-1", "urn:tally:ext:promise", rec))
	if code != 200 || echo != "urn:tally:ext:promise" {
		t.Fatalf("send: %d echo %q %s", code, echo, r.raw)
	}
	task := r.task(t)
	if task.ID != "desk/ship-91" || task.Status.State != a2a.TaskStateWorking || task.ContextID != "acme/main" {
		t.Fatalf("task: %+v", task)
	}
	got := recordOf(t, task, "urn:tally:ext:promise")
	if got["by"] != "reviewer" || got["to"] != "author" || got["state"] != "owed" || got["until"] != "2026-09-01T17:00:00Z" {
		t.Fatalf("record: %v", got)
	}
	if !strings.Contains(string(f.logBytes()), `"type":"promise","id":"desk/ship-91"`) {
		t.Fatalf("log: %s", f.logBytes())
	}

	// pinki's URI and key work unchanged, and the task field names the task.
	key := a2atask.PinkiPromiseURI + "/promise"
	rec = map[string]any{"promise": "ship the parser", "to": "author", "until": "2h", "task": "a2a-task-9c1f0e"}
	code, r, echo = f.rpc("reviewer", a2atask.PinkiPromiseURI, "SendMessage", sendParams("m-2", key, rec))
	if code != 200 || echo != a2atask.PinkiPromiseURI {
		t.Fatalf("pinki send: %d %q %s", code, echo, r.raw)
	}
	task = r.task(t)
	if task.ID != "a2a-task-9c1f0e" || recordOf(t, task, key)["task"] != "a2a-task-9c1f0e" {
		t.Fatalf("pinki task: %+v", task)
	}
	// The same over HTTP+JSON.
	body, _ := json.Marshal(sendParams("m-3", "urn:tally:ext:promise", map[string]any{"id": "p-rest", "promise": "x", "to": "author", "until": "3d"}))
	code, out, h := f.do("POST", a2aBase+"/rest/message:send", "reviewer", string(body), "A2A-Extensions", "urn:tally:ext:promise")
	if code != 200 || h.Get("A2A-Extensions") != "urn:tally:ext:promise" || !strings.Contains(out, `"id":"p-rest"`) {
		t.Fatalf("rest send: %d %v %s", code, h, out)
	}
}

func TestA2ASendMessageRefusals(t *testing.T) {
	f := newFixture(t)
	good := map[string]any{"id": "p1", "promise": "x", "to": "author", "until": "2026-09-01T17:00:00Z"}
	cases := []struct {
		name, who, exts, key string
		rec                  map[string]any
		code                 int
		want                 string
	}{
		{"not activated", "reviewer", "", "urn:tally:ext:promise", good, -32008, "A2A-Extensions"},
		{"other URI activated", "reviewer", a2atask.PinkiPromiseURI, "urn:tally:ext:promise", good, -32008, "urn:tally:ext:promise"},
		{"bad until", "reviewer", "urn:tally:ext:promise", "urn:tally:ext:promise", map[string]any{"promise": "x", "to": "author", "until": "soon"}, -32602, ".until:"},
		{"unknown field", "reviewer", "urn:tally:ext:promise", "urn:tally:ext:promise", map[string]any{"promise": "x", "to": "author", "until": "2h", "colour": "red"}, -32602, ".colour:"},
		{"bad action", "reviewer", "urn:tally:ext:promise", "urn:tally:ext:promise", map[string]any{"action": "forget", "id": "p1"}, -32602, ".action:"},
		{"no text", "reviewer", "urn:tally:ext:promise", "urn:tally:ext:promise", map[string]any{"to": "author", "until": "2h"}, -32602, "promise:"},
		{"wrong actor", "author", "urn:tally:ext:promise", "urn:tally:ext:promise", map[string]any{"promise": "x", "by": "reviewer", "to": "author", "until": "2h"}, -31403, "by:"},
		{"promise record under the claim URI", "reviewer", "urn:tally:ext:claim", "urn:tally:ext:claim", good, -32602, ".id: is not a member of a create record"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := f.logBytes()
			code, r, _ := f.rpc(c.who, c.exts, "SendMessage", sendParams("m-"+c.name, c.key, c.rec))
			if code != 200 || r.Error == nil || r.Error.Code != c.code || !strings.Contains(r.Error.Message, c.want) {
				t.Fatalf("%d %s", code, r.raw)
			}
			if string(f.logBytes()) != string(before) {
				t.Fatal("a refused message appended")
			}
		})
	}
	// No record at all names where one goes.
	code, r, _ := f.rpc("reviewer", "urn:tally:ext:promise", "SendMessage", map[string]any{"message": map[string]any{"messageId": "m-x", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hi"}}}})
	if code != 200 || r.Error == nil || !strings.Contains(r.Error.Message, "message.metadata") {
		t.Fatalf("no record: %s", r.raw)
	}
	// Without a token: 401; a foreign tenant's token: 404.
	if code, _, _ := f.rpc("", "urn:tally:ext:promise", "SendMessage", sendParams("m-y", "urn:tally:ext:promise", good)); code != 401 {
		t.Fatalf("no token: %d", code)
	}
	if code, _, _ := f.rpc("foreign", "urn:tally:ext:promise", "SendMessage", sendParams("m-z", "urn:tally:ext:promise", good)); code != 404 {
		t.Fatalf("foreign tenant: %d", code)
	}
}

func TestA2ATaskStates(t *testing.T) {
	f := newFixture(t)
	ext := "urn:tally:ext:promise"
	for _, id := range []string{"sat", "can", "rel", "owed", "cond"} {
		rec := map[string]any{"id": id, "promise": "x " + id, "to": "author", "until": "2026-09-01T17:00:00Z"}
		if id == "cond" {
			rec["on"] = "owed"
		}
		if _, r, _ := f.rpc("reviewer", ext, "SendMessage", sendParams("decl-"+id, ext, rec)); r.Error != nil {
			t.Fatal(r.raw)
		}
	}
	// Satisfy through a resolve action carried in the task.
	params := sendParams("res-sat", ext, map[string]any{"action": "resolve", "as": "satisfied", "evidence": []any{"https://example.org/reviews/91", "commit 3f5c732"}})
	params["message"].(map[string]any)["taskId"] = "sat"
	if _, r, _ := f.rpc("reviewer", ext, "SendMessage", params); r.Error != nil {
		t.Fatal(r.raw)
	}
	// Cancel as the debtor needs a reason.
	_, r, _ := f.rpc("reviewer", ext, "CancelTask", map[string]any{"id": "can"})
	if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "reason") {
		t.Fatalf("cancel without reason: %s", r.raw)
	}
	_, r, _ = f.rpc("reviewer", ext, "CancelTask", map[string]any{"id": "can", "metadata": map[string]any{"reason": "the schema was withdrawn"}})
	if task := r.task(t); task.Status.State != a2a.TaskStateRejected {
		t.Fatalf("cancel: %+v", task.Status)
	}
	// Cancel as the creditor releases.
	_, r, _ = f.rpc("author", ext, "CancelTask", map[string]any{"id": "rel"})
	if task := r.task(t); task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("release: %+v", task.Status)
	}
	// Cancelling a resolved task is refused.
	_, r, _ = f.rpc("reviewer", ext, "CancelTask", map[string]any{"id": "sat", "metadata": map[string]any{"reason": "x"}})
	if r.Error == nil || r.Error.Code != -32002 {
		t.Fatalf("cancel resolved: %s", r.raw)
	}
	// An observer's violated assessment never changes the state.
	if _, r, _ := f.rpc("observer", ext, "SendMessage", sendParams("assess-owed", ext, map[string]any{"action": "assess", "id": "owed", "note": "late"})); r.Error != nil {
		t.Fatal(r.raw)
	}

	want := map[string]a2a.TaskState{"sat": a2a.TaskStateCompleted, "can": a2a.TaskStateRejected, "rel": a2a.TaskStateCanceled, "owed": a2a.TaskStateWorking, "cond": a2a.TaskStateSubmitted}
	for id, state := range want {
		_, r, _ := f.rpc("author", "", "GetTask", map[string]any{"id": id})
		task := r.task(t)
		if task.Status.State != state {
			t.Errorf("%s: %s, want %s", id, task.Status.State, state)
		}
		rec := recordOf(t, task, ext)
		switch id {
		case "sat":
			if len(task.Artifacts) < 1 || len(task.Artifacts[0].Parts) != 2 || task.Artifacts[0].Parts[0].Text() != "https://example.org/reviews/91" {
				t.Errorf("satisfied artifacts: %+v", task.Artifacts)
			}
		case "can":
			if task.Status.Message == nil || task.Status.Message.Parts[0].Text() != "the schema was withdrawn" {
				t.Errorf("cancelled status message: %+v", task.Status.Message)
			}
		case "owed":
			if rec["overdue"] != false || len(rec["assessments"].([]any)) != 1 {
				t.Errorf("owed record: %v", rec)
			}
		}
	}
	// Overdue stays WORKING: the record says overdue.
	f.srv.cfg.Ledger.Now = func() time.Time { return t0.Add(48 * time.Hour) }
	_, r, _ = f.rpc("author", "", "GetTask", map[string]any{"id": "owed"})
	if task := r.task(t); task.Status.State != a2a.TaskStateWorking || recordOf(t, task, ext)["overdue"] != true {
		t.Fatalf("overdue: %+v", task)
	}
	// Over HTTP+JSON, with a pinki key when pinki's URI is activated.
	code, out, h := f.do("GET", a2aBase+"/rest/tasks/sat", "author", "", "A2A-Extensions", a2atask.PinkiPromiseURI)
	if code != 200 || h.Get("A2A-Extensions") != a2atask.PinkiPromiseURI || !strings.Contains(out, `"`+a2atask.PinkiPromiseURI+`/promise":{"id":"sat"`) || !strings.Contains(out, "TASK_STATE_COMPLETED") {
		t.Fatalf("rest get: %d %s", code, out)
	}
	if code, out, _ := f.do("GET", a2aBase+"/rest/tasks/nope", "author", ""); code != 404 {
		t.Fatalf("rest get unknown: %d %s", code, out)
	}
	_, r, _ = f.rpc("author", "", "GetTask", map[string]any{"id": "nope"})
	if r.Error == nil || r.Error.Code != -32001 {
		t.Fatalf("unknown task: %s", r.raw)
	}

	// ListTasks: all five, filtered by state, paged.
	_, r, _ = f.rpc("author", "", "ListTasks", map[string]any{})
	var list a2a.ListTasksResponse
	if err := json.Unmarshal(r.Result, &list); err != nil || list.TotalSize != 5 || len(list.Tasks) != 5 || list.Tasks[0].ID != "sat" {
		t.Fatalf("list: %v %s", err, r.raw)
	}
	_, r, _ = f.rpc("author", "", "ListTasks", map[string]any{"status": "TASK_STATE_COMPLETED", "includeArtifacts": true})
	list = a2a.ListTasksResponse{}
	if err := json.Unmarshal(r.Result, &list); err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != "sat" || len(list.Tasks[0].Artifacts) != 1 {
		t.Fatalf("list completed: %v %s", err, r.raw)
	}
	_, r, _ = f.rpc("author", "", "ListTasks", map[string]any{"pageSize": 2})
	list = a2a.ListTasksResponse{}
	if err := json.Unmarshal(r.Result, &list); err != nil || len(list.Tasks) != 2 || list.NextPageToken != "2" {
		t.Fatalf("list page: %v %s", err, r.raw)
	}
	code, out, _ = f.do("GET", a2aBase+"/rest/tasks?pageSize=2&pageToken=4", "author", "")
	if code != 200 || !strings.Contains(out, `"id":"cond"`) || !strings.Contains(out, `"totalSize":5`) {
		t.Fatalf("rest list: %d %s", code, out)
	}
}

func TestA2ARetriedSendMessageIsIdempotent(t *testing.T) {
	f := newFixture(t)
	ext := "urn:tally:ext:promise"
	// No id: the ledger mints one, so a second execution would make a second promise.
	params := sendParams("retry-1", ext, map[string]any{"promise": "x", "to": "author", "until": "2h"})
	_, r1, _ := f.rpc("reviewer", ext, "SendMessage", params)
	after := f.logBytes()
	_, r2, _ := f.rpc("reviewer", ext, "SendMessage", params)
	if string(r1.Result) != string(r2.Result) || r1.task(t).ID == "" {
		t.Fatalf("retry differs:\n%s\n%s", r1.raw, r2.raw)
	}
	if string(f.logBytes()) != string(after) || strings.Count(string(after), `"type":"promise"`) != 1 {
		t.Fatalf("retry appended: %s", f.logBytes())
	}
	// The same message id with another record is a conflict, not a write.
	_, r3, _ := f.rpc("reviewer", ext, "SendMessage", sendParams("retry-1", ext, map[string]any{"promise": "y", "to": "author", "until": "2h"}))
	if r3.Error == nil || !strings.Contains(r3.raw, "IdempotencyConflict") {
		t.Fatalf("conflict: %s", r3.raw)
	}
	// A retry through HTTP+JSON with the same message id replays as well.
	body, _ := json.Marshal(params)
	code, out, _ := f.do("POST", a2aBase+"/rest/message:send", "reviewer", string(body), "A2A-Extensions", ext)
	if code != 200 || !strings.Contains(out, string(r1.task(t).ID)) || string(f.logBytes()) != string(after) {
		t.Fatalf("rest retry: %d %s", code, out)
	}
}
