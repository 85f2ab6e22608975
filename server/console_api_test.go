package server

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tally/auth"
	"tally/server/console"
	"tally/service"
)

func decodeJSON(t testing.TB, body string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, body)
	}
}

// TestConsolePageAndHeaders: the page and its files come from the binary
// with a CSP that allows no inline script, and nothing else is served.
func TestConsolePageAndHeaders(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"/", "/console/console.js", "/console/console.css", "/console/icon.svg"} {
		code, body, hdr := f.do("GET", p, "", "")
		if code != 200 || len(body) == 0 {
			t.Fatalf("GET %s: %d", p, code)
		}
		csp := hdr.Get("Content-Security-Policy")
		if csp != console.CSP || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "script-src 'self'") {
			t.Fatalf("GET %s: CSP %q", p, csp)
		}
		if hdr.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("GET %s: no nosniff", p)
		}
	}
	_, page, hdr := f.do("GET", "/", "", "")
	if !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") || strings.Contains(page, "<script>") || strings.Contains(page, "style=") {
		t.Fatalf("the page has inline script or style, or the wrong type: %s\n%s", hdr.Get("Content-Type"), page)
	}
	if _, _, hdr := f.do("GET", "/console/console.js", "", ""); !strings.HasPrefix(hdr.Get("Content-Type"), "text/javascript") {
		t.Fatalf("script served as %s", hdr.Get("Content-Type"))
	}
	for _, p := range []string{"/console/nope.js", "/console/index.html", "/console/..%2fconsole.go", "/nope"} {
		if code, _, _ := f.do("GET", p, "", ""); code != 404 {
			t.Fatalf("GET %s: %d, want 404", p, code)
		}
	}
	// Every ledger value the script shows goes through text nodes: the
	// script never assigns markup.
	js, err := os.ReadFile(filepath.Join("console", "static", "console.js"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
		if strings.Contains(string(js), bad) {
			t.Fatalf("console.js uses %s", bad)
		}
	}
	var cfg struct{ Insecure bool }
	decodeJSON(t, f.want(200, "GET", "/console/config.json", "", ""), &cfg)
	if cfg.Insecure {
		t.Fatal("config says insecure on a token server")
	}
}

// TestConsoleTenantsAndSessions: a token sees its own tenant and that
// tenant's sessions with a log; listing opens and creates nothing.
func TestConsoleTenantsAndSessions(t *testing.T) {
	f := newFixture(t)
	f.want(201, "POST", base+"/promises", "reviewer", `{"promise":"p","to":"author","until":"2h"}`)
	f.want(201, "POST", "/v1/tenants/acme/sessions/second/promises", "reviewer", `{"promise":"p","to":"author","until":"2h"}`)
	var ts struct {
		Tenants []string
		Actor   string
		Role    string
	}
	decodeJSON(t, f.want(200, "GET", "/v1/tenants", "author", ""), &ts)
	if strings.Join(ts.Tenants, ",") != "acme" || ts.Actor != "author" || ts.Role != "agent" {
		t.Fatalf("tenants: %+v", ts)
	}
	f.want(401, "GET", "/v1/tenants", "", "")
	var ss struct {
		Sessions []struct {
			Session string
			Bytes   int64
		}
	}
	before, _ := os.ReadDir(filepath.Join(f.root, "sessions", "acme"))
	decodeJSON(t, f.want(200, "GET", "/v1/tenants/acme/sessions", "author", ""), &ss)
	if len(ss.Sessions) != 2 || ss.Sessions[0].Session != "main" || ss.Sessions[1].Session != "second" || ss.Sessions[0].Bytes == 0 {
		t.Fatalf("sessions: %+v", ss)
	}
	after, _ := os.ReadDir(filepath.Join(f.root, "sessions", "acme"))
	if len(before) != len(after) {
		t.Fatalf("listing sessions changed the directory: %d → %d entries", len(before), len(after))
	}
	f.want(404, "GET", "/v1/tenants/acme/sessions", "foreign", "")
	f.want(401, "GET", "/v1/tenants/acme/sessions", "", "")
	if _, err := os.Stat(filepath.Join(f.root, "sessions", "other")); err == nil {
		t.Fatal("a foreign token's request created its tenant")
	}
}

