package a2atask

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/claim"
	"tally/expect"
	"tally/promise"
)

var t0 = time.Date(2026, 9, 1, 17, 0, 0, 0, time.UTC)

// wire is v as it goes on the wire.
func wire(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// owed is a promise view owed since t0; edit adjusts it.
func owed(edit func(*promise.View)) *promise.View {
	v := &promise.View{ID: "p1", Promise: "review", By: "reviewer", To: "author", State: promise.Owed,
		Declared: t0, Until: t0.Add(time.Hour), Horizons: []time.Time{t0.Add(time.Hour)}}
	if edit != nil {
		edit(v)
	}
	return v
}

// A promise's task: its state, since when, the status message and the
// evidence artifact, exactly as they go on the wire (the record itself is
// in TestRecordUnderEachKey).
func TestPromiseTaskWire(t *testing.T) {
	resolved := func(s promise.Status, reason string, evidence ...string) func(*promise.View) {
		return func(v *promise.View) {
			v.State, v.Reason, v.Evidence, v.ResolvedAt = s, reason, evidence, t0.Add(time.Minute)
		}
	}
	for _, c := range []struct {
		name string
		v    *promise.View
		want string
	}{
		{"owed", owed(nil),
			`{"id":"p1","contextId":"acme/main","status":{"state":"TASK_STATE_WORKING","timestamp":"2026-09-01T17:00:00Z"}}`},
		{"overdue is still working", owed(func(v *promise.View) { v.Overdue = true }),
			`{"id":"p1","contextId":"acme/main","status":{"state":"TASK_STATE_WORKING","timestamp":"2026-09-01T17:00:00Z"}}`},
		{"conditional", owed(func(v *promise.View) { v.State, v.On = promise.Conditional, "p0" }),
			`{"id":"p1","contextId":"acme/main","status":{"state":"TASK_STATE_SUBMITTED","timestamp":"2026-09-01T17:00:00Z"}}`},
		{"satisfied", owed(resolved(promise.Satisfied, "", "https://example.org/r/1", "commit 3f5c732")),
			`{"id":"p1","artifacts":[{"artifactId":"evidence-p1","description":"the evidence references the debtor resolved p1 with","name":"evidence",` +
				`"parts":[{"text":"https://example.org/r/1"},{"text":"commit 3f5c732"}]}],"contextId":"acme/main","status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-09-01T17:01:00Z"}}`},
		{"cancelled", owed(resolved(promise.Cancelled, "the schema was withdrawn")),
			`{"id":"p1","contextId":"acme/main","status":{"message":{"messageId":"tally-status-p1-cancelled","contextId":"acme/main","parts":[{"text":"the schema was withdrawn"}],` +
				`"role":"ROLE_AGENT","taskId":"p1"},"state":"TASK_STATE_REJECTED","timestamp":"2026-09-01T17:01:00Z"}}`},
		{"released with a reason", owed(resolved(promise.Released, "not needed")),
			`{"id":"p1","contextId":"acme/main","status":{"message":{"messageId":"tally-status-p1-released","contextId":"acme/main","parts":[{"text":"not needed"}],` +
				`"role":"ROLE_AGENT","taskId":"p1"},"state":"TASK_STATE_CANCELED","timestamp":"2026-09-01T17:01:00Z"}}`},
		{"released without one", owed(resolved(promise.Released, "")),
			`{"id":"p1","contextId":"acme/main","status":{"state":"TASK_STATE_CANCELED","timestamp":"2026-09-01T17:01:00Z"}}`},
		{"expired", owed(func(v *promise.View) { v.State, v.On = promise.Expired, "p0" }),
			`{"id":"p1","contextId":"acme/main","status":{"message":{"messageId":"tally-status-p1-expired","contextId":"acme/main","parts":[{"text":"antecedent p0 can no longer be satisfied"}],` +
				`"role":"ROLE_AGENT","taskId":"p1"},"state":"TASK_STATE_CANCELED","timestamp":"2026-09-01T17:00:00Z"}}`},
		{"the task field is the task id", owed(func(v *promise.View) { v.Task = "task-9" }),
			`{"id":"task-9","contextId":"acme/main","status":{"state":"TASK_STATE_WORKING","timestamp":"2026-09-01T17:00:00Z"}}`},
	} {
		if got := wire(t, PromiseTask(c.v, "acme/main", nil)); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// Every promise status maps; assessments never change it.
func TestPromiseStateTable(t *testing.T) {
	want := map[promise.Status]a2a.TaskState{
		promise.Owed: a2a.TaskStateWorking, promise.Conditional: a2a.TaskStateSubmitted, promise.Satisfied: a2a.TaskStateCompleted,
		promise.Cancelled: a2a.TaskStateRejected, promise.Released: a2a.TaskStateCanceled, promise.Expired: a2a.TaskStateCanceled,
	}
	for s, state := range want {
		if got := PromiseState(s); got != state {
			t.Errorf("%s → %s, want %s", s, got, state)
		}
	}
}

// Every claim state maps, and only the named ones leave FAILED.
func TestClaimStateTable(t *testing.T) {
	want := map[claim.Status]a2a.TaskState{
		claim.Generated: a2a.TaskStateSubmitted, claim.Posted: a2a.TaskStateSubmitted,
		claim.Received: a2a.TaskStateWorking, claim.Progressed: a2a.TaskStateWorking, claim.TestamentGenerated: a2a.TaskStateWorking,
		claim.TestamentAcknowledged: a2a.TaskStateWorking, claim.Validating: a2a.TaskStateWorking,
		claim.Satisfied:     a2a.TaskStateCompleted,
		claim.ReceiptFailed: a2a.TaskStateRejected,
		claim.Cancelled:     a2a.TaskStateCanceled, claim.Revoked: a2a.TaskStateCanceled, claim.Superseded: a2a.TaskStateCanceled,
		claim.PostFailed: a2a.TaskStateFailed, claim.TestamentGenerationFailed: a2a.TaskStateFailed, claim.ValidationIncomplete: a2a.TaskStateFailed,
		claim.ValidationFailed: a2a.TaskStateFailed, claim.ValidationErrored: a2a.TaskStateFailed, claim.Expired: a2a.TaskStateFailed,
		claim.DependencyFailed: a2a.TaskStateFailed, claim.Deadlocked: a2a.TaskStateFailed,
	}
	for s, state := range want {
		if got := ClaimState(&claim.View{State: s}); got != state {
			t.Errorf("%s → %s, want %s", s, got, state)
		}
	}
	refused := &claim.View{State: claim.ValidationIncomplete, Terminal: &claim.Terminal{State: claim.ValidationIncomplete, Testament: "T1"},
		Testaments: []claim.TestamentView{{Testament: "T1", Outcome: string(claim.Refused)}}}
	if got := ClaimState(refused); got != a2a.TaskStateRejected {
		t.Errorf("a refused response → %s, want REJECTED", got)
	}
	partial := &claim.View{State: claim.ValidationIncomplete, Terminal: &claim.Terminal{State: claim.ValidationIncomplete, Testament: "T1"},
		Testaments: []claim.TestamentView{{Testament: "T0", Outcome: string(claim.Refused)}, {Testament: "T1", Outcome: "partial"}}}
	if got := ClaimState(partial); got != a2a.TaskStateFailed {
		t.Errorf("a partial response after a refused one → %s, want FAILED", got)
	}
}

// satisfiedClaim is a satisfied claim whose one artifact witnesses two
// slots, with the testament the claimant received.
func satisfiedClaim() *claim.View {
	w := &claim.WitnessView{Artifact: "A/1", Digest: "blake3:aa", Testament: "T1"}
	conf := 0.9
	return &claim.View{Claim: "C 1", State: claim.Satisfied, Created: "2026-09-01T17:00:00Z",
		Terminal:   &claim.Terminal{State: claim.Satisfied, TS: "2026-09-02T17:00:00.5Z", Reason: "every required check passed"},
		Slots:      []claim.SlotView{{Name: "change", Witness: w}, {Name: "docs", Witness: w}},
		Artifacts:  []claim.ArtifactView{{Artifact: "A/1", Content: "blake3:cc", Size: 14, Kind: "diff", Role: "result", Name: "change.diff"}},
		Delivery:   claim.DeliveryView{Testament: "T1"},
		Testaments: []claim.TestamentView{{Testament: "T0", Outcome: "partial"}, {Testament: "T1", Outcome: "complete", Summary: "done", Confidence: &conf}}}
}

// A claim's task: an open one says what it waits on, a terminal one the
// ledger's reason, a satisfied one lists its witnesses (with the URL of
// their bytes when there is a server) and the received testament.
func TestClaimTaskWire(t *testing.T) {
	const sess = "https://t.example/v1/tenants/acme/sessions/main"
	posted := &claim.View{Claim: "C", State: claim.Posted, Created: "2026-09-01T17:00:00Z",
		Why: []claim.Reason{{Text: "waits on a receipt"}, {Text: "waits on a testament"}}}
	expired := &claim.View{Claim: "C", State: claim.Expired, Created: "2026-09-01T17:00:00Z",
		Terminal: &claim.Terminal{State: claim.Expired, TS: "2026-09-02T17:00:00Z", Reason: "the deadline passed"}}
	witness := `{"artifactId":"A/1","description":"the witness of slot change, docs: every Required check passed on this artifact id and digest","name":"change.diff",` +
		`"parts":[{"data":{"artifact":"A/1","claim":"C 1","content":"blake3:cc","digest":"blake3:aa","kind":"diff","role":"result","size":14,"slots":["change","docs"],"testament":"T1"}}`
	testament := `{"artifactId":"testament/T1","description":"the closing testament the claimant received","name":"testament T1",` +
		`"parts":[{"data":{"bindings":null,"claim":"C 1","confidence":0.9,"outcome":"complete","summary":"done","testament":"T1"}}]}`
	satisfied := `"contextId":"acme/main","status":{"message":{"messageId":"tally-status-C 1-Satisfied","contextId":"acme/main","parts":[{"text":"every required check passed"}],` +
		`"role":"ROLE_AGENT","taskId":"C 1"},"state":"TASK_STATE_COMPLETED","timestamp":"2026-09-02T17:00:00.5Z"}}`
	for _, c := range []struct {
		name       string
		v          *claim.View
		sessionURL string
		want       string
	}{
		{"open: what it waits on", posted, sess,
			`{"id":"C","contextId":"acme/main","status":{"message":{"messageId":"tally-status-C-Posted","contextId":"acme/main","parts":[{"text":"waits on a receipt\nwaits on a testament"}],` +
				`"role":"ROLE_AGENT","taskId":"C"},"state":"TASK_STATE_SUBMITTED","timestamp":"2026-09-01T17:00:00Z"}}`},
		{"open without a why", &claim.View{Claim: "C", State: claim.Received, Created: "2026-09-01T17:00:00Z"}, sess,
			`{"id":"C","contextId":"acme/main","status":{"state":"TASK_STATE_WORKING","timestamp":"2026-09-01T17:00:00Z"}}`},
		{"terminal: the reason, since it ended", expired, sess,
			`{"id":"C","contextId":"acme/main","status":{"message":{"messageId":"tally-status-C-Expired","contextId":"acme/main","parts":[{"text":"the deadline passed"}],` +
				`"role":"ROLE_AGENT","taskId":"C"},"state":"TASK_STATE_FAILED","timestamp":"2026-09-02T17:00:00Z"}}`},
		{"satisfied, served", satisfiedClaim(), sess,
			`{"id":"C 1","artifacts":[` + witness + `,{"url":"` + sess + `/claims/C%201/artifacts/A%2F1","filename":"change.diff","mediaType":"application/octet-stream"}]},` +
				testament + `],` + satisfied},
		{"satisfied, offline: no URL", satisfiedClaim(), "",
			`{"id":"C 1","artifacts":[` + witness + `]},` + testament + `],` + satisfied},
	} {
		if got := wire(t, ClaimTask(c.v, "acme/main", nil, c.sessionURL)); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// A task carries its record byte for byte under each key, and what a
// write adds beside it under "<key>/warnings", "<key>/records" and
// "<key>/notes".
func TestRecordUnderEachKey(t *testing.T) {
	keys := []string{"urn:tally:ext:promise", "https://github.com/azigler/pinki/ext/promise/v0/promise"}
	v := owed(nil)
	task := PromiseTask(v, "acme/main", keys)
	WithWarnings(task, keys[:1], nil)
	for _, k := range keys {
		if got, _ := task.Metadata[k].(json.RawMessage); string(got) != string(v.AppendJSON(nil)) {
			t.Errorf("%s: %s, want the view's record", k, got)
		}
	}
	if len(task.Metadata) != 2 {
		t.Errorf("no warnings added nothing: %v", task.Metadata)
	}
	WithWarnings(task, keys[:1], []string{"until is in the past"})
	WithRecords(task, keys[1:], []json.RawMessage{json.RawMessage(`{"seq":1}`)}, nil)
	got := wire(t, map[string]any{"w": task.Metadata[keys[0]+"/warnings"], "r": task.Metadata[keys[1]+"/records"], "n": task.Metadata[keys[1]+"/notes"]})
	if want := `{"n":null,"r":[{"seq":1}],"w":["until is in the past"]}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	WithRecords(task, keys[1:], nil, []string{"inherited slots"})
	if got := wire(t, task.Metadata[keys[1]+"/notes"]); got != `["inherited slots"]` {
		t.Errorf("notes %s", got)
	}
}

// FindPromise: the first promise declared with that task field, else the
// promise with that id.
func TestFindPromise(t *testing.T) {
	ps := promise.NewState()
	for i, d := range []struct{ id, task string }{{"p1", ""}, {"p2", "p1"}, {"p3", "t"}, {"p4", "t"}} {
		ev, _, err := ps.Decide(promise.DefaultLimits(), "reviewer", t0, promise.Declare{ID: d.id, Task: d.task, Text: "x", By: "reviewer", To: "author", Until: t0.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		ps.Apply(promise.Meta{Seq: uint64(i + 1)}, &ev)
	}
	for task, want := range map[string]string{"p1": "p2", "t": "p3", "p3": "p3", "p4": "p4", "nope": ""} {
		got := ""
		if p, ok := FindPromise(ps.Select(promise.Filter{State: "all"}, t0), task); ok {
			got = p.ID
		}
		if got != want {
			t.Errorf("task %s: %q, want %q", task, got, want)
		}
	}
}

// An origin task: WORKING until its outcome is recorded, in the context
// its expectations name, with them (and the outcome) in metadata.
func TestOriginTaskWire(t *testing.T) {
	for out, state := range map[expect.Outcome]a2a.TaskState{"": a2a.TaskStateWorking, expect.OutcomeCompleted: a2a.TaskStateCompleted,
		expect.OutcomeCancelled: a2a.TaskStateCanceled, expect.OutcomeFailed: a2a.TaskStateFailed} {
		if got := OriginState(out); got != state {
			t.Errorf("outcome %q → %s, want %s", out, got, state)
		}
	}
	es := expect.NewState(expect.DefaultConfig())
	if IsOrigin(es, "task-7") {
		t.Fatal("an origin in an empty state")
	}
	seq := uint64(0)
	do := func(cmd expect.Command) {
		t.Helper()
		evs, err := es.Decide("agent", false, t0, cmd)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			seq++
			es.Apply(expect.Meta{Seq: seq, Actor: "agent", TS: t0}, e)
		}
	}
	do(expect.RaiseCommand{Raise: expect.Raise{ExpectationID: "exp-1", Kind: "doc.review", Subject: expect.Subject{Type: "doc", ID: "d1"},
		FactKey: "doc.reviewed:d1", DueAt: t0.Add(time.Hour), Basis: expect.BasisDeclared, Origin: expect.Origin{TaskID: "task-7", ContextID: "ctx-3"}}})
	if !IsOrigin(es, "task-7") || IsOrigin(es, "task-8") {
		t.Fatal("IsOrigin")
	}
	task := OriginTask(es, "task-7", "acme/main", []string{"k"})
	if got := wire(t, a2a.Task{ID: task.ID, ContextID: task.ContextID, Status: task.Status}); got != `{"id":"task-7","contextId":"ctx-3","status":{"state":"TASK_STATE_WORKING"}}` {
		t.Errorf("open origin: %s", got)
	}
	var rec struct {
		TaskID       string            `json:"taskId"`
		Outcome      *string           `json:"outcome"`
		Expectations []json.RawMessage `json:"expectations"`
	}
	if err := json.Unmarshal(task.Metadata["k"].(json.RawMessage), &rec); err != nil || rec.TaskID != "task-7" || rec.Outcome != nil || len(rec.Expectations) != 1 {
		t.Errorf("open origin's record: %s (%v)", task.Metadata["k"], err)
	}
	do(expect.TaskOutcomeCommand{TaskID: "task-7", Outcome: expect.OutcomeCancelled})
	task = OriginTask(es, "task-7", "acme/main", []string{"k"})
	rec.Outcome = nil
	if err := json.Unmarshal(task.Metadata["k"].(json.RawMessage), &rec); err != nil || task.Status.State != a2a.TaskStateCanceled || rec.Outcome == nil || *rec.Outcome != "cancelled" {
		t.Errorf("cancelled origin: %s %s (%v)", task.Status.State, task.Metadata["k"], err)
	}
}

// IsOrigin reports whether task is the origin of expectations in es (or
// has a recorded outcome there).
func IsOrigin(es *expect.State, task string) bool {
	if _, ok := es.TaskOutcome(task); ok {
		return true
	}
	return len(es.List(expect.Filter{TaskID: task})) > 0
}

// OriginTask is the task of an origin of expectations in es: OriginTaskOf
// its expectations and its recorded outcome.
func OriginTask(es *expect.State, task, contextID string, keys []string) *a2a.Task {
	out, ended := es.TaskOutcome(task)
	return OriginTaskOf(task, es.List(expect.Filter{TaskID: task}), out, ended, contextID, keys)
}
