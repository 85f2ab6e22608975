package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/a2atask"
	"tally/auth"
	"tally/claim"
	"tally/digest"
	"tally/ledger"
)

const claimExt = "urn:tally:ext:claim"

// claimFixture is a fixture with the claim parties' tokens (maintainer the
// claimant and evaluator, parser the respondent) and no built-in timekeeper,
// so that only the test commits deadline facts.
type claimFixture struct {
	*fixture
	sent int // messages sent by send, for their ids
}

func newClaimFixture(t *testing.T) *claimFixture {
	f := newFixture(t)
	f.srv.cfg.WatchEvery = 0 // read when a session opens: none is open yet
	f.token("maintainer", auth.RoleAgent)
	f.token("parser", auth.RoleAgent)
	return &claimFixture{fixture: f}
}

// claimStep is one claim record sent as who; file, when set, rides as the
// message's raw file part (artifact.publish).
type claimStep struct {
	who  string
	rec  map[string]any
	file string
}

// step builds a claimStep: action then member/value pairs.
func step(who, action string, kv ...any) claimStep {
	rec := map[string]any{"action": action}
	for i := 0; i+1 < len(kv); i += 2 {
		rec[kv[i].(string)] = kv[i+1]
	}
	return claimStep{who: who, rec: rec}
}

func (s claimStep) withFile(b string) claimStep { s.file = b; return s }

// claimTerms are C17's terms: one Required slot with one Required check
// that the maintainer evaluates in one attempt.
func claimTerms(id string, kv ...any) claimStep {
	s := step("maintainer", "create", append([]any{"claim", id, "respondent", "parser", "work", "reject incomplete escapes",
		"slots", []any{map[string]any{"name": "change", "mode": "required", "checks": []any{map[string]any{
			"id": "behavior", "validator": map[string]any{"name": "command", "version": "1"}, "evaluator": "maintainer",
			"mode": "required", "phases": []any{"programmatic"}, "attempts": 1}}}}}, kv...)...)
	return s
}

func claimSendParams(msgID string, s claimStep) map[string]any {
	p := sendParams(msgID, claimExt, s.rec)
	if s.file != "" {
		p["message"].(map[string]any)["parts"] = []any{map[string]any{"raw": []byte(s.file), "filename": "fix.patch"}}
	}
	return p
}

// send sends the steps over JSON-RPC with the claim URI activated and
// fails on the first refusal; it returns the last task.
func (f *claimFixture) send(t *testing.T, steps ...claimStep) *a2a.Task {
	t.Helper()
	var task *a2a.Task
	for _, s := range steps {
		f.sent++
		_, r, _ := f.rpc(s.who, claimExt, "SendMessage", claimSendParams(fmt.Sprintf("m-%d", f.sent), s))
		if r.Error != nil {
			t.Fatalf("%s %v: %s", s.who, s.rec, r.raw)
		}
		task = r.task(t)
	}
	return task
}

// Lifecycles: each returns the steps that bring claim id to one state.
func toReceived(id string, kv ...any) []claimStep {
	return []claimStep{claimTerms(id, kv...), step("maintainer", "post", "claim", id), step("parser", "receipt.acquire", "claim", id)}
}

// toDelivered closes, posts and receives a response testament binding the
// artifact A to the slot change (outcome complete), or citing the
// diagnostic D (any other outcome).
func toDelivered(id, outcome string) []claimStep {
	steps := toReceived(id)
	if outcome == "complete" {
		steps = append(steps,
			step("parser", "artifact.publish", "claim", id, "artifact", "A", "slot", "change", "generation", 1, "kind", "patch").withFile("diff --git a b"),
			step("parser", "testament.close", "claim", id, "testament", "T1", "generation", 1, "summary", "length check",
				"bindings", []any{map[string]any{"slot": "change", "artifact": "A", "digest": ""}}))
	} else {
		steps = append(steps,
			step("parser", "artifact.publish", "claim", id, "artifact", "D", "generation", 1).withFile("out of scope"),
			step("parser", "testament.close", "claim", id, "testament", "T1", "generation", 1, "outcome", outcome, "summary", "not done",
				"diagnostics", []any{map[string]any{"artifact": "D", "digest": ""}}))
	}
	return append(steps, step("parser", "testament.post", "claim", id, "testament", "T1"), step("maintainer", "testament.receive", "claim", id, "testament", "T1"))
}