// consoleScenario records the seed's promise lifecycle, an overdue promise,
// and a claim that fails its review.
func consoleScenario(f *fixture) {
	f.t.Helper()
	f.want(201, "POST", base+"/promises", "reviewer", `{"id":"desk/ship-91","promise":"hand back a reviewed schema","to":"author","until":"2026-09-01T17:00:00Z"}`)
	f.want(200, "POST", base+"/promises/desk%2Fship-91/amend", "reviewer", `{"until":"2026-09-01T18:00:00Z","reason":"nudge 1"}`)
	f.want(200, "POST", base+"/promises/desk%2Fship-91/assess", "author", `{"note":"deadline passed, nothing delivered"}`)
	f.want(200, "POST", base+"/promises/desk%2Fship-91/resolve", "reviewer", `{"as":"satisfied","evidence":["https://example.org/reviews/91"]}`)
	f.want(201, "POST", base+"/promises", "author", `{"id":"late","promise":"a late one","to":"reviewer","until":"2026-09-01T13:00:00Z"}`)
	f.want(201, "POST", base+"/promises", "author", `{"id":"fine","promise":"<img src=x onerror=alert(1)>","to":"observer","until":"2026-09-09T13:00:00Z"}`)
}

func TestConsoleSummaryAndObligations(t *testing.T) {
	f := newFixture(t)
	consoleScenario(f)
	var sum struct {
		Seq      uint64
		Promises struct {
			Total     int
			ByState   map[string]int `json:"by_state"`
			Attention int
		}
		Attention []service.Obligation
	}
	decodeJSON(t, f.want(200, "GET", base+"/summary?now=2026-09-01T14:00:00Z", "observer", ""), &sum)
	if sum.Promises.Total != 3 || sum.Promises.ByState["satisfied"] != 1 || sum.Promises.ByState["owed"] != 2 || sum.Promises.Attention != 1 {
		t.Fatalf("summary: %+v", sum)
	}
	if sum.Seq != 6 || len(sum.Attention) != 1 || sum.Attention[0].ID != "late" || sum.Attention[0].Attention != "overdue" {
		t.Fatalf("summary seq or attention: %+v", sum)
	}

	type page struct {
		Total  int
		Offset int
		Rows   []service.Obligation
	}
	get := func(q string) page {
		t.Helper()
		var p page
		decodeJSON(t, f.want(200, "GET", base+"/obligations?now=2026-09-01T14:00:00Z&"+q, "observer", ""), &p)
		return p
	}
	if p := get(""); p.Total != 3 || p.Rows[0].ID != "late" {
		t.Fatalf("all rows, attention first: %+v", p)
	}
	if p := get("q=IMG+SRC"); p.Total != 1 || p.Rows[0].Text != "<img src=x onerror=alert(1)>" {
		t.Fatalf("text filter: %+v", p)
	}
	if p := get("by=reviewer"); p.Total != 1 || p.Rows[0].ID != "desk/ship-91" {
		t.Fatalf("by filter: %+v", p)
	}
	if p := get("party=observer"); p.Total != 1 || p.Rows[0].ID != "fine" {
		t.Fatalf("party filter: %+v", p)
	}
	if p := get("state=satisfied&family=promise"); p.Total != 1 {
		t.Fatalf("state filter: %+v", p)
	}
	if p := get("attention=true"); p.Total != 1 || p.Rows[0].Attention != "overdue" {
		t.Fatalf("attention filter: %+v", p)
	}
	if p := get("offset=1&limit=1"); p.Total != 3 || len(p.Rows) != 1 || p.Offset != 1 {
		t.Fatalf("paging: %+v", p)
	}
	if p := get("offset=9"); p.Total != 3 || len(p.Rows) != 0 {
		t.Fatalf("past the end: %+v", p)
	}
	for q, field := range map[string]string{"family=task": "family", "limit=501": "limit", "offset=-1": "offset", "now=soon": "now"} {
		body := f.want(400, "GET", base+"/obligations?"+q, "observer", "")
		if !strings.Contains(body, field) {
			t.Fatalf("%s: refusal does not name %s: %s", q, field, body)
		}
	}
	f.want(404, "GET", base+"/obligations", "foreign", "")
}

