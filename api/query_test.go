package api

import (
	"net/url"
	"reflect"
	"testing"
	"time"

	"tally/claim"
	"tally/expect"
	"tally/promise"
	"tally/refuse"
)

// TestQueryRoundTrip checks each read document's parameters: what a client
// encodes is what the server decodes, and only set members are sent.
func TestQueryRoundTrip(t *testing.T) {
	for _, c := range []struct {
		doc, back Query
		want      string
	}{
		{&PromiseQuery{State: "overdue", By: "a", To: "b", Task: "t1"}, &PromiseQuery{}, "by=a&state=overdue&task=t1&to=b"},
		{&ClaimQuery{State: []string{"Posted", "Created"}, Open: true, Participant: "e"}, &ClaimQuery{}, "open=true&participant=e&state=Posted&state=Created"},
		{&ExpectQuery{State: "open", Subject: &expect.Subject{Type: "shipment", ID: "PA-1"}, TaskID: "t", ContextID: "c"}, &ExpectQuery{}, "context=c&state=open&subject=shipment%3APA-1&task=t"},
		{&LapsesQuery{Since: "2026-09-01T00:00:00Z", ExpectationID: "x1"}, &LapsesQuery{}, "expectation=x1&since=2026-09-01T00%3A00%3A00Z"},
		{&ExportQuery{Format: "json"}, &ExportQuery{}, "format=json"},
		{&ArtifactQuery{Claim: "c1", Artifact: "a1", Verify: true}, &ArtifactQuery{}, "artifact=a1&claim=c1&verify=true"},
		{&ClaimQuery{}, &ClaimQuery{}, ""},
	} {
		v := EncodeQuery(c.doc)
		if got := v.Encode(); got != c.want {
			t.Errorf("%T: encoded %q, want %q", c.doc, got, c.want)
		}
		if err := DecodeQuery(v, c.back); err != nil || !reflect.DeepEqual(c.back, c.doc) {
			t.Errorf("%T: decoded %+v, %v; want %+v", c.doc, c.back, err, c.doc)
		}
	}
}

// TestQueryRefusals pins the words of a malformed parameter's refusal,
// naming it: what the REST routes answer.
func TestQueryRefusals(t *testing.T) {
	for _, c := range []struct {
		query string
		doc   Query
		want  string
	}{
		{"open=yes", &ClaimQuery{}, "open: must be true or false"},
		{"open=true&overdue=2", &ClaimQuery{}, "overdue: must be true or false"},
		{"subject=shipment", &ExpectQuery{}, "subject: must be TYPE:ID"},
		{"subject=:x", &ExpectQuery{}, "subject: must be TYPE:ID"},
		{"verify=maybe", &ArtifactQuery{}, "verify: must be true or false"},
	} {
		v, _ := url.ParseQuery(c.query)
		err := DecodeQuery(v, c.doc)
		r, ok := refuse.As(err)
		if !ok || r.Code != refuse.Invalid || err.Error() != c.want {
			t.Errorf("%s: %v, want %s", c.query, err, c.want)
		}
	}
	// Empty values are unset, as an absent parameter.
	v, _ := url.ParseQuery("open=&subject=&since=")
	for _, q := range []Query{&ClaimQuery{}, &ExpectQuery{}, &LapsesQuery{}} {
		if err := DecodeQuery(v, q); err != nil {
			t.Errorf("%T: %v", q, err)
		}
	}
	if _, err := (LapsesQuery{Since: "yesterday"}).Noticed(); err == nil || err.Error()[:6] != "since:" {
		t.Errorf("since: %v", err)
	}
}

// TestQueryFilters checks each document and its core's selection convert
// both ways without loss.
func TestQueryFilters(t *testing.T) {
	pf := promise.Filter{State: "all", By: "a", To: "b", Task: "t"}
	if got := PromiseQueryOf(pf).Filter(); got != pf {
		t.Errorf("promise: %+v", got)
	}
	cf := claim.Filter{States: []claim.Status{"Posted"}, Open: true, Overdue: true, Claimant: "a", Respondent: "b", Participant: "c"}
	if got := ClaimQueryOf(cf).Filter(); !reflect.DeepEqual(got, cf) {
		t.Errorf("claim: %+v", got)
	}
	ef := expect.Filter{State: "open", Kind: "k", Subject: expect.Subject{Type: "s", ID: "1"}, TaskID: "t", ContextID: "c"}
	if got := ExpectQueryOf(ef).Filter(); got != ef {
		t.Errorf("expect: %+v", got)
	}
	if q := ExpectQueryOf(expect.Filter{}); q.Subject != nil {
		t.Errorf("no subject: %+v", q)
	}
	since := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	if got, err := LapsesQueryOf(since, "x").Noticed(); err != nil || !got.Equal(since) {
		t.Errorf("lapses: %v, %v", got, err)
	}
	if got := (OwedQuery{}).Filter("me"); got != (promise.Filter{State: "open", By: "me"}) {
		t.Errorf("owed: %+v", got)
	}
	if got := (OwedQuery{Seat: "b"}).Filter("me"); got.By != "b" {
		t.Errorf("owed seat: %+v", got)
	}
}

// TestQueryNames pins the parameters a route lists when it refuses one it
// does not take, in their order.
func TestQueryNames(t *testing.T) {
	if got := QueryNames(&ArtifactQuery{}); !reflect.DeepEqual(got, []string{"claim", "artifact", "verify"}) {
		t.Errorf("artifacts: %v", got)
	}
}
