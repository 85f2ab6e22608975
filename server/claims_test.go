package server

import (
	"encoding/json"
	"strings"
	"testing"

	"tally/auth"
)

// token adds a token of role for who in tenant acme.
func (f *fixture) token(who, role string) {
	f.t.Helper()
	tok, _, err := f.srv.tokens.Create("acme", who, role, t0)
	if err != nil {
		f.t.Fatal(err)
	}
	f.tokens[who] = tok
}

// want runs a request and fails unless it answers status; it returns the body.
func (f *fixture) want(status int, method, path, who, body string, hdr ...string) string {
	f.t.Helper()
	code, b, _ := f.do(method, path, who, body, hdr...)
	if code != status {
		f.t.Fatalf("%s %s as %s: want %d, got %d: %s", method, path, who, status, code, b)
	}
	return b
}

func claimState(t *testing.T, doc string) string {
	t.Helper()
	var d struct {
		Claim struct {
			State string `json:"state"`
		} `json:"claim"`
	}
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatalf("%v: %s", err, doc)
	}
	return d.Claim.State
}

func TestClaimRoutesLifecycleAndRoles(t *testing.T) {
	f := newFixture(t)
	f.token("maintainer", auth.RoleAgent)
	f.token("parser", auth.RoleAgent)
	c := base + "/claims"
	create := `{"claim":"C17","respondent":"parser","work":"reject incomplete escapes","slots":[{"name":"change","mode":"required","checks":[{"id":"behavior","validator":{"name":"command","version":"1"},"evaluator":"maintainer","mode":"required","phases":["programmatic"],"attempts":1}]}]}`

	f.want(400, "POST", c, "maintainer", `{"claim":"C17","bogus":1}`)
	f.want(404, "POST", "/v1/tenants/acme/sessions/main/claims", "foreign", create)
	doc := f.want(201, "POST", c, "maintainer", create)
	if claimState(t, doc) != "Generated" || !strings.Contains(doc, `"records":[{"ts":`) {
		t.Fatalf("create: %s", doc)
	}
	f.want(403, "POST", c+"/C17/post", "parser", ``) // only the claimant posts
	f.want(400, "POST", c+"/C17/post", "maintainer", `{"claim":"C18"}`)
	f.want(200, "POST", c+"/C17/post", "maintainer", ``)
	f.want(403, "POST", c+"/C17/receipt", "observer", `{}`) // only the respondent
	f.want(200, "POST", c+"/C17/receipt", "parser", `{}`)
	f.want(200, "POST", c+"/C17/progress", "parser", `{"generation":1,"note":"found it"}`)

	// Artifacts: bytes into the content store, then published; read back verified.
	f.want(403, "PUT", c+"/C17/artifacts/patch-a?slot=change&generation=1&kind=patch", "observer", "diff --git a b")
	f.want(400, "PUT", c+"/C17/artifacts/patch-a?color=red", "parser", "x")
	f.want(201, "PUT", c+"/C17/artifacts/patch-a?slot=change&generation=1&kind=patch", "parser", "diff --git a b")
	if got := f.want(200, "GET", c+"/C17/artifacts/patch-a", "maintainer", ""); got != "diff --git a b" {
		t.Fatalf("artifact bytes: %q", got)
	}
	f.want(404, "GET", c+"/C17/artifacts/nope", "maintainer", "")
	f.want(404, "GET", "/v1/tenants/acme/sessions/main/claims/C17/artifacts/patch-a", "foreign", "")

	f.want(200, "POST", c+"/C17/testaments", "parser", `{"testament":"T1","generation":1,"summary":"length check","bindings":[{"slot":"change","artifact":"patch-a","digest":""}]}`)
	f.want(200, "POST", c+"/C17/testaments/T1/post", "parser", ``)
	f.want(403, "POST", c+"/C17/testaments/T1/receive", "parser", ``) // only the claimant receives
	f.want(200, "POST", c+"/C17/testaments/T1/receive", "maintainer", ``)

	// Only the designated evaluator reports its check.
	f.want(201, "PUT", c+"/C17/artifacts/E1", "maintainer", "4 of 4 cases")
	f.want(403, "POST", c+"/C17/checks/behavior/report", "parser", `{"artifact":"patch-a","result":"pass","evidence":"E1"}`)
	f.want(400, "POST", c+"/C17/checks/behavior/report", "maintainer", `{"artifact":"patch-a","result":"great","evidence":"E1"}`)
	doc = f.want(200, "POST", c+"/C17/checks/behavior/report", "maintainer", `{"artifact":"patch-a","result":"pass","evidence":"E1","note":"4 of 4"}`)
	if claimState(t, doc) != "Satisfied" {
		t.Fatalf("after the passing verdict: %s", doc)
	}

	show := f.want(200, "GET", c+"/C17?now=2026-09-02T00:00:00Z", "observer", "")
	if claimState(t, show) != "Satisfied" || !strings.HasPrefix(show, `{"schema_version":1,"now":"2026-09-02T00:00:00Z","claim":{`) {
		t.Fatalf("show: %s", show)
	}
	list := f.want(200, "GET", c+"?state=Satisfied&participant=maintainer", "observer", "")
	if !strings.Contains(list, `"claim":"C17"`) {
		t.Fatalf("list: %s", list)
	}
	f.want(404, "GET", c+"/C99", "observer", "")
	f.want(404, "GET", "/v1/tenants/acme/sessions/main/claims/C17", "foreign", "")
	f.want(401, "GET", c+"/C17", "", "")
	f.want(409, "POST", c+"/C17/cancel", "maintainer", `{"reason":"too late"}`) // terminal absorbs

	// An idempotent retry answers the recorded bytes; a different body conflicts.
	a := f.want(201, "POST", c, "maintainer", `{"claim":"C18","respondent":"parser","work":"w","slots":[]}`, "Idempotency-Key", "k1")
	b := f.want(201, "POST", c, "maintainer", `{"claim":"C18","respondent":"parser","work":"w","slots":[]}`, "Idempotency-Key", "k1")
	if a != b {
		t.Fatalf("replay differs:\n%s\n%s", a, b)
	}
	f.want(409, "POST", c, "maintainer", `{"claim":"C19","respondent":"parser","work":"w","slots":[]}`, "Idempotency-Key", "k1")
	f.want(200, "POST", c+"/C18/cancel", "maintainer", `{"reason":"not needed"}`)
}
