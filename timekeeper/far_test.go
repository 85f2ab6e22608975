package timekeeper

import (
	"testing"
	"time"

	"tally/promise"
)

// The promise timekeeper keeps far deadlines exactly: a year-9999 "never"
// sends nothing in 2026, a year-1000 deadline is overdue by its true
// distance (time.Time.Sub stops at 292 years), and the 9999 one's first
// notice comes a second after it, not before.
func TestFarDeadlineNotices(t *testing.T) {
	f := newFixture(t)
	never := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	f.promise(promise.Declare{ID: "never", Text: "x", By: "d", To: "c", Until: never}, "d")
	f.promise(promise.Declare{ID: "past", Text: "x", By: "d", To: "c", Until: time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)}, "d")
	f.sweepAt(t0)
	want(t, f.rec.take(), "ntc:past:h1:r0", "ntc:past:h1:r1", "ntc:past:h1:r2", "ntc:past:h1:r3")
	// t0 is 2026-09-01T12:00:00Z: 374,982 days and 12 hours after 1000-01-01.
	if got, wantBy := f.rec.docs[0]["overdueBy"], "PT8999580H"; got != wantBy {
		t.Fatalf("overdueBy %v, want %s", got, wantBy)
	}
	f.sweepAt(never)
	want(t, f.rec.take())
	f.sweepAt(never.Add(time.Second))
	want(t, f.rec.take(), "ntc:never:h1:r0")
	if got := f.rec.docs[len(f.rec.docs)-1]["overdueBy"]; got != "PT1S" {
		t.Fatalf("overdueBy %v, want PT1S", got)
	}
}