// toVerdict reports result on A for the behavior check, with the
// maintainer's evidence E.
func toVerdict(id, result string) []claimStep {
	return append(toDelivered(id, "complete"),
		step("maintainer", "artifact.publish", "claim", id, "artifact", "E", "role", "result").withFile("4 of 4 cases"),
		step("maintainer", "check.report", "claim", id, "check", "behavior", "artifact", "A", "result", result, "evidence", "E"))
}

// commitDeadline commits claim id's passed deadline as the timekeeper does.
func (f *claimFixture) commitDeadline(t *testing.T, id string) {
	t.Helper()
	l, err := f.srv.session("acme", "main")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.SubmitClaim(context.Background(), claim.CommitDeadline{Claim: id}, ledger.WriteOptions{Actor: f.srv.cfg.Ledger.Timekeeper}); err != nil {
		t.Fatalf("commit deadline of %s: %v", id, err)
	}
}

const past = "2026-09-01T11:00:00Z" // an hour before t0

func TestA2AClaimTaskStates(t *testing.T) {
	cases := []struct {
		name  string
		steps []claimStep
		after func(f *claimFixture, t *testing.T)
		claim claim.Status
		task  a2a.TaskState
	}{
		{"generated", []claimStep{claimTerms("C")}, nil, claim.Generated, a2a.TaskStateSubmitted},
		{"posted", toReceived("C")[:2], nil, claim.Posted, a2a.TaskStateSubmitted},
		{"received", toReceived("C"), nil, claim.Received, a2a.TaskStateWorking},
		{"progressed", append(toReceived("C"), step("parser", "progress", "claim", "C", "generation", 1, "note", "found the branch")), nil, claim.Progressed, a2a.TaskStateWorking},
		{"testament generated", toDelivered("C", "complete")[:5], nil, claim.TestamentGenerated, a2a.TaskStateWorking},
		{"testament acknowledged", toDelivered("C", "complete"), nil, claim.TestamentAcknowledged, a2a.TaskStateWorking},
		{"validating", append(toDelivered("C", "complete"), step("maintainer", "check.begin", "claim", "C", "check", "behavior", "artifact", "A")), nil, claim.Validating, a2a.TaskStateWorking},
		{"satisfied", toVerdict("C", "pass"), nil, claim.Satisfied, a2a.TaskStateCompleted},
		{"post failed", []claimStep{claimTerms("C"), step("maintainer", "post", "claim", "C", "failed", true, "reason", "respondent unreachable")}, nil, claim.PostFailed, a2a.TaskStateFailed},
		{"receipt declined", append(toReceived("C")[:2], step("parser", "receipt.acquire", "claim", "C", "decline", true, "reason", "out of scope for this agent")), nil, claim.ReceiptFailed, a2a.TaskStateRejected},
		{"testament generation failed", append(toReceived("C"), step("parser", "testament.close", "claim", "C", "failed", true, "generation", 1, "reason", "lost the work tree")), nil, claim.TestamentGenerationFailed, a2a.TaskStateFailed},
		{"refused response", toDelivered("C", "refused"), nil, claim.ValidationIncomplete, a2a.TaskStateRejected},
		{"partial response", toDelivered("C", "partial"), nil, claim.ValidationIncomplete, a2a.TaskStateFailed},
		{"validation failed", toVerdict("C", "fail"), nil, claim.ValidationFailed, a2a.TaskStateFailed},
		{"validation errored", toVerdict("C", "error"), nil, claim.ValidationErrored, a2a.TaskStateFailed},
		{"cancelled", []claimStep{claimTerms("C"), step("maintainer", "cancel", "claim", "C", "reason", "no longer needed")}, nil, claim.Cancelled, a2a.TaskStateCanceled},
		{"revoked", append(toReceived("C"), step("maintainer", "revoke", "claim", "C", "reason", "work withdrawn")), nil, claim.Revoked, a2a.TaskStateCanceled},
		{"superseded", []claimStep{claimTerms("C"), claimTerms("C2", "predecessor", "C"), step("maintainer", "supersede", "claim", "C", "successor", "C2", "reason", "terms changed")}, nil, claim.Superseded, a2a.TaskStateCanceled},
		{"expired", []claimStep{claimTerms("C", "deadline", past)}, func(f *claimFixture, t *testing.T) { f.commitDeadline(t, "C") }, claim.Expired, a2a.TaskStateFailed},
		{"dependency failed", []claimStep{claimTerms("X"), claimTerms("C", "depends_on", []any{"X"}), step("maintainer", "cancel", "claim", "X", "reason", "dropped")}, nil, claim.DependencyFailed, a2a.TaskStateFailed},
		{"deadlocked", []claimStep{claimTerms("C", "awaits", []any{"W"}, "deadline", past), claimTerms("W", "awaits", []any{"C"}, "deadline", past)}, func(f *claimFixture, t *testing.T) { f.commitDeadline(t, "C") }, claim.Deadlocked, a2a.TaskStateFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newClaimFixture(t)
			f.send(t, c.steps...)
			if c.after != nil {
				c.after(f, t)
			}
			_, r, echo := f.rpc("observer", claimExt, "GetTask", map[string]any{"id": "C"})
			task := r.task(t)
			rec := recordOf(t, task, claimExt)
			if rec["state"] != string(c.claim) || task.Status.State != c.task || task.ID != "C" || task.ContextID != "acme/main" || echo != claimExt {
				t.Fatalf("claim %v, task %s %s in %s (echo %q); want %s → %s", rec["state"], task.ID, task.Status.State, task.ContextID, echo, c.claim, c.task)
			}
			if got := a2atask.ClaimState(&claim.View{State: c.claim}); c.claim != claim.ValidationIncomplete && got != c.task {
				t.Fatalf("a2atask.ClaimState(%s) = %s", c.claim, got)
			}
			switch {
			case c.claim == claim.Satisfied:
				if len(task.Artifacts) != 2 || task.Artifacts[0].ID != "A" || task.Artifacts[1].ID != "testament/T1" {
					t.Fatalf("artifacts: %+v", task.Artifacts)
				}
				parts := task.Artifacts[0].Parts
				data, _ := parts[0].Content.(a2a.Data).Value.(map[string]any)
				url, _ := parts[1].Content.(a2a.URL)
				if data["digest"] == "" || data["slots"].([]any)[0] != "change" || !strings.HasSuffix(string(url), base+"/claims/C/artifacts/A") {
					t.Fatalf("witness parts: %v %q", data, url)
				}
				// The URL serves the witness's bytes, verified.
				if got := f.want(200, "GET", strings.TrimPrefix(string(url), f.ts.URL), "maintainer", ""); got != "diff --git a b" {
					t.Fatalf("witness bytes: %q", got)
				}
			case c.claim.Terminal():
				if task.Status.Message == nil || task.Status.Message.Parts[0].Text() == "" {
					t.Fatalf("a terminal task carries the reason: %+v", task.Status)
				}
			default:
				// An open task says what it waits on, in claim show's words.
				var why []claim.Reason
				b, _ := json.Marshal(rec["why"])
				if err := json.Unmarshal(b, &why); err != nil || len(why) == 0 {
					t.Fatalf("open claim without why: %v", rec["why"])
				}
				if task.Status.Message == nil || task.Status.Message.Parts[0].Text() != claim.WhyText(why) || len(task.Artifacts) != 0 {
					t.Fatalf("open task: %+v", task)
				}
			}
		})
	}
}

