package a2atask

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/expect"
)

// errText is err's message, "" for none.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The keys a family's record rides under: one per activated URI of the
// family (pinki's in its own form), else tally's own URI.
func TestKeys(t *testing.T) {
	own := URIs{Claim: "urn:acme:claim"}
	for _, c := range []struct {
		active []string
		f      Family
		want   string
	}{
		{nil, FamilyPromise, PromiseURI},
		{nil, FamilyClaim, "urn:acme:claim"},
		{[]string{ClaimURI}, FamilyClaim, "urn:acme:claim"}, // not this server's claim URI
		{[]string{PinkiPromiseURI}, FamilyPromise, PinkiPromiseURI + "/promise"},
		{[]string{PromiseURI, PinkiPromiseURI}, FamilyPromise, PromiseURI + " " + PinkiPromiseURI + "/promise"},
		{[]string{ExpectationsDraftURI, "urn:acme:claim"}, FamilyExpect, ExpectationsDraftURI},
	} {
		if got := strings.Join(own.Keys(c.active, c.f), " "); got != c.want {
			t.Errorf("%v %s: %s, want %s", c.active, c.f, got, c.want)
		}
	}
	if f, ok := own.FamilyOf(ClaimURI); ok {
		t.Errorf("a URI the server does not use is %s", f)
	}
	if got := RecordKeys(PinkiPromiseURI, FamilyPromise); len(got) != 2 || got[1] != PinkiPromiseURI+"/promise" {
		t.Errorf("RecordKeys: %v", got)
	}
}

