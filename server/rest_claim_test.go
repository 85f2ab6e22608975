package server

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"tally/artifact"
	"tally/auth"
	"tally/digest"
	"tally/store"
)

// token adds a token of role for who in tenant acme.
func (f *fixture) token(who, role string) {
	f.t.Helper()
	tok, _, err := fileTokens(f.srv).Create("acme", who, role, t0)
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
	// The routes run the claim actions A2A runs: the decoder and the core
	// refuse, naming the field, and nothing is appended.
	before := f.logBytes()
	for _, rc := range []struct{ path, body, field string }{
		{"/C17/checks/behavior/report", `{"result":"pass","evidence":"E1"}`, "artifact"},
		{"/C17/checks/behavior/report", `{"artifact":"patch-a","result":"pass"}`, "evidence"},
		{"/C17/checks/behavior/report", `{"artifact":"patch-a","result":"great","evidence":"E1"}`, "result"},
		{"/C17/checks/behavior/report", `{"check":"review","artifact":"patch-a","result":"pass","evidence":"E1"}`, "check"},
		{"/C17/checks/behavior/begin", `{"artifact":"patch-a","result":"pass"}`, "result"},
		{"/C17/testaments", `{"testament":"T9","summary":"s"}`, "generation"},
		{"/C17/testaments/T1/receive", `{"testament":"T2"}`, "testament"},
		{"/C17/post", `[1]`, "body"},
	} {
		code, got, _ := f.do("POST", c+rc.path, "maintainer", rc.body)
		if code != 400 || !strings.Contains(got, `"error":"`+rc.field) {
			t.Errorf("POST %s %s: want 400 naming %s, got %d %s", rc.path, rc.body, rc.field, code, got)
		}
	}
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a refused claim write appended to the log")
	}
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

// c17Artifacts issues C17 (one check, behavior, run by maintainer), has
// parser publish patch-a and close, post and get received a testament
// binding it. It returns the claims path.
func c17Artifacts(f *fixture) string {
	f.t.Helper()
	claimToPublish(f)
	c := base + "/claims"
	f.want(201, "PUT", c+"/C17/artifacts/patch-a?slot=change&generation=1&kind=patch&name=patch.txt", "parser", "diff --git a b")
	f.want(200, "POST", c+"/C17/testaments", "parser", `{"testament":"T1","generation":1,"summary":"s","bindings":[{"slot":"change","artifact":"patch-a","digest":""}]}`)
	f.want(200, "POST", c+"/C17/testaments/T1/post", "parser", ``)
	f.want(200, "POST", c+"/C17/testaments/T1/receive", "maintainer", ``)
	return c
}

// artifactRows decodes an artifact listing: artifact → stored.
func artifactRows(t *testing.T, doc string) map[string]string {
	t.Helper()
	var d struct {
		Artifacts []StoredArtifact `json:"artifacts"`
	}
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatalf("%v: %s", err, doc)
	}
	out := map[string]string{}
	for _, a := range d.Artifacts {
		out[a.Claim+"/"+a.Artifact] = a.Stored
	}
	return out
}

// errorOf decodes a refusal document.
func errorOf(t *testing.T, doc string) (msg, code string) {
	t.Helper()
	var d struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if err := json.Unmarshal([]byte(doc), &d); err != nil || d.Error == "" {
		t.Fatalf("not a refusal: %s", doc)
	}
	return d.Error, d.Code
}