func TestA2AClaimCreateOverJSONRPCAndREST(t *testing.T) {
	f := newClaimFixture(t)
	code, r, echo := f.rpc("maintainer", claimExt+", urn:unknown:ext", "SendMessage", claimSendParams("m-1", claimTerms("C17")))
	if code != 200 || echo != claimExt {
		t.Fatalf("send: %d echo %q %s", code, echo, r.raw)
	}
	task := r.task(t)
	rec := recordOf(t, task, claimExt)
	if task.ID != "C17" || task.ContextID != "acme/main" || task.Status.State != a2a.TaskStateSubmitted ||
		rec["claimant"] != "maintainer" || rec["respondent"] != "parser" || rec["state"] != "Generated" {
		t.Fatalf("task: %+v", task)
	}
	if recs, _ := task.Metadata[claimExt+"/records"].([]any); len(recs) != 1 || recs[0].(map[string]any)["type"] != "claim.create" {
		t.Fatalf("records: %v", task.Metadata)
	}
	if !strings.Contains(string(f.logBytes()), `"type":"claim.create","claim":"C17","claimant":"maintainer"`) {
		t.Fatalf("log: %s", f.logBytes())
	}

	// HTTP+JSON, with the claim taken from the message's taskId.
	s := claimTerms("C18")
	delete(s.rec, "claim")
	p := claimSendParams("m-2", s)
	p["message"].(map[string]any)["taskId"] = "C18"
	body, _ := json.Marshal(p)
	code, out, h := f.do("POST", a2aBase+"/rest/message:send", "maintainer", string(body), "A2A-Extensions", claimExt)
	if code != 200 || h.Get("A2A-Extensions") != claimExt || !strings.Contains(out, `"id":"C18"`) || !strings.Contains(out, "TASK_STATE_SUBMITTED") {
		t.Fatalf("rest send: %d %v %s", code, h, out)
	}
	// The verbs go on in the task: post with no claim member.
	p = claimSendParams("m-3", step("maintainer", "post"))
	p["message"].(map[string]any)["taskId"] = "C18"
	if _, r, _ := f.rpc("maintainer", claimExt, "SendMessage", p); r.Error != nil || recordOf(t, r.task(t), claimExt)["state"] != "Posted" {
		t.Fatalf("post in the task: %s", r.raw)
	}
	code, out, _ = f.do("GET", a2aBase+"/rest/tasks/C18", "parser", "", "A2A-Extensions", claimExt)
	if code != 200 || !strings.Contains(out, `"`+claimExt+`":{"claim":"C18"`) || !strings.Contains(out, `"state":"Posted"`) {
		t.Fatalf("rest get: %d %s", code, out)
	}
}

