package server

import (
	"bytes"
	"strings"
	"testing"

	"tally/auth"
)

// Instants outside 1678–2262 keep their value over REST: a year-9999
// deadline is not overdue (it used to read as 1816 and be overdue at once),
// a year-1000 one is; refusals name the field and append nothing.
func TestFarInstantsOverHTTP(t *testing.T) {
	f := newFixture(t)
	f.token("maintainer", auth.RoleAgent)
	p := base + "/promises"
	doc := f.want(201, "POST", p, "reviewer", `{"id":"never","promise":"p","to":"author","until":"9999-12-31T00:00:00Z"}`)
	if !strings.Contains(doc, `"until":"9999-12-31T00:00:00Z","horizons":["9999-12-31T00:00:00Z"],"state":"owed","overdue":false`) {
		t.Fatalf("declare 9999: %s", doc)
	}
	doc = f.want(201, "POST", p, "reviewer", `{"id":"past","promise":"p","to":"author","until":"1000-01-01T00:00:00Z"}`)
	if !strings.Contains(doc, `"until":"1000-01-01T00:00:00Z","horizons":["1000-01-01T00:00:00Z"],"state":"owed","overdue":true`) {
		t.Fatalf("declare 1000: %s", doc)
	}
	doc = f.want(200, "POST", p+"/past/amend", "reviewer", `{"until":"9000-06-01T12:00:00.5Z"}`)
	if !strings.Contains(doc, `"horizons":["1000-01-01T00:00:00Z","9000-06-01T12:00:00.5Z"],"state":"owed","overdue":false`) {
		t.Fatalf("amend: %s", doc)
	}
	// Twice: the second overdue query runs on the deadline index.
	for i := 0; i < 2; i++ {
		if doc = f.want(200, "GET", p+"?state=overdue", "author", ""); strings.Contains(doc, `"id":"never"`) || strings.Contains(doc, `"id":"past"`) {
			t.Fatalf("overdue list %d: %s", i, doc)
		}
		doc = f.want(200, "GET", p+"?state=overdue&now=9999-12-31T00:00:00.000001Z", "author", "")
		if !strings.Contains(doc, `"id":"never"`) || !strings.Contains(doc, `"id":"past"`) {
			t.Fatalf("overdue list at the end of 9999, %d: %s", i, doc)
		}
		if doc = f.want(200, "GET", p+"?state=overdue&now=9999-12-31T00:00:00Z", "author", ""); strings.Contains(doc, `"id":"never"`) {
			t.Fatalf("overdue at its own deadline, %d: %s", i, doc)
		}
	}

	before := f.logBytes()
	for _, c := range []struct{ path, body, want string }{
		{p, `{"promise":"p","to":"author","until":"-2h"}`, `until: a duration counts forward`},
		{p, `{"promise":"p","to":"author","until":"0001-01-01T00:00:00Z"}`, `until: must be after 0001-01-01T00:00:00Z`},
		{p, `{"promise":"p","to":"author","until":"9999-12-31T00:00:00.0000001Z"}`, `until: before 1680 or after 2253 an instant is kept to the microsecond`},
		{p, `{"promise":"p","to":"author","until":"300000d"}`, `until: longer than 106751d`},
		{p + "/never/amend", `{"until":"P1Y"}`, `until: \"P1Y\" is neither RFC 3339`},
		{base + "/expectations", `{"expectationId":"e1","kind":"k","subject":{"type":"t","id":"1"},"satisfiedBy":{"factKey":"f"},"dueAt":"9999-12-31T23:30:00Z","grace":"PT1H","basis":"declared"}`, `grace: dueAt + grace must be after`},
		{base + "/expectations", `{"expectationId":"e1","kind":"k","subject":{"type":"t","id":"1"},"satisfiedBy":{"factKey":"f"},"dueAt":"2026-09-02T00:00:00Z","horizon":"0001-01-01T00:00:00Z","basis":"declared"}`, `horizon: must be after 0001-01-01T00:00:00Z`},
		{base + "/facts", `{"factKey":"f","subject":{"type":"t","id":"1"},"at":"0001-01-01T00:00:00Z"}`, `at: must be after 0001-01-01T00:00:00Z`},
		{base + "/claims", `{"claim":"C1","respondent":"parser","work":"w","deadline":"0001-01-01T00:00:00Z","slots":[]}`, `deadline: must be after 0001-01-01T00:00:00Z`},
	} {
		who := "reviewer"
		if strings.HasSuffix(c.path, "/claims") {
			who = "maintainer"
		}
		code, body, _ := f.do("POST", c.path, who, c.body)
		if code != 400 || !strings.Contains(body, c.want) {
			t.Errorf("POST %s %s: %d %s, want 400 with %q", c.path, c.body, code, body, c.want)
		}
	}
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a refused request appended to the log")
	}

	// An expectation due in 9999 is open and not due; a claim deadline in
	// 9999 is kept as written.
	doc = f.want(201, "POST", base+"/expectations", "author", `{"expectationId":"e2","kind":"k","subject":{"type":"t","id":"1"},"satisfiedBy":{"factKey":"f"},"dueAt":"9999-12-01T00:00:00Z","grace":"P1W","basis":"declared"}`)
	if !strings.Contains(doc, `"currentDue":"9999-12-01T00:00:00Z"`) || !strings.Contains(doc, `"grace":"PT168H"`) {
		t.Fatalf("raise 9999: %s", doc)
	}
	doc = f.want(201, "POST", base+"/claims", "maintainer", `{"claim":"C2","respondent":"parser","work":"w","deadline":"9999-12-31T00:00:00Z","slots":[{"name":"change","mode":"required","checks":[{"id":"behavior","validator":{"name":"command","version":"1"},"evaluator":"maintainer","mode":"required","phases":["programmatic"],"attempts":1}]}]}`)
	if !strings.Contains(doc, `"deadline":"9999-12-31T00:00:00Z"`) {
		t.Fatalf("claim 9999: %s", doc)
	}
}

// The same through A2A: a year-9999 deadline is owed and not overdue, and
// a deadline counting backwards is refused with nothing appended.
func TestFarInstantsOverA2A(t *testing.T) {
	f := newFixture(t)
	rec := map[string]any{"id": "never", "promise": "p", "to": "author", "until": "9999-12-31T00:00:00Z"}
	code, r, _ := f.rpc("reviewer", "urn:tally:ext:promise", "SendMessage", sendParams("m-1", "urn:tally:ext:promise", rec))
	if code != 200 {
		t.Fatalf("send: %d %s", code, r.raw)
	}
	got := recordOf(t, r.task(t), "urn:tally:ext:promise")
	if got["until"] != "9999-12-31T00:00:00Z" || got["overdue"] != false || got["state"] != "owed" {
		t.Fatalf("record: %v", got)
	}
	before := f.logBytes()
	rec = map[string]any{"promise": "p", "to": "author", "until": "-2h"}
	code, r, _ = f.rpc("reviewer", "urn:tally:ext:promise", "SendMessage", sendParams("m-2", "urn:tally:ext:promise", rec))
	if (code == 200 && r.Error == nil) || !strings.Contains(r.raw, "until: a duration counts forward") {
		t.Fatalf("send -2h: %d %s", code, r.raw)
	}
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a refused message appended to the log")
	}
}
