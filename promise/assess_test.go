package promise

import (
	"testing"
	"time"
)

// TestIdenticalAssessmentIsRecordedOnce: an observer's assessment that
// repeats one it recorded (same judgment, note and meta) decides to
// nothing, with a warning naming the recorded one; a different note, meta
// or observer is a new record.
func TestIdenticalAssessmentIsRecordedOnce(t *testing.T) {
	now := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	s := NewState()
	lim := DefaultLimits()
	decl, _, err := s.Decide(lim, "a", now, Declare{ID: "p1", Text: "ship", To: "b", Until: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	s.Apply(Meta{Seq: 1}, &decl)
	first, warn, err := s.Decide(lim, "o", now, Assess{ID: "p1", Note: "late", Meta: `{"k":1}`})
	if err != nil || first.Type != TypeAssess || len(warn) != 0 {
		t.Fatalf("first: %+v %v %v", first, warn, err)
	}
	s.Apply(Meta{Seq: 2}, &first)
	for _, c := range []struct {
		name  string
		actor string
		cmd   Assess
		warn  string // "" for a new record
	}{
		{"the same", "o", Assess{ID: "p1", State: StateViolated, Note: "late", Meta: `{ "k": 1 }`}, "assess: o already judged p1 violated with this note (seq 2); nothing appended"},
		{"another note", "o", Assess{ID: "p1", Note: "later", Meta: `{"k":1}`}, ""},
		{"other meta", "o", Assess{ID: "p1", Note: "late"}, ""},
		{"another observer", "q", Assess{ID: "p1", Note: "late", Meta: `{"k":1}`}, ""},
	} {
		ev, warn, err := s.Decide(lim, c.actor, now, c.cmd)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		switch {
		case c.warn == "" && (ev.Type != TypeAssess || len(warn) != 0):
			t.Errorf("%s: %+v %v, want a new record", c.name, ev, warn)
		case c.warn != "" && (ev.Type != "" || len(warn) != 1 || warn[0] != c.warn):
			t.Errorf("%s: %+v %q, want nothing and %q", c.name, ev, warn, c.warn)
		}
	}
}