func TestA2AClaimRefusals(t *testing.T) {
	f := newClaimFixture(t)
	f.send(t, claimTerms("C17"))
	cases := []struct {
		name, who, exts string
		step            claimStep
		task            string // the message's taskId
		code            int
		want            string
	}{
		{"not activated", "maintainer", "", claimTerms("C1"), "", -32008, "A2A-Extensions"},
		{"bad action", "maintainer", claimExt, step("maintainer", "finish", "claim", "C17"), "", -32602, ".action: must be one of create, post"},
		{"member of another action", "maintainer", claimExt, step("maintainer", "post", "claim", "C17", "successor", "C2"), "", -32602, ".successor: is not a member of a post record"},
		{"wrong type", "maintainer", claimExt, claimTerms("C1", "max_responses", "four"), "", -32602, "max_responses"},
		{"bad deadline", "maintainer", claimExt, claimTerms("C1", "deadline", "soon"), "", -32602, ".deadline:"},
		{"no claim id", "maintainer", claimExt, step("maintainer", "post"), "", -32602, ".claim: names the claim"},
		{"claim and task disagree", "maintainer", claimExt, step("maintainer", "post", "claim", "C17"), "C9", -32602, `names "C17" but message.taskId names "C9"`},
		{"core rule", "maintainer", claimExt, claimTerms("C1", "max_responses", 999), "", -32602, "max_responses:"},
		{"duplicate claim", "maintainer", claimExt, claimTerms("C17"), "", -32602, "already exists"},
		{"not the claimant", "parser", claimExt, step("parser", "post", "claim", "C17"), "", -31403, "actor: only the claimant maintainer"},
		{"not the respondent", "observer", claimExt, step("observer", "receipt.acquire", "claim", "C17"), "", -31403, "actor:"},
		{"unknown claim", "maintainer", claimExt, step("maintainer", "post", "claim", "nope"), "", -32001, "claim:"},
		{"publish without bytes", "parser", claimExt, step("parser", "artifact.publish", "claim", "C17", "artifact", "A", "generation", 1, "slot", "change"), "", -32602, "message.parts"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := f.logBytes()
			p := claimSendParams(fmt.Sprintf("r-%d", i), c.step)
			if c.task != "" {
				p["message"].(map[string]any)["taskId"] = c.task
			}
			_, r, _ := f.rpc(c.who, c.exts, "SendMessage", p)
			if r.Error == nil || r.Error.Code != c.code || !strings.Contains(r.Error.Message, c.want) {
				t.Fatalf("want %d %q: %s", c.code, c.want, r.raw)
			}
			if after := f.logBytes(); len(after) != len(before) {
				t.Fatalf("a refused message appended %d bytes", len(after)-len(before))
			}
		})
	}
}