// FindRecord finds the one record, under a URI or pinki's key form; none
// or two are refused by name.
func TestFindRecord(t *testing.T) {
	var u URIs
	rec := map[string]any{"id": "p1"}
	for _, c := range []struct {
		name string
		meta map[string]any
		want string // uri key, or the refusal
	}{
		{"tally's", map[string]any{PromiseURI: rec, "other": 1}, PromiseURI + " " + PromiseURI},
		{"pinki's", map[string]any{PinkiPromiseURI + "/promise": rec}, PinkiPromiseURI + " " + PinkiPromiseURI + "/promise"},
		{"the draft's", map[string]any{ExpectationsDraftURI: rec}, ExpectationsDraftURI + " " + ExpectationsDraftURI},
		{"two", map[string]any{PromiseURI: rec, ClaimURI: rec},
			`message.metadata: carries two tally records ("urn:tally:ext:promise" and "urn:tally:ext:claim"); send one per message`},
		{"none", map[string]any{"urn:other": rec},
			`message.metadata: carries no tally record: put one under metadata["urn:tally:ext:promise"] (or another extension URI of the agent card) and activate that URI in the A2A-Extensions header`},
	} {
		uri, key, raw, err := u.FindRecord(c.meta)
		got := errText(err)
		if err == nil {
			got = uri + " " + key
			if raw == nil {
				t.Errorf("%s: no record", c.name)
			}
		}
		if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// ReadRecord: the action named (or the default), every member one the
// action takes; the refusal names the member and lists what is allowed.
func TestReadRecord(t *testing.T) {
	const key = "urn:tally:ext:promise"
	for _, c := range []struct {
		raw  any
		want string // the action, or the refusal
	}{
		{map[string]any{"id": "p1", "promise": "x"}, "declare"},
		{map[string]any{"action": "resolve", "as": "satisfied"}, "resolve"},
		{"p1", `metadata["urn:tally:ext:promise"]: must be a JSON object (a promise record)`},
		{map[string]any{"action": "close"}, `metadata["urn:tally:ext:promise"].action: must be one of declare, amend, resolve, assess`},
		{map[string]any{"action": 7}, `metadata["urn:tally:ext:promise"].action: must be one of declare, amend, resolve, assess`},
		{map[string]any{"action": "assess", "id": "p1", "zeta": 1, "as": "x"},
			`metadata["urn:tally:ext:promise"].as: is not a member of a assess record (members: id, state, observer, note, meta)`},
	} {
		rec, err := ReadRecord(PromiseActions(), key, c.raw, "a promise record")
		got := errText(err)
		if err == nil {
			got = rec.Action.Name
		}
		if got != c.want {
			t.Errorf("%v:\n got %s\nwant %s", c.raw, got, c.want)
		}
	}
	rec, _ := ReadRecord(ClaimActions(), "k", map[string]any{"action": "cancel", "reason": "r"}, "a claim record")
	body, err := rec.Body(map[string]any{"claim": "C"})
	if string(body) != `{"claim":"C","reason":"r"}` || err != nil || rec.Obj["claim"] != nil {
		t.Errorf("body %s %v; the record is left as it was: %v", body, err, rec.Obj)
	}
	if got := strings.Join(ExpectActions().Names(), " "); got != "raise fact withdraw outcome" {
		t.Errorf("expect actions %s", got)
	}
}

// A claim record's claim: its member, else the message's task, and the two
// agree when both are given.
func TestRecordClaim(t *testing.T) {
	const where = `metadata["urn:tally:ext:claim"]`
	for _, c := range []struct {
		obj  map[string]any
		task a2a.TaskID
		want string
	}{
		{map[string]any{"claim": "C"}, "", "C"},
		{map[string]any{}, "C", "C"},
		{map[string]any{"claim": "C"}, "C", "C"},
		{map[string]any{}, "", where + `.claim: names the claim (or send the message in its task: message.taskId)`},
		{map[string]any{"claim": 7}, "", where + `.claim: must be a string`},
		{map[string]any{"claim": "C"}, "D", where + `.claim: names "C" but message.taskId names "D"`},
	} {
		id, err := RecordClaim(where, c.obj, c.task)
		if got := id + errText(err); got != c.want {
			t.Errorf("%v in %q:\n got %s\nwant %s", c.obj, c.task, got, c.want)
		}
	}
}

func TestCancelReason(t *testing.T) {
	keys := []string{"a", "b"}
	for _, c := range []struct {
		meta map[string]any
		want string
	}{
		{nil, ""},
		{map[string]any{"reason": "top"}, "top"},
		{map[string]any{"reason": "", "b": map[string]any{"reason": "from b"}}, "from b"},
		{map[string]any{"a": map[string]any{"note": "x"}, "b": map[string]any{"reason": "from b"}}, "from b"},
		{map[string]any{"c": map[string]any{"reason": "not a key"}}, ""},
	} {
		if got := CancelReason(c.meta, keys); got != c.want {
			t.Errorf("%v: %q, want %q", c.meta, got, c.want)
		}
	}
}

// Where lapses go: the record's replyTo (a URL or an object), else the
// message's, with the request's push config when the record has none.
func TestReplyTo(t *testing.T) {
	push := &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: "https://a.example/push", Token: "tok",
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "c"}}}
	for _, c := range []struct {
		name   string
		record string
		meta   any
		cfg    *a2a.SendMessageConfig
		want   string // field and ReplyTo, or the refusal
	}{
		{"none", ``, nil, nil, `replyTo null`},
		{"a URL", `"https://a.example/rpc"`, "https://ignored.example", nil, `replyTo {"url":"https://a.example/rpc"}`},
		{"an object with push", `{"url":"https://a.example/rpc","push":{"url":"https://a.example/p","token":"t","authentication":{"scheme":"Basic","credentials":"x"}}}`, nil, push,
			`replyTo {"url":"https://a.example/rpc","push":{"url":"https://a.example/p","token":"t","authentication":{"scheme":"Basic","credentials":"x"}}}`},
		{"the message's", `null`, map[string]any{"url": "https://m.example/rpc"}, nil, `message.metadata.replyTo {"url":"https://m.example/rpc"}`},
		{"the request's push config", `"https://a.example/rpc"`, nil, push,
			`replyTo {"url":"https://a.example/rpc","push":{"url":"https://a.example/push","token":"tok","authentication":{"scheme":"Bearer","credentials":"c"}}}`},
		{"only a push config", ``, nil, push, `replyTo {"push":{"url":"https://a.example/push","token":"tok","authentication":{"scheme":"Bearer","credentials":"c"}}}`},
		{"an unknown member", `{"url":"https://a.example/rpc","href":"x"}`, nil, nil, `href: is not a field of this command (extension, push, url)`},
	} {
		rt, field, err := ReplyTo(json.RawMessage(c.record), c.meta, c.cfg)
		got := errText(err)
		if err == nil {
			got = field + " " + wire(t, rt)
		}
		if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestStateNames(t *testing.T) {
	want := "TASK_STATE_SUBMITTED TASK_STATE_WORKING TASK_STATE_COMPLETED TASK_STATE_FAILED TASK_STATE_CANCELED TASK_STATE_REJECTED TASK_STATE_INPUT_REQUIRED TASK_STATE_AUTH_REQUIRED"
	if got := strings.Join(StateNames(), " "); got != want {
		t.Errorf("%s", got)
	}
}

// The answer to an expect record, and the message a lapse goes back as,
// exactly as they go on the wire.
func TestMessagesWire(t *testing.T) {
	lv := &expect.LapseView{LapseID: "lps_1", ExpectationID: "exp-1", Lapse: expect.LapseOverdue, DueAt: t0, LapsedAt: t0.Add(10 * time.Minute)}
	known := &LapsedExpectation{Kind: "doc.review", Subject: expect.Subject{Type: "doc", ID: "d1"}, Origin: &expect.Origin{TaskID: "task-7", ContextID: "ctx-3"}}
	for _, c := range []struct {
		name string
		msg  *a2a.Message
		want string
	}{
		{"expect reply in a task", ExpectReply("tally-01", "ctx-3", "task-7", "urn:tally:ext:expect", "urn:tally:ext:expect", "raise", []byte(`{"seq":4}`)),
			`{"messageId":"tally-01","contextId":"ctx-3","extensions":["urn:tally:ext:expect"],"metadata":{"urn:tally:ext:expect":{"seq":4}},` +
				`"parts":[{"text":"raise recorded"}],"referenceTaskIds":["task-7"],"role":"ROLE_AGENT"}`},
		{"expect reply outside a task", ExpectReply("tally-02", "", "", ExpectationsDraftURI, ExpectationsDraftURI, "fact", []byte(`{"seq":5}`)),
			`{"messageId":"tally-02","extensions":["https://rsaxb.com/a2a/expectations/v1"],"metadata":{"https://rsaxb.com/a2a/expectations/v1":{"seq":5}},` +
				`"parts":[{"text":"fact recorded"}],"role":"ROLE_AGENT"}`},
		{"lapse of a known expectation", LapseMessage(lv, known, []byte(`{"kind":"lapse"}`), "urn:x"),
			`{"messageId":"lps_1","contextId":"ctx-3","extensions":["urn:x"],"metadata":{"urn:x":{"kind":"lapse"}},` +
				`"parts":[{"text":"expectation exp-1 (doc.review on doc:d1) lapsed: overdue (due 2026-09-01T17:00:00Z, lapsed at 2026-09-01T17:10:00Z)"}],"referenceTaskIds":["task-7"],"role":"ROLE_USER"}`},
		{"lapse without an origin task", LapseMessage(lv, &LapsedExpectation{Kind: "k", Subject: expect.Subject{Type: "doc", ID: "d1"}, Origin: &expect.Origin{ContextID: "ctx-3"}}, []byte(`{}`), "urn:x"),
			`{"messageId":"lps_1","contextId":"ctx-3","extensions":["urn:x"],"metadata":{"urn:x":{}},` +
				`"parts":[{"text":"expectation exp-1 (k on doc:d1) lapsed: overdue (due 2026-09-01T17:00:00Z, lapsed at 2026-09-01T17:10:00Z)"}],"role":"ROLE_USER"}`},
		{"lapse of an unknown expectation", LapseMessage(lv, nil, []byte(`{"kind":"lapse"}`), "urn:x"),
			`{"messageId":"lps_1","extensions":["urn:x"],"metadata":{"urn:x":{"kind":"lapse"}},` +
				`"parts":[{"text":"expectation exp-1 lapsed: overdue (due 2026-09-01T17:00:00Z, lapsed at 2026-09-01T17:10:00Z)"}],"role":"ROLE_USER"}`},
	} {
		if got := wire(t, c.msg); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}