// stepStates lists a history as type:state-after.
func stepStates(steps []service.HistoryStep) []string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Type+":"+s.State)
	}
	return out
}

func TestConsolePromiseHistory(t *testing.T) {
	f := newFixture(t)
	consoleScenario(f)
	var h struct {
		Steps []service.HistoryStep
	}
	decodeJSON(t, f.want(200, "GET", base+"/promises/desk%2Fship-91/history", "observer", ""), &h)
	got := stepStates(h.Steps)
	// The assessment leaves the promise as open as it was.
	if strings.Join(got, " ") != "promise:owed amend:owed assess:owed resolve:satisfied" {
		t.Fatalf("history: %v", got)
	}
	if !strings.Contains(string(h.Steps[1].Record), `"reason":"nudge 1"`) {
		t.Fatalf("the amend's record: %s", h.Steps[1].Record)
	}
	f.want(404, "GET", base+"/promises/nope/history", "observer", "")
	f.want(404, "GET", base+"/promises/desk%2Fship-91/history", "foreign", "")
}

func TestConsoleClaimHistory(t *testing.T) {
	f := newFixture(t)
	f.token("maintainer", "agent")
	f.token("parser", "agent")
	c := base + "/claims"
	f.want(201, "POST", c, "maintainer", `{"claim":"C17","respondent":"parser","work":"reject incomplete escapes","slots":[{"name":"change","mode":"required","checks":[{"id":"review","mode":"required","validator":{"name":"review","version":"1"},"evaluator":"maintainer","phases":["quality"],"attempts":1}]}]}`)
	f.want(200, "POST", c+"/C17/post", "maintainer", `{}`)
	f.want(200, "POST", c+"/C17/receipt", "parser", `{}`)
	// A claim that depends on C17 changes state when C17 ends: its history
	// shows the record about C17 that did it.
	f.want(201, "POST", c, "maintainer", `{"claim":"M1","respondent":"parser","work":"migrate","depends_on":["C17"],"slots":[{"name":"out","mode":"required","checks":[{"id":"c","mode":"required","validator":{"name":"review","version":"1"},"evaluator":"maintainer","phases":["quality"],"attempts":1}]}]}`)
	f.want(200, "POST", c+"/C17/cancel", "maintainer", `{"reason":"not needed"}`)
	var h struct{ Steps []service.HistoryStep }
	decodeJSON(t, f.want(200, "GET", c+"/C17/history", "parser", ""), &h)
	got := stepStates(h.Steps)
	if strings.Join(got, " ") != "claim.create:Generated claim.post:Posted claim.receipt:Received claim.cancel:Cancelled" {
		t.Fatalf("C17 history: %v", got)
	}
	f.want(404, "GET", c+"/C99/history", "parser", "")
	// C17's end commits M1's dependency failure: a record about M1.
	decodeJSON(t, f.want(200, "GET", c+"/M1/history", "parser", ""), &h)
	got = stepStates(h.Steps)
	if strings.Join(got, " ") != "claim.create:Generated claim.dependency:DependencyFailed" {
		t.Fatalf("M1 history: %v", got)
	}
}