func TestArtifactListVerifyAndContentRoutes(t *testing.T) {
	f := newFixture(t)
	c := c17Artifacts(f)
	a := base + "/artifacts"
	if got := artifactRows(t, f.want(200, "GET", a, "observer", "")); len(got) != 1 || got["C17/patch-a"] != "present" {
		t.Fatalf("list: %v", got)
	}
	if got := artifactRows(t, f.want(200, "GET", a+"?claim=C17&artifact=patch-a&verify=true", "observer", "")); got["C17/patch-a"] != "ok" {
		t.Fatalf("verify: %v", got)
	}
	show := f.want(200, "GET", c+"/C17", "observer", "")
	var v struct {
		Claim struct {
			Artifacts []struct{ Content string } `json:"artifacts"`
		} `json:"claim"`
	}
	json.Unmarshal([]byte(show), &v)
	content := v.Claim.Artifacts[0].Content
	if got := f.want(200, "GET", base+"/objects/"+content, "observer", ""); got != "diff --git a b" {
		t.Fatalf("content: %q", got)
	}
	f.want(200, "GET", c+"/C17/artifacts/patch-a/verify", "observer", "")

	// Refusals name the field and the rule, and append nothing.
	before := f.logBytes()
	for _, rq := range []struct {
		path  string
		who   string
		code  int
		field string
	}{
		{a + "?claim=C99", "observer", 404, "claim"},
		{a + "?artifact=patch-a", "observer", 400, "claim"},
		{a + "?claim=C17&artifact=nope", "observer", 404, "artifact"},
		{a + "?colour=red", "observer", 400, "colour"},
		{a + "?verify=maybe", "observer", 400, "verify"},
		{a, "foreign", 404, ""},
		{"/v1/tenants/acme/sessions/main/artifacts", "", 401, ""},
		{c + "/C99/artifacts/patch-a", "observer", 404, "claim"},
		{c + "/C17/artifacts/nope/verify", "observer", 404, "artifact"},
		{c + "/C17/artifacts/patch-a/verify", "foreign", 404, ""},
		{base + "/objects/xyz", "observer", 400, "content"},
		{base + "/objects/" + strings.Repeat("0", 64), "observer", 404, "artifact"},
		{base + "/objects/" + content, "foreign", 404, ""},
		{base + "/claim-graph", "foreign", 404, ""},
	} {
		msg, _ := errorOf(t, f.want(rq.code, "GET", rq.path, rq.who, ""))
		if rq.field != "" && !strings.HasPrefix(msg, rq.field+": ") {
			t.Errorf("GET %s: %q does not name %s", rq.path, msg, rq.field)
		}
	}
	// The store is shared by every tenant; another tenant's session that
	// records no artifact with this content is not served its bytes.
	f.want(404, "GET", "/v1/tenants/other/sessions/main/objects/"+content, "foreign", "")

	// A damaged copy is reported by verify and never served.
	objs, err := f.srv.objects()
	if err != nil {
		t.Fatal(err)
	}
	cd, _ := digest.ParseContentDigest(content)
	if err := os.WriteFile(objs.Path(cd), []byte("diff --git a B"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := artifactRows(t, f.want(200, "GET", a+"?verify=true", "observer", "")); got["C17/patch-a"] != "damaged" {
		t.Fatalf("verify of a damaged copy: %v", got)
	}
	for _, p := range []string{c + "/C17/artifacts/patch-a", c + "/C17/artifacts/patch-a/verify", base + "/objects/" + content} {
		msg, code := errorOf(t, f.want(500, "GET", p, "observer", ""))
		if code != string(CodeDamaged) || !strings.HasPrefix(msg, "artifact: the stored copy of ") {
			t.Errorf("GET %s of a damaged copy: %s %s", p, code, msg)
		}
	}
	// No attempt begins, and no verdict is recorded, on a damaged target.
	f.want(500, "POST", c+"/C17/checks/behavior/begin", "maintainer", `{"artifact":"patch-a"}`)
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a refused begin changed the log")
	}
	f.want(201, "PUT", c+"/C17/artifacts/E1", "maintainer", "4 of 4")
	before = f.logBytes()
	f.want(500, "POST", c+"/C17/checks/behavior/report", "maintainer", `{"artifact":"patch-a","result":"pass","evidence":"E1"}`)

	// A missing copy: listed as missing, refused as not in the store.
	if err := os.Remove(objs.Path(cd)); err != nil {
		t.Fatal(err)
	}
	if got := artifactRows(t, f.want(200, "GET", a+"?claim=C17", "observer", "")); got["C17/patch-a"] != "missing" {
		t.Fatalf("list of a missing copy: %v", got)
	}
	msg, _ := errorOf(t, f.want(404, "GET", c+"/C17/artifacts/patch-a", "observer", ""))
	if msg != "artifact: the bytes of artifact patch-a are not in the content store" {
		t.Fatalf("missing copy: %s", msg)
	}
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a refused request changed the log")
	}
}

func TestClaimGraphRoute(t *testing.T) {
	f := newFixture(t)
	f.token("maintainer", auth.RoleAgent)
	c := base + "/claims"
	f.want(201, "POST", c, "maintainer", `{"claim":"C17","respondent":"parser","work":"w","slots":[]}`)
	// A successor with nothing to inherit says it means no requirement.
	f.want(400, "POST", c, "maintainer", `{"claim":"C18","respondent":"parser","work":"w","slots":[],"depends_on":["C17"],"predecessor":"C17"}`)
	f.want(201, "POST", c, "maintainer", `{"claim":"C18","respondent":"parser","work":"w","slots":[],"depends_on":["C17"],"predecessor":"C17","no_checks":true}`)
	got := f.want(200, "GET", base+"/claim-graph", "observer", "")
	want := `{"schema_version":1,"claims":[{"claim":"C17","state":"Generated"},{"claim":"C18","state":"Generated"}],` +
		`"edges":[{"from":"C18","to":"C17","relation":"depends_on","holds":false},{"from":"C18","to":"C17","relation":"predecessor","holds":true}]}` + "\n"
	if got != want {
		t.Fatalf("graph:\n got %s\nwant %s", got, want)
	}
	f.want(400, "GET", base+"/claim-graph?now=soon", "observer", "")
}

