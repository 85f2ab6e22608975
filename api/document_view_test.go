package api

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"tally/promise"
)

func TestDecodeViewRoundTrip(t *testing.T) {
	at := time.Date(2026, 9, 1, 17, 0, 0, 123456789, time.UTC)
	views := []promise.View{
		{ID: "desk/ship-91", Promise: "ship \"it\"\n<now>", By: "a", To: "b", Until: at, Horizons: []time.Time{at.Add(-time.Hour), at},
			State: promise.Satisfied, Evidence: []string{"https://x/1", "ü"}, Reason: "done", ResolvedBy: "a", ResolvedAt: at,
			Assessments: []promise.AssessmentView{{Observer: "c", State: "violated", Note: "late", TS: at}, {Observer: "d", State: "violated", TS: at}},
			Declared:    at.Add(-2 * time.Hour), Meta: `{"k": [1, 2.50]}`, Seq: 7},
		{ID: "p2", Promise: "x", By: "a", To: "b", On: "desk/ship-91", Task: "task-1", Until: at, Horizons: []time.Time{at}, State: promise.Conditional, Overdue: true, Declared: at},
	}
	for _, v := range views {
		want := v.AppendJSON(nil)
		got, err := DecodeView(want)
		if err != nil {
			t.Fatal(err)
		}
		if b := got.AppendJSON(nil); string(b) != string(want) {
			t.Errorf("round trip differs:\n%s\n%s", want, b)
		}
	}
	list, err := DecodeViews(ViewArray(views))
	if err != nil || string(ViewArray(list)) != string(ViewArray(views)) {
		t.Fatalf("list round trip: %v", err)
	}
}

// TestPromiseListAsMembers: the list document written into one buffer, or
// written out in chunks, is the document its members make, byte for byte,
// empty or not.
func TestPromiseListAsMembers(t *testing.T) {
	at := time.Date(2026, 9, 1, 17, 0, 0, 123456789, time.UTC)
	views := []promise.View{
		{ID: "p1", Promise: "ship \"it\"", By: "a", To: "b", Until: at, Horizons: []time.Time{at}, State: promise.Owed, Declared: at},
		{ID: "p2", Promise: "x", By: "a", To: "b", On: "p1", Until: at, Horizons: []time.Time{at}, State: promise.Conditional, Declared: at},
	}
	for _, vs := range [][]promise.View{nil, views[:1], views} {
		for _, name := range []string{"promises", "owed"} {
			want := Doc(M("now", S("2026-09-02T00:00:00Z")), M(name, ViewArray(vs)))
			if got := PromiseList(time.Date(2026, 9, 2, 0, 0, 0, 0, time.UTC), name, vs); string(got) != string(want) {
				t.Errorf("%d views under %s:\n got %s\nwant %s", len(vs), name, got, want)
			}
			var w bytes.Buffer
			if err := WritePromiseList(&w, time.Date(2026, 9, 2, 0, 0, 0, 0, time.UTC), name, vs); err != nil || w.String() != string(want) {
				t.Errorf("%d views under %s, written: %v\n got %s\nwant %s", len(vs), name, err, w.Bytes(), want)
			}
		}
	}
}

// A list longer than one chunk is written whole and in order.
func TestWritePromiseListLong(t *testing.T) {
	at := time.Date(2026, 9, 1, 17, 0, 0, 0, time.UTC)
	vs := make([]promise.View, 3000)
	for i := range vs {
		vs[i] = promise.View{ID: "p" + strings.Repeat("x", i%17), Promise: "ship", By: "a", To: "b", Until: at, Horizons: []time.Time{at}, State: promise.Owed, Declared: at}
	}
	var w bytes.Buffer
	if err := WritePromiseList(&w, at, "promises", vs); err != nil {
		t.Fatal(err)
	}
	if want := PromiseList(at, "promises", vs); w.String() != string(want) {
		t.Fatalf("written %d bytes, the document is %d, and they differ", w.Len(), len(want))
	}
}