func TestA2AClaimListTasks(t *testing.T) {
	f := newClaimFixture(t)
	if _, r, _ := f.rpc("reviewer", "urn:tally:ext:promise", "SendMessage", sendParams("p-1", "urn:tally:ext:promise",
		map[string]any{"id": "p1", "promise": "x", "to": "author", "until": "2h"})); r.Error != nil {
		t.Fatal(r.raw)
	}
	f.send(t, toVerdict("C17", "pass")...)
	f.send(t, claimTerms("C18"))
	list := func(params map[string]any) a2a.ListTasksResponse {
		t.Helper()
		_, r, _ := f.rpc("observer", claimExt, "ListTasks", params)
		var l a2a.ListTasksResponse
		if err := json.Unmarshal(r.Result, &l); err != nil {
			t.Fatalf("%v: %s", err, r.raw)
		}
		return l
	}
	all := list(map[string]any{})
	if all.TotalSize != 3 || len(all.Tasks) != 3 || all.Tasks[0].ID != "p1" || all.Tasks[1].ID != "C17" || all.Tasks[2].ID != "C18" || len(all.Tasks[1].Artifacts) != 0 {
		t.Fatalf("list: %+v", all)
	}
	if rec := recordOf(t, all.Tasks[2], claimExt); rec["claim"] != "C18" {
		t.Fatalf("claim record: %v", rec)
	}
	done := list(map[string]any{"status": "TASK_STATE_COMPLETED", "includeArtifacts": true})
	if len(done.Tasks) != 1 || done.Tasks[0].ID != "C17" || len(done.Tasks[0].Artifacts) != 2 {
		t.Fatalf("completed: %+v", done)
	}
	page := list(map[string]any{"pageSize": 2, "pageToken": "1"})
	if len(page.Tasks) != 2 || page.Tasks[0].ID != "C17" || page.NextPageToken != "" {
		t.Fatalf("page across families: %+v", page)
	}
}

func TestA2AClaimCancelTask(t *testing.T) {
	f := newClaimFixture(t)
	f.send(t, toReceived("C17")...)
	f.send(t, toVerdict("C18", "pass")...)
	cases := []struct {
		name, who string
		params    map[string]any
		code      int
		want      string
	}{
		{"another participant", "parser", map[string]any{"id": "C17", "metadata": map[string]any{"reason": "mine now"}}, -31403, "only the claimant maintainer"},
		{"no reason", "maintainer", map[string]any{"id": "C17"}, -32602, "metadata.reason"},
		{"already ended", "maintainer", map[string]any{"id": "C18", "metadata": map[string]any{"reason": "x"}}, -32002, "terminal states absorb"},
		{"unknown", "maintainer", map[string]any{"id": "nope", "metadata": map[string]any{"reason": "x"}}, -32001, "no task nope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := f.logBytes()
			_, r, _ := f.rpc(c.who, claimExt, "CancelTask", c.params)
			if r.Error == nil || r.Error.Code != c.code || !strings.Contains(r.Error.Message, c.want) {
				t.Fatalf("want %d %q: %s", c.code, c.want, r.raw)
			}
			if len(f.logBytes()) != len(before) {
				t.Fatal("a refused cancel appended")
			}
		})
	}
	// The claimant cancels, with the reason in a record under the claim URI.
	_, r, echo := f.rpc("maintainer", claimExt, "CancelTask", map[string]any{"id": "C17", "metadata": map[string]any{claimExt: map[string]any{"reason": "no longer needed"}}})
	task := r.task(t)
	if echo != claimExt || task.Status.State != a2a.TaskStateCanceled || task.Status.Message.Parts[0].Text() != "no longer needed" || recordOf(t, task, claimExt)["state"] != "Cancelled" {
		t.Fatalf("cancel: %s", r.raw)
	}
	// Over HTTP+JSON.
	f.send(t, claimTerms("C19"))
	code, out, _ := f.do("POST", a2aBase+"/rest/tasks/C19:cancel", "maintainer", `{"metadata":{"reason":"dropped"}}`)
	if code != 200 || !strings.Contains(out, "TASK_STATE_CANCELED") || !strings.Contains(out, `"state":"Cancelled"`) {
		t.Fatalf("rest cancel: %d %s", code, out)
	}
}

