package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/a2atask"
)

// cardOf fetches and decodes a card.
func (f *fixture) cardOf(path string) (*a2a.AgentCard, string) {
	f.t.Helper()
	code, body, _ := f.do("GET", path, "", "")
	if code != 200 {
		f.t.Fatalf("%s: %d %s", path, code, body)
	}
	var card a2a.AgentCard
	if err := json.Unmarshal([]byte(body), &card); err != nil {
		f.t.Fatalf("%s: %v", path, err)
	}
	return &card, body
}

// TestA2ARootCardNamesCallableURLs: the server's card is the default
// session's agent, with URLs a client can call as they are; the session's
// card is served where a client resolves it with and without a trailing
// slash on …/a2a; the card declares bearer auth only when tokens are
// required.
func TestA2ARootCardNamesCallableURLs(t *testing.T) {
	f := newFixture(t)
	card, body := f.cardOf("/.well-known/agent-card.json")
	ifs := card.SupportedInterfaces
	if len(ifs) != 2 || ifs[0].URL != f.ts.URL+"/v1/tenants/default/sessions/default/a2a" || ifs[1].URL != f.ts.URL+"/v1/tenants/default/sessions/default/a2a/rest" {
		t.Fatalf("root card interfaces: %+v", ifs)
	}
	if !strings.Contains(card.Description, "This card is the agent of session default/default.") {
		t.Fatalf("description: %s", card.Description)
	}
	if !strings.Contains(body, `"securitySchemes":{"bearer":{"httpAuthSecurityScheme":{`) || !strings.Contains(body, `"securityRequirements":[{"schemes":{"bearer":[]}}]`) {
		t.Fatalf("card without bearer auth: %s", body)
	}

	f.srv.cfg.A2A.DefaultSession = "acme/main"
	card, _ = f.cardOf("/.well-known/agent-card.json")
	if u := card.SupportedInterfaces[0].URL; u != f.ts.URL+a2aBase {
		t.Fatalf("configured default session: %s", u)
	}
	_, withSlash := f.cardOf(a2aBase + "/.well-known/agent-card.json")
	_, without := f.cardOf(base + "/.well-known/agent-card.json")
	if withSlash != without || !strings.Contains(without, `"url":"`+f.ts.URL+a2aBase+`"`) {
		t.Fatalf("the session's two card URLs differ:\n%s\n%s", withSlash, without)
	}

	f.srv.cfg.Insecure = true
	_, body = f.cardOf("/.well-known/agent-card.json")
	if strings.Contains(body, "securitySchemes") || strings.Contains(body, "securityRequirements") || !strings.Contains(body, "--insecure-dev") {
		t.Fatalf("an insecure server's card declares auth: %s", body)
	}

	for _, bad := range []string{"acme", "acme/", "/main", "acme/../x", "a/b/c"} {
		if err := (A2AConfig{DefaultSession: bad}).Validate(); err == nil || !strings.Contains(err.Error(), "--a2a-default-session") {
			t.Errorf("default session %q: %v", bad, err)
		}
	}
	if err := (A2AConfig{DefaultSession: "acme/main"}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestInsecureDevParties: without tokens, reads need no identity, a write
// without X-Tally-Actor acts as its record's own party, and one whose
// record names none is refused naming the header, appending nothing;
// over A2A and over the HTTP JSON API alike.
func TestInsecureDevParties(t *testing.T) {
	f := newFixture(t)
	f.srv.cfg.Insecure = true
	pinki := a2atask.PinkiPromiseURI + "/promise"

	code, r, _ := f.rpc("", "", "GetTask", map[string]any{"id": "nope"})
	if code != 200 || r.Error == nil || r.Error.Code != -32001 {
		t.Fatalf("anonymous GetTask: %d %s", code, r.raw)
	}
	rec := map[string]any{"id": "p1", "promise": "hand back a reviewed schema", "by": "reviewer", "to": "author", "until": "2026-09-01T17:00:00Z"}
	code, r, _ = f.rpc("", a2atask.PinkiPromiseURI, "SendMessage", sendParams("m-1", pinki, rec))
	if code != 200 || r.Error != nil {
		t.Fatalf("anonymous declaration: %d %s", code, r.raw)
	}
	if got := recordOf(t, r.task(t), pinki); got["by"] != "reviewer" {
		t.Fatalf("declared as %v", got["by"])
	}
	if code, r, _ = f.rpc("", "", "ListTasks", map[string]any{}); code != 200 || r.Error != nil || !strings.Contains(r.raw, `"id":"p1"`) {
		t.Fatalf("anonymous ListTasks: %d %s", code, r.raw)
	}

	before := string(f.logBytes())
	refusal := "X-Tally-Actor: --insecure-dev: this write names no party of its own (" + devPartiesText + " do); send the acting identity in the X-Tally-Actor header"
	_, r, _ = f.rpc("", a2atask.PinkiPromiseURI, "SendMessage", sendParams("m-2", pinki, map[string]any{"action": "amend", "id": "p1", "until": "2026-09-02T17:00:00Z"}))
	if r.Error == nil || r.Error.Code != -32602 || r.Error.Message != refusal {
		t.Fatalf("anonymous amend: %s", r.raw)
	}
	_, r, _ = f.rpc("", "", "CancelTask", map[string]any{"id": "p1", "metadata": map[string]any{"reason": "no"}})
	if r.Error == nil || r.Error.Code != -32602 || r.Error.Message != refusal {
		t.Fatalf("anonymous cancel: %s", r.raw)
	}
	code, body, _ := f.do("POST", base+"/promises/p1/amend", "", `{"until":"2026-09-02T17:00:00Z"}`)
	if code != 400 || !strings.Contains(body, "X-Tally-Actor") {
		t.Fatalf("anonymous REST amend: %d %s", code, body)
	}
	if after := string(f.logBytes()); after != before {
		t.Fatalf("a refusal appended:\n%s", after[len(before):])
	}

	// The header still names the identity; the HTTP JSON API follows the
	// same rule.
	if _, r, _ = f.rpc("", "", "CancelTask", map[string]any{"id": "p1"}, "X-Tally-Actor", "author"); r.Error != nil || !strings.Contains(r.raw, "TASK_STATE_CANCELED") {
		t.Fatalf("release as author: %s", r.raw)
	}
	if code, body, _ = f.do("GET", base+"/promises?state=all", "", ""); code != 200 || !strings.Contains(body, `"id":"p1"`) {
		t.Fatalf("anonymous REST read: %d %s", code, body)
	}
	code, body, _ = f.do("POST", base+"/promises", "", `{"id":"p2","promise":"write the migration","by":"author","to":"reviewer","until":"2026-09-01T17:00:00Z"}`)
	if code != 201 || !strings.Contains(body, `"by":"author"`) {
		t.Fatalf("anonymous REST declaration: %d %s", code, body)
	}
	code, body, _ = f.do("POST", base+"/promises/p2/assess", "", `{"observer":"observer","note":"late"}`)
	if code != 200 || !strings.Contains(string(f.logBytes()), `"type":"assess","promise":"p2","state":"violated","observer":"observer"`) {
		t.Fatalf("anonymous REST assessment: %d %s\n%s", code, body, f.logBytes())
	}
}

// TestRecordPartyMembers: a new claim may name its "claimant" and an
// expectation its raiser "by"; with a token either must be the token's
// identity (403, nothing appended, otherwise); under --insecure-dev
// without X-Tally-Actor the write acts as the party named, over the HTTP
// JSON API and A2A alike.
func TestRecordPartyMembers(t *testing.T) {
	f := newFixture(t)
	claims, exps := base+"/claims", base+"/expectations"
	claimBody := func(id, claimant string) string {
		return `{"claim":"` + id + `","claimant":"` + claimant + `","respondent":"parser","work":"reject incomplete escapes","slots":[]}`
	}
	raiseBody := func(id, by string) string {
		return `{"expectationId":"` + id + `","kind":"shipment.arrival","subject":{"type":"shipment","id":"PA-1"},"satisfiedBy":{"factKey":"arrived:PA-1"},"dueAt":"2026-09-01T13:00:00Z","basis":"declared","by":"` + by + `"}`
	}
	before := string(f.logBytes())
	if body := f.want(403, "POST", claims, "reviewer", claimBody("C1", "author")); !strings.Contains(body, "claimant: a claim's claimant is the identity that creates it, reviewer, not author") {
		t.Fatalf("claimant of another: %s", body)
	}
	if body := f.want(403, "POST", exps, "reviewer", raiseBody("e1", "author")); !strings.Contains(body, "by: an expectation is raised by the acting identity reviewer, not author") {
		t.Fatalf("raiser of another: %s", body)
	}
	if after := string(f.logBytes()); after != before {
		t.Fatalf("a refusal appended:\n%s", after[len(before):])
	}
	f.want(201, "POST", claims, "reviewer", claimBody("C1", "reviewer"))
	f.want(201, "POST", exps, "reviewer", raiseBody("e1", "reviewer"))

	f.srv.cfg.Insecure = true
	f.want(201, "POST", claims, "", claimBody("C2", "author"))
	f.want(201, "POST", exps, "", raiseBody("e2", "author"))
	_, r, _ := f.rpc("", "urn:tally:ext:claim", "SendMessage", sendParams("m-c3", "urn:tally:ext:claim",
		map[string]any{"claim": "C3", "claimant": "observer", "respondent": "parser", "work": "w", "slots": []any{}}))
	if r.Error != nil {
		t.Fatalf("anonymous A2A claim: %s", r.raw)
	}
	_, r, _ = f.rpc("", "urn:tally:ext:expect", "SendMessage", sendParams("m-e3", "urn:tally:ext:expect",
		map[string]any{"expectationId": "e3", "kind": "k", "subject": map[string]any{"type": "doc", "id": "d1"}, "satisfiedBy": map[string]any{"factKey": "f"},
			"dueAt": "2026-09-01T13:00:00Z", "basis": "declared", "by": "observer"}))
	if r.Error != nil {
		t.Fatalf("anonymous A2A raise: %s", r.raw)
	}
	log := string(f.logBytes())
	for _, want := range []string{`"type":"claim.create","claim":"C2","claimant":"author"`, `"type":"claim.create","claim":"C3","claimant":"observer"`,
		`"expectationId":"e2"`, `"expectationId":"e3"`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s", want)
		}
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"type":"expect.raise","expectationId":"e2"`) && !strings.Contains(line, `"by":"author"`) ||
			strings.Contains(line, `"type":"expect.raise","expectationId":"e3"`) && !strings.Contains(line, `"by":"observer"`) {
			t.Errorf("raised by the wrong party: %s", line)
		}
	}
	if n := strings.Count(log, `"type":"expect.raise","expectationId":"e`); n != 3 {
		t.Fatalf("%d raises in the log:\n%s", n, log)
	}
	// A claim action that names no party still needs the header.
	_, r, _ = f.rpc("", "urn:tally:ext:claim", "SendMessage", sendParams("m-c4", "urn:tally:ext:claim", map[string]any{"action": "post", "claim": "C2"}))
	if r.Error == nil || r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "X-Tally-Actor") {
		t.Fatalf("anonymous post: %s", r.raw)
	}
}
