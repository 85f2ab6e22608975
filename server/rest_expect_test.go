package server

import (
	"strings"
	"testing"

	"tally/auth"
)

func TestExpectRoutesRoles(t *testing.T) {
	f := newFixture(t)
	f.token("keeper", auth.RoleTimekeeper)
	f.token("pat", auth.RolePerson)
	e := base + "/expectations"
	raise := `{"expectationId":"exp-1","kind":"shipment.arrival","subject":{"type":"shipment","id":"PA-1"},"satisfiedBy":{"factKey":"arrived:PA-1"},"dueAt":"2026-09-01T13:00:00Z","basis":"declared"}`

	f.want(400, "POST", e, "author", `{"expectationId":"x","colour":"red"}`)
	f.want(404, "POST", "/v1/tenants/acme/sessions/main/expectations", "foreign", raise)
	doc := f.want(201, "POST", e, "author", raise)
	if !strings.Contains(doc, `"seq":1,"expectation":{"expectationId":"exp-1","state":"open"`) || !strings.Contains(doc, `"by":"author"`) {
		t.Fatalf("raise: %s", doc)
	}
	f.want(200, "GET", e+"/exp-1", "observer", "")
	f.want(404, "GET", e+"/nope", "observer", "")
	f.want(404, "GET", "/v1/tenants/acme/sessions/main/expectations/exp-1", "foreign", "")

	// Only the timekeeper-role token commits lapses.
	lapse := `{"expectationId":"exp-1","lapse":"overdue"}`
	f.want(403, "POST", base+"/lapses", "author", lapse)
	f.want(403, "POST", base+"/lapses", "pat", lapse)

	// Extensions: the raiser up to the lineage bound (3), then only a person.
	f.want(403, "POST", e+"/exp-1/supersede", "observer", `{"expectationId":"exp-x","dueAt":"2026-09-01T14:00:00Z"}`)
	f.want(201, "POST", e+"/exp-1/supersede", "author", `{"expectationId":"exp-2","dueAt":"2026-09-01T14:00:00Z"}`)
	f.want(201, "POST", e+"/exp-2/supersede", "author", `{"expectationId":"exp-3","dueAt":"2026-09-01T15:00:00Z"}`)
	f.want(403, "POST", e+"/exp-3/supersede", "author", `{"expectationId":"exp-4","dueAt":"2026-09-01T16:00:00Z"}`)
	doc = f.want(201, "POST", e+"/exp-3/supersede", "pat", `{"expectationId":"exp-4","dueAt":"2026-09-01T16:00:00Z"}`)
	if !strings.Contains(doc, `"lineage":["exp-1","exp-2","exp-3","exp-4"]`) || !strings.Contains(doc, `"human":true`) {
		t.Fatalf("person's extension: %s", doc)
	}

	// Withdrawal: not by another agent; the raiser may.
	f.want(201, "POST", e, "author", strings.ReplaceAll(raise, "exp-1", "exp-w"))
	f.want(403, "POST", e+"/exp-w/withdraw", "observer", `{"reason":"no"}`)
	f.want(200, "POST", e+"/exp-w/withdraw", "author", `{"reason":"rerouted"}`)
	f.want(409, "POST", e+"/exp-w/withdraw", "author", ``)

	// The timekeeper-role token commits the lapse of an expectation past due.
	f.want(201, "POST", e, "author", `{"expectationId":"exp-late","kind":"k","subject":{"type":"t","id":"2"},"satisfiedBy":{"factKey":"g"},"dueAt":"2026-09-01T11:00:00Z","basis":"declared"}`)
	f.want(403, "POST", base+"/lapses", "author", `{"expectationId":"exp-late","lapse":"overdue"}`)
	doc = f.want(201, "POST", base+"/lapses", "keeper", `{"expectationId":"exp-late","lapse":"overdue"}`)
	if !strings.Contains(doc, `"lapse":"overdue"`) {
		t.Fatalf("lapse: %s", doc)
	}
	if l := f.want(200, "GET", base+"/lapses?expectation=exp-late", "observer", ""); !strings.Contains(l, `"expectationId":"exp-late"`) {
		t.Fatalf("lapses: %s", l)
	}

	// A fact satisfies; a task outcome withdraws what was raised on it.
	doc = f.want(201, "POST", base+"/facts", "observer", `{"factKey":"arrived:PA-1","subject":{"type":"shipment","id":"PA-1"}}`)
	if !strings.Contains(doc, `"satisfied":["exp-4"]`) {
		t.Fatalf("fact: %s", doc)
	}
	f.want(201, "POST", e, "author", `{"expectationId":"exp-t","kind":"k","subject":{"type":"t","id":"1"},"satisfiedBy":{"factKey":"f"},"dueAt":"2026-09-02T00:00:00Z","basis":"declared","origin":{"taskId":"task-7"}}`)
	doc = f.want(200, "POST", base+"/tasks/task-7/outcome", "author", `{"outcome":"cancelled"}`)
	if !strings.Contains(doc, `"withdrawn":["exp-t"]`) {
		t.Fatalf("task outcome: %s", doc)
	}
	f.want(400, "POST", base+"/tasks/task-7/outcome", "author", `{"outcome":"meh"}`)
	list := f.want(200, "GET", e+"?state=open", "observer", "")
	if !strings.HasPrefix(list, `{"schema_version":1,"expectations":[`) {
		t.Fatalf("list: %s", list)
	}
	f.want(200, "GET", base+"/lapses?since=2026-09-01T00:00:00Z", "observer", "")
	f.want(400, "GET", base+"/lapses?since=yesterday", "observer", "")
}