func TestA2AClaimRetryIsIdempotent(t *testing.T) {
	f := newClaimFixture(t)
	f.send(t, claimTerms("C17"), step("maintainer", "post", "claim", "C17"))
	params := claimSendParams("retry-1", step("parser", "receipt.acquire", "claim", "C17"))
	_, r1, _ := f.rpc("parser", claimExt, "SendMessage", params)
	after := f.logBytes()
	_, r2, _ := f.rpc("parser", claimExt, "SendMessage", params)
	if r1.Error != nil || string(r1.Result) != string(r2.Result) || recordOf(t, r1.task(t), claimExt)["state"] != "Received" {
		t.Fatalf("retry differs:\n%s\n%s", r1.raw, r2.raw)
	}
	if string(f.logBytes()) != string(after) {
		t.Fatal("the retry appended")
	}
	// A retry over HTTP+JSON replays the same task.
	body, _ := json.Marshal(params)
	code, out, _ := f.do("POST", a2aBase+"/rest/message:send", "parser", string(body), "A2A-Extensions", claimExt)
	if code != 200 || !strings.Contains(out, `"id":"C17"`) || string(f.logBytes()) != string(after) {
		t.Fatalf("rest retry: %d %s", code, out)
	}
	// The same message id with another record is a conflict, not a write.
	_, r3, _ := f.rpc("parser", claimExt, "SendMessage", claimSendParams("retry-1", step("parser", "receipt.acquire", "claim", "C17", "decline", true, "reason", "no")))
	if r3.Error == nil || !strings.Contains(r3.raw, "IdempotencyConflict") || string(f.logBytes()) != string(after) {
		t.Fatalf("conflict: %s", r3.raw)
	}
	// So is the same record under another action.
	_, r4, _ := f.rpc("maintainer", claimExt, "SendMessage", claimSendParams("retry-2", step("maintainer", "cancel", "claim", "C17", "reason", "x")))
	_, r5, _ := f.rpc("maintainer", claimExt, "SendMessage", claimSendParams("retry-2", step("maintainer", "revoke", "claim", "C17", "reason", "x")))
	if r4.Error != nil || r5.Error == nil || !strings.Contains(r5.raw, "IdempotencyConflict") {
		t.Fatalf("action in the digest: %s / %s", r4.raw, r5.raw)
	}
}

// A check begins, or a verdict is recorded, only on a target whose bytes
// the server holds intact, as over the HTTP JSON API.
func TestA2AClaimCheckVerifiesTarget(t *testing.T) {
	f := newClaimFixture(t)
	task := f.send(t, toDelivered("C17", "complete")...)
	content, _ := recordOf(t, task, claimExt)["artifacts"].([]any)[0].(map[string]any)["content"].(string)
	cd, err := digest.ParseContentDigest(content)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := f.srv.objects()
	if err != nil {
		t.Fatal(err)
	}
	begin := step("maintainer", "check.begin", "claim", "C17", "check", "behavior", "artifact", "A")
	for _, c := range []struct {
		name  string
		spoil func() error
		code  int
		want  string
	}{
		{"damaged", func() error { return os.WriteFile(objs.Path(cd), []byte("diff --git a B"), 0o644) }, -32603, "artifact: the stored copy of artifact A is damaged"},
		{"missing", func() error { return os.Remove(objs.Path(cd)) }, -32001, "artifact: the bytes of artifact A are not in the content store"},
	} {
		if err := c.spoil(); err != nil {
			t.Fatal(err)
		}
		before := f.logBytes()
		_, r, _ := f.rpc("maintainer", claimExt, "SendMessage", claimSendParams("begin-"+c.name, begin))
		if r.Error == nil || r.Error.Code != c.code || !strings.Contains(r.Error.Message, c.want) {
			t.Fatalf("%s: want %d %q: %s", c.name, c.code, c.want, r.raw)
		}
		if len(f.logBytes()) != len(before) {
			t.Fatalf("%s: a refused begin appended", c.name)
		}
	}
}

