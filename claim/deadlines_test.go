package claim

import (
	"slices"
	"testing"
	"time"
)

func TestDueDeadlines(t *testing.T) {
	l := newLedger(t)
	dl := func(d time.Duration) func(*Create) { return func(c *Create) { c.Deadline = t0.Add(d) } }
	l.open("C1", parserSlots(), dl(2*time.Hour))
	l.open("C2", parserSlots(), dl(time.Hour))
	l.open("C3", parserSlots()) // no deadline
	l.open("C4", parserSlots(), dl(time.Hour))
	l.open("C5", parserSlots(), dl(3*time.Hour))

	if got := l.s.DueDeadlines(t0, 0); got != nil {
		t.Fatalf("due before any deadline: %v", got)
	}
	if next, ok := l.s.NextDeadline(); !ok || !next.Equal(t0.Add(time.Hour)) {
		t.Fatalf("next %v %v", next, ok)
	}
	if got := l.s.DueDeadlines(t0.Add(90*time.Minute), 0); !slices.Equal(got, []string{"C2", "C4"}) {
		t.Fatalf("due at +90m: %v", got)
	}
	if got := l.s.DueDeadlines(t0.Add(5*time.Hour), 2); !slices.Equal(got, []string{"C2", "C4"}) {
		t.Fatalf("due at +5h, max 2: %v", got)
	}

	// A committed fact, or any other end, removes a claim from the index.
	l.now = t0.Add(90 * time.Minute)
	l.do(timekeeperActor, CommitDeadline{Claim: "C2"})
	l.expect("C2", Expired)
	l.do(maintainer, Cancel{Claim: "C4", Reason: "dropped"})
	if got := l.s.DueDeadlines(t0.Add(5*time.Hour), 0); !slices.Equal(got, []string{"C1", "C5"}) {
		t.Fatalf("due after facts: %v", got)
	}
	// A replayed log gives the same answer.
	if got := l.replay().DueDeadlines(t0.Add(5*time.Hour), 0); !slices.Equal(got, []string{"C1", "C5"}) {
		t.Fatalf("replayed: %v", got)
	}
	// Satisfied claims leave too.
	l.publish("C1", "a", "change", 1)
	l.respond("C1", "T1", 1, map[string]string{"change": "a"})
	l.verdict(maintainer, "C1", "behavior", "a", Pass)
	l.verdict(maintainer, "C1", "review", "a", Pass)
	l.expect("C1", Satisfied)
	if got := l.s.DueDeadlines(t0.Add(5*time.Hour), 0); !slices.Equal(got, []string{"C5"}) {
		t.Fatalf("due after satisfaction: %v", got)
	}
	if a, ok := l.s.Artifact("C1", "a"); !ok || a.Slot != "change" || a.Digest == "" {
		t.Fatalf("artifact lookup: %+v %v", a, ok)
	}
	if _, ok := l.s.Artifact("C1", "nope"); ok {
		t.Fatal("found an unknown artifact")
	}
}
