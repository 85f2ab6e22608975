package claim

import (
	"slices"
	"strings"
	"testing"
	"time"

	"tally/refuse"
)

// Claim deadlines across years 1–9999 keep their value and order in the
// deadline index: C9999 is not due in 2026, and of two deadlines after 2262
// the earlier falls due first (they used to saturate and tie).
func TestFarDeadlines(t *testing.T) {
	l := newLedger(t)
	dl := func(v string) func(*Create) {
		d, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			t.Fatal(err)
		}
		return func(c *Create) { c.Deadline = d }
	}
	l.open("C9999", parserSlots(), dl("9999-12-31T00:00:00Z"))
	l.open("C3000", parserSlots(), dl("3000-01-01T00:00:00Z"))
	l.open("C1000", parserSlots(), dl("1000-01-01T00:00:00Z"))
	if v := l.view("C9999"); v.Deadline != "9999-12-31T00:00:00Z" {
		t.Fatalf("view deadline %q", v.Deadline)
	}
	for _, s := range []*State{l.s, l.replay()} {
		if got := s.DueDeadlines(t0, 0); !slices.Equal(got, []string{"C1000"}) {
			t.Fatalf("due in 2026: %v", got)
		}
		if got := s.DueDeadlines(time.Date(5000, 1, 1, 0, 0, 0, 0, time.UTC), 0); !slices.Equal(got, []string{"C1000", "C3000"}) {
			t.Fatalf("due in 5000: %v", got)
		}
		if got := s.DueDeadlines(time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), 0); !slices.Equal(got, []string{"C1000", "C3000", "C9999"}) {
			t.Fatalf("due at the end of 9999: %v", got)
		}
	}
	// The timekeeper cannot commit the year-9999 deadline in 2026.
	l.refuse(timekeeperActor, CommitDeadline{Claim: "C9999"}, refuse.Conflict, "deadline")

	// What the packed form cannot keep is refused, naming the field.
	r := l.refuse(maintainer, Create{Claim: "Cfine", Respondent: parser, Work: "w", Slots: parserSlots(),
		Deadline: time.Date(9999, 1, 1, 0, 0, 0, 100, time.UTC)}, refuse.Invalid, "deadline")
	if !strings.Contains(r.Rule, "kept to the microsecond") {
		t.Fatalf("refusal %v", r)
	}
	if _, err := Decode([]byte(`{"ts":"2026-09-01T17:00:00Z","type":"claim.create","claim":"C","claimant":"m","respondent":"p","work":"w","deadline":"0001-01-01T00:00:00Z","slots":[]}`)); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Fatalf("decode of a zero deadline: %v", err)
	}
}