// TestConsoleRoutesInOpenAPI: the console's routes are described.
func TestConsoleRoutesInOpenAPI(t *testing.T) {
	f := newFixture(t)
	doc := f.want(200, "GET", "/v1/openapi.json", "", "")
	var api struct {
		Paths map[string]map[string]struct {
			Security []any `json:"security"`
		} `json:"paths"`
	}
	decodeJSON(t, doc, &api)
	if len(api.Paths["/v1/tenants"]["get"].Security) == 0 || len(api.Paths["/"]["get"].Security) != 0 {
		t.Fatalf("security: the tenant list needs a token, the page does not: %+v %+v", api.Paths["/v1/tenants"], api.Paths["/"])
	}
	for _, p := range []string{`"/v1/tenants/{tenant}/sessions"`, `"/v1/tenants/{tenant}/sessions/{session}/summary"`,
		`"/v1/tenants/{tenant}/sessions/{session}/obligations"`, `"/v1/tenants/{tenant}/sessions/{session}/claims/{id}/history"`,
		`"/v1/tenants/{tenant}/sessions/{session}/promises/{id}/history"`, `"operationId": "console"`} {
		if !strings.Contains(doc, p) {
			t.Fatalf("openapi has no %s", p)
		}
	}
}

// TestConsoleInsecureTenants: in --insecure-dev the console asks for no
// token and sees every tenant with a session on disk.
func TestConsoleInsecureTenants(t *testing.T) {
	cfg := insecureConfig(t)
	root := cfg.Root
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); s.Close() })
	f := &fixture{t: t, srv: s, ts: ts, root: root}
	for _, tenant := range []string{"beta", "acme"} {
		f.want(201, "POST", "/v1/tenants/"+tenant+"/sessions/main/promises", "", `{"promise":"p","to":"author","until":"2h"}`, "X-Tally-Actor", "reviewer")
	}
	var cfgDoc struct{ Insecure bool }
	decodeJSON(t, f.want(200, "GET", "/console/config.json", "", ""), &cfgDoc)
	var ts2 struct {
		Tenants  []string
		Actor    string
		Insecure bool
	}
	decodeJSON(t, f.want(200, "GET", "/v1/tenants", "", "", "X-Tally-Actor", "console"), &ts2)
	if !cfgDoc.Insecure || !ts2.Insecure || strings.Join(ts2.Tenants, ",") != "acme,beta" || ts2.Actor != "console" {
		t.Fatalf("insecure: config %+v, tenants %+v", cfgDoc, ts2)
	}
}

// The attention list leaves out a failed claim a satisfied successor
// answered and an item a person dismissed (a fact in the log); an ended
// row says when it ended, for the Due column.
func TestConsoleAttentionAnsweredAndDismissed(t *testing.T) {
	f := newFixture(t)
	consoleScenario(f)
	f.token("maintainer", "agent")
	f.token("parser", "agent")
	c := base + "/claims"
	f.want(201, "POST", c, "maintainer", `{"claim":"C17","respondent":"parser","work":"reject incomplete escapes","no_checks":true}`)
	f.want(200, "POST", c+"/C17/post", "maintainer", `{}`)
	f.want(200, "POST", c+"/C17/receipt", "parser", `{"decline":true,"reason":"out of scope"}`)
	f.want(201, "POST", c, "maintainer", `{"claim":"C18","respondent":"parser","work":"reject incomplete escapes, bounded","predecessor":"C17","no_checks":true}`)
	f.want(200, "POST", c+"/C18/post", "maintainer", `{}`)
	f.want(200, "POST", c+"/C18/receipt", "parser", `{}`)
	f.want(200, "POST", c+"/C18/testaments", "parser", `{"testament":"T1","generation":1,"summary":"bounded"}`)
	ids := func() string { t.Helper(); return attentionList(f, "?now=2026-09-01T14:00:00Z") }
	if got := ids(); got != "promise:late:overdue claim:C17:failed" {
		t.Fatalf("attention before the successor: %s", got)
	}
	f.want(200, "POST", c+"/C18/testaments/T1/post", "parser", ``)
	f.want(200, "POST", c+"/C18/testaments/T1/receive", "maintainer", ``)
	if got := ids(); got != "promise:late:overdue" {
		t.Fatalf("attention after C18 was satisfied: %s", got)
	}
	// A dismissal is a fact in the log, recorded by whoever dismisses.
	f.want(201, "POST", base+"/facts", "observer", `{"factKey":"attention.dismissed:promise:late","subject":{"type":"attention","id":"promise:late"}}`)
	if got := ids(); got != "" {
		t.Fatalf("attention after the dismissal: %s", got)
	}
	rows := obligationsByID(f, "?now=2026-09-01T14:00:00Z")
	if o := rows["late"]; !o.Dismissed || o.Attention != "" || o.Ended {
		t.Fatalf("late: %+v", o)
	}
	if o := rows["C17"]; o.AnsweredBy != "C18" || o.Attention != "" || !o.Ended || o.EndedAt == nil {
		t.Fatalf("C17: %+v", o)
	}
	if o := rows["C18"]; !o.Ended || o.EndedAt == nil || o.State != "Satisfied" {
		t.Fatalf("C18: %+v", o)
	}
	if o := rows["desk/ship-91"]; !o.Ended || o.EndedAt == nil {
		t.Fatalf("desk/ship-91: %+v", o)
	}
	if o := rows["fine"]; o.Ended || o.EndedAt != nil {
		t.Fatalf("fine: %+v", o)
	}
}