// An artifact is a file, not a command: its PUT takes more than a
// command's body bound.
func TestArtifactPutTakesLargeFiles(t *testing.T) {
	f := newFixture(t)
	c := c17Artifacts(f)
	big := strings.Repeat("x", int(f.srv.cfg.BodyMax)+1)
	f.want(201, "PUT", c+"/C17/artifacts/big-log?kind=test-log", "maintainer", big)
	if got := f.want(200, "GET", c+"/C17/artifacts/big-log", "maintainer", ""); got != big {
		t.Fatalf("read back %d bytes, want %d", len(got), len(big))
	}
	f.want(413, "POST", c+"/C17/progress", "parser", `{"generation":1,"note":"`+big+`"}`)
}

// A passed deadline is committed over HTTP only by a timekeeper-role token
// (it acts as the ledger's timekeeper); a dependency fact by anyone, and
// only when it holds. Refusals append nothing.
func TestClaimFactRoutes(t *testing.T) {
	f := newFixture(t)
	f.srv.cfg.WatchEvery = 0 // no built-in timekeeper: this test is the timekeeper
	f.token("maintainer", auth.RoleAgent)
	f.token("keeper", auth.RoleTimekeeper)
	c := base + "/claims"
	terms := func(id, extra string) string {
		return `{"claim":"` + id + `","respondent":"parser","work":"w"` + extra + `,"slots":[{"name":"change","mode":"required","checks":[{"id":"behavior","validator":{"name":"command","version":"1"},"evaluator":"maintainer","mode":"required","phases":["programmatic"],"attempts":1}]}]}`
	}
	f.want(201, "POST", c, "maintainer", terms("C1", `,"deadline":"2026-09-01T11:00:00Z"`))
	f.want(201, "POST", c, "maintainer", terms("C2", `,"depends_on":["C1"]`))
	before := f.logBytes()
	f.want(403, "POST", c+"/C1/deadline", "maintainer", ``)
	f.want(404, "POST", c+"/C1/deadline", "foreign", ``)
	f.want(409, "POST", c+"/C2/dependency", "maintainer", ``) // C1 has not failed yet
	f.want(400, "POST", c+"/C1/deadline", "keeper", `{"claim":"C2"}`)
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a refused fact appended to the log")
	}
	if doc := f.want(200, "POST", c+"/C1/deadline", "keeper", ``); claimState(t, doc) != "Expired" {
		t.Fatalf("deadline: %s", doc)
	}
	// Committing C1's expiry also committed C2's dependency failure.
	if doc := f.want(200, "GET", c+"/C2", "maintainer", ""); claimState(t, doc) != "DependencyFailed" {
		t.Fatalf("C2: %s", doc)
	}
}

// A verdict with its evidence as the body: refused by name, with nothing
// appended, when a parameter is unknown or missing, the result is not one,
// or the target's digest is wrong; accepted, the evidence and the verdict
// are one write.
func TestReportWithEvidenceRoute(t *testing.T) {
	f := newFixture(t)
	f.srv.cfg.WatchEvery = 0
	claimToPublishAs(f, "C1")
	c := base + "/claims"
	f.want(201, "PUT", c+"/C1/artifacts/A?slot=change&generation=1&kind=patch", "parser", "diff")
	f.want(200, "POST", c+"/C1/testaments", "parser", `{"testament":"T1","generation":1,"summary":"s","bindings":[{"slot":"change","artifact":"A","digest":""}]}`)
	f.want(200, "POST", c+"/C1/testaments/T1/post", "parser", ``)
	f.want(200, "POST", c+"/C1/testaments/T1/receive", "maintainer", ``)
	before := f.logBytes()
	for _, rc := range []struct {
		who, query string
		code       int
		field      string
	}{
		{"maintainer", "artifact=A&result=pass&evidence=E1&color=red", 400, "color"},
		{"maintainer", "artifact=A&result=pass", 400, "evidence"},
		{"maintainer", "artifact=A&result=great&evidence=E1", 400, "result"},
		{"maintainer", "artifact=A&digest=" + strings.Repeat("0", 64) + "&result=pass&evidence=E1", 409, "artifact"},
		{"parser", "artifact=A&result=pass&evidence=E1", 403, "actor"},
	} {
		code, got, _ := f.do("PUT", c+"/C1/checks/behavior/report?"+rc.query, rc.who, "4 of 4 cases")
		if code != rc.code || !strings.Contains(got, `"error":"`+rc.field) {
			t.Errorf("%s: want %d naming %s, got %d %s", rc.query, rc.code, rc.field, code, got)
		}
	}
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a refused verdict with evidence appended to the log")
	}
	doc := f.want(200, "PUT", c+"/C1/checks/behavior/report?artifact=A&result=pass&evidence=E1", "maintainer", "4 of 4 cases")
	if claimState(t, doc) != "Satisfied" || strings.Count(doc, `"type":"claim.`) < 3 {
		t.Fatalf("report with evidence: %s", doc)
	}
}

// fileTokens is the server's tokens file, where a test mints its tokens.
func fileTokens(s *Server) *auth.Store { return s.tokens.(*auth.Store) }

// objects is the server's content store, as a test reads it.
func (s *Server) objects() (*artifact.Store, error) {
	return artifact.OpenStore(store.ObjectsDir(s.cfg.Root))
}
