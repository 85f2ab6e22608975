package api

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"tally/promise"
)

// TestPromiseCommands checks each promise document makes its command, a
// relative deadline counting from now, with nothing defaulted here (by,
// state and observer default in the promise core).
func TestPromiseCommands(t *testing.T) {
	d := PromiseDeclare{ID: "p1", Promise: "ship", To: "b", On: "p0", Until: "2h", Task: "t1", Meta: `{"k":1}`}
	got, err := d.Command(testNow)
	want := promise.Declare{ID: "p1", Text: "ship", To: "b", On: "p0", Task: "t1", Until: testNow.Add(2 * time.Hour), Meta: `{"k":1}`}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("declare: %#v, %v", got, err)
	}
	a := PromiseAmend{ID: "p1", Until: "2026-12-02T00:00:00Z", Reason: "r"}
	if got, err := a.Command(testNow); err != nil || !reflect.DeepEqual(got, promise.Amend{ID: "p1", Until: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), Reason: "r"}) {
		t.Errorf("amend: %#v, %v", got, err)
	}
	r := PromiseResolve{ID: "p1", As: "satisfied", Evidence: []string{"e"}}
	if got := r.Command(); !reflect.DeepEqual(got, promise.Resolve{ID: "p1", As: "satisfied", Evidence: []string{"e"}}) {
		t.Errorf("resolve: %#v", got)
	}
	s := PromiseAssess{ID: "p1", Note: "n"}
	if got := s.Command(); !reflect.DeepEqual(got, promise.Assess{ID: "p1", Note: "n"}) {
		t.Errorf("assess: %#v", got)
	}
}

// TestPromiseRefusals pins the words of the documents' own refusals.
func TestPromiseRefusals(t *testing.T) {
	const want = `until: "soon" is neither RFC 3339 (2026-09-01T17:00:00Z) nor a duration from now (90m, 2h, 3d, 1w, 1d12h, or ISO 8601 such as PT6H, P1D, P1W, P1DT2H)`
	d := PromiseDeclare{Promise: "x", To: "b", Until: "soon"}
	if _, err := d.Command(testNow); err == nil || err.Error() != want {
		t.Errorf("declare: %v", err)
	}
	a := PromiseAmend{ID: "p1", Until: "soon"}
	if _, err := a.Command(testNow); err == nil || err.Error() != want {
		t.Errorf("amend: %v", err)
	}
	d.Until = ""
	if _, err := d.Command(testNow); err == nil || err.Error() != "until: required (RFC 3339 such as 2026-09-01T17:00:00Z, or a duration from now such as 90m, 2h, 3d, PT6H)" {
		t.Errorf("declare without until: %v", err)
	}
}

// TestPromiseMembers pins the members A2A records and the stdin record
// list in refusals, in their documented order.
func TestPromiseMembers(t *testing.T) {
	for doc, want := range map[any][]string{
		&PromiseDeclare{}: {"id", "promise", "by", "to", "on", "until", "task", "meta"},
		&PromiseAmend{}:   {"id", "until", "reason", "meta"},
		&PromiseResolve{}: {"id", "as", "evidence", "reason", "meta"},
		&PromiseAssess{}:  {"id", "state", "observer", "note", "meta"},
	} {
		if got := Declared(doc); !slices.Equal(got, want) {
			t.Errorf("%T: %v, want %v", doc, got, want)
		}
	}
}
