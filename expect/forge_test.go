package expect

import (
	"testing"
	"time"
)

// A lapse record appended by anyone but the identity it names (an import
// with no appender, or an agent writing in the timekeeper's name) is kept
// in the log but never folded; the timekeeper's own record is.
func TestLapseFoldedOnlyFromItsAuthenticatedTimekeeper(t *testing.T) {
	t0 := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	h := newHarness(t)
	h.do("agent", false, t0, RaiseCommand{Raise: Raise{ExpectationID: "e1", Kind: "k", Subject: Subject{Type: "s", ID: "1"},
		FactKey: "f", DueAt: t0.Add(time.Hour), Basis: BasisDeclared}})
	now := t0.Add(2 * time.Hour)
	evs := h.s.Sweep(now, 0)
	if len(evs) != 1 || evs[0].Lapse == nil {
		t.Fatalf("sweep %v", evs)
	}
	for _, forger := range []string{"", "agent"} {
		h.apply(forger, evs[0])
		if n := len(h.view("e1").Lapses); n != 0 {
			t.Fatalf("a lapse appended by %q was folded", forger)
		}
	}
	h.apply(timekeeper, evs[0])
	if n := len(h.view("e1").Lapses); n != 1 {
		t.Fatalf("the timekeeper's lapse folded %d times", n)
	}
	if evs := h.s.Sweep(now, 0); len(evs) != 0 {
		t.Fatalf("sweep after %v", evs)
	}
}