// A verdict may carry its evidence as the message's file part: the evidence
// is published in the verdict's own write, and a verdict the ledger refuses
// leaves none.
func TestA2AClaimVerdictCarriesItsEvidence(t *testing.T) {
	f := newClaimFixture(t)
	f.send(t, toDelivered("C30", "complete")...)
	before := f.logBytes()
	wrong := step("maintainer", "check.report", "claim", "C30", "check", "behavior", "artifact", "A", "digest", strings.Repeat("0", 64),
		"result", "pass").withFile("4 of 4 cases")
	if _, r, _ := f.rpc("maintainer", claimExt, "SendMessage", claimSendParams("v-1", wrong)); r.Error == nil {
		t.Fatalf("a verdict on a wrong digest: %s", r.raw)
	}
	if after := f.logBytes(); len(after) != len(before) {
		t.Fatalf("a refused verdict appended %d bytes", len(after)-len(before))
	}
	task := f.send(t, step("maintainer", "check.report", "claim", "C30", "check", "behavior", "artifact", "A", "result", "pass", "evidence", "E1").withFile("4 of 4 cases"))
	recs, _ := task.Metadata[claimExt+"/records"].([]any)
	if len(recs) != 3 {
		t.Fatalf("records: %v", recs)
	}
	pub, verdict := recs[0].(map[string]any), recs[2].(map[string]any)
	if pub["type"] != "claim.artifact" || pub["artifact"] != "E1" || pub["role"] != "result" || pub["name"] != "fix.patch" ||
		verdict["type"] != "claim.check.verdict" || verdict["evidence"] != "E1" || verdict["evidence_digest"] != pub["digest"] {
		t.Fatalf("records: %v", recs)
	}
	if task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("state %s", task.Status.State)
	}
}

// A timekeeper-role token commits a passed deadline over A2A; anyone else
// is refused, appending nothing.
func TestA2AClaimDeadlineByTheTimekeeper(t *testing.T) {
	f := newClaimFixture(t)
	f.token("keeper", auth.RoleTimekeeper)
	f.send(t, claimTerms("C40", "deadline", past))
	before := f.logBytes()
	if _, r, _ := f.rpc("maintainer", claimExt, "SendMessage", claimSendParams("d-1", step("maintainer", "deadline.commit", "claim", "C40"))); r.Error == nil || r.Error.Code != -31403 {
		t.Fatalf("the claimant committed a deadline: %s", r.raw)
	}
	if after := f.logBytes(); len(after) != len(before) {
		t.Fatal("a refused deadline appended to the log")
	}
	task := f.send(t, step("keeper", "deadline.commit", "claim", "C40"))
	if task.Status.State != a2a.TaskStateFailed {
		t.Fatalf("state %s", task.Status.State)
	}
}

// A successor created over A2A without slots inherits its predecessor's, as
// over HTTP and on the CLI, and its task says so; one with none to inherit
// is refused and appends nothing.
func TestA2AClaimSuccessorInherits(t *testing.T) {
	f := newClaimFixture(t)
	f.send(t, claimTerms("C17"))
	task := f.send(t, step("maintainer", "create", "claim", "C18", "respondent", "parser", "work", "again", "predecessor", "C17"))
	notes, _ := task.Metadata[claimExt+"/notes"].([]any)
	if len(notes) != 1 || notes[0] != "C18 inherits the slots and checks of its predecessor C17: change (behavior)" {
		t.Fatalf("notes: %v", task.Metadata)
	}
	if slots := recordOf(t, task, claimExt)["slots"].([]any); len(slots) != 1 {
		t.Fatalf("slots: %v", slots)
	}
	f.send(t, step("maintainer", "create", "claim", "C19", "respondent", "parser", "work", "w", "slots", []any{}, "no_checks", true))
	before := f.logBytes()
	_, r, _ := f.rpc("maintainer", claimExt, "SendMessage", claimSendParams("m-x", step("maintainer", "create", "claim", "C20", "respondent", "parser", "work", "w", "predecessor", "C19")))
	if r.Error == nil || !strings.Contains(string(r.raw), "no_checks") || !bytes.Equal(before, f.logBytes()) {
		t.Fatalf("a successor with nothing to require: %s", r.raw)
	}
}