// A lapsed expectation leaves the attention list once the expectation that
// supersedes it (or one after that) is satisfied.
func TestConsoleAttentionSupersededExpectation(t *testing.T) {
	f := newFixture(t)
	f.token("keeper", auth.RoleTimekeeper)
	e := base + "/expectations"
	f.want(201, "POST", e, "author", `{"expectationId":"x1","kind":"k","subject":{"type":"doc","id":"D1"},"satisfiedBy":{"factKey":"reviewed:D1"},"dueAt":"2026-09-01T11:00:00Z","basis":"declared"}`)
	f.want(201, "POST", base+"/lapses", "keeper", `{"expectationId":"x1","lapse":"overdue"}`)
	attention := func() string { t.Helper(); return attentionList(f, "") }
	if got := attention(); got != "expectation:x1:lapsed" {
		t.Fatalf("after the lapse: %s", got)
	}
	f.want(201, "POST", e+"/x1/supersede", "author", `{"expectationId":"x2","dueAt":"2026-09-03T00:00:00Z","satisfiedBy":{"factKey":"reviewed:D1:v2"}}`)
	f.want(201, "POST", e+"/x2/supersede", "author", `{"expectationId":"x3","dueAt":"2026-09-04T00:00:00Z","satisfiedBy":{"factKey":"reviewed:D1:v3"}}`)
	if got := attention(); got != "expectation:x1:lapsed" {
		t.Fatalf("superseded, successors open: %s", got)
	}
	f.want(201, "POST", base+"/facts", "observer", `{"factKey":"reviewed:D1:v3","subject":{"type":"doc","id":"D1"}}`)
	if got := attention(); got != "" {
		t.Fatalf("after x3 was satisfied: %s", got)
	}
	rows := obligationsByID(f, "?family=expectation")
	if o := rows["x1"]; o.AnsweredBy != "x3" || !o.Ended {
		t.Fatalf("x1: %+v", o)
	}
	if o := rows["x3"]; !o.Ended || o.EndedAt == nil {
		t.Fatalf("x3: %+v", o)
	}
}

// obligationsByID is the obligations list (at query) by id.
func obligationsByID(f *fixture, query string) map[string]service.Obligation {
	f.t.Helper()
	var p struct{ Rows []service.Obligation }
	decodeJSON(f.t, f.want(200, "GET", base+"/obligations"+query, "observer", ""), &p)
	rows := map[string]service.Obligation{}
	for _, o := range p.Rows {
		rows[o.ID] = o
	}
	return rows
}

// attentionList is the summary's attention list (at query), as
// family:id:why, in order.
func attentionList(f *fixture, query string) string {
	f.t.Helper()
	var s struct{ Attention []service.Obligation }
	if err := json.Unmarshal([]byte(f.want(200, "GET", base+"/summary"+query, "observer", "")), &s); err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, o := range s.Attention {
		out = append(out, o.Family+":"+o.ID+":"+o.Attention)
	}
	return strings.Join(out, " ")
}
