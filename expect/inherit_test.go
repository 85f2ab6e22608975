package expect

import (
	"strings"
	"testing"
	"time"

	"tally/refuse"
)

// TestSupersedeInheritsTheNewPlan: an extension states only what it
// changes and the core inherits the rest; a new dueAt drops the inherited
// anchor (so a re-anchored due cannot take the time back), an anchor stated
// is kept, and a passed inherited horizon is refused. (The README's own
// `supersede exp-arrive --due …` used to keep the anchor, so its current due
// stayed where it was, and the inherited past horizon stalled it at once.)
func TestSupersedeInheritsTheNewPlan(t *testing.T) {
	h := shipmentHarness(t)
	// Departure lands 04:00: arrival's current due is re-anchored to 05:45.
	h.do("carrier", false, mustTime("2026-09-11T04:00:00Z"), fact("shipment.departed:PA-2026-0901", "2026-09-11T04:00:00Z"))
	now := mustTime("2026-09-11T12:00:00Z")

	// Only a new due: every other term is the old one's, the anchor is not.
	evs := h.do(agent, false, now, SupersedeCommand{Raise: Raise{ExpectationID: "a2", Supersedes: arrive, DueAt: mustTime("2026-09-12T05:00:00Z")}})
	got, want := evs[0].Raise, arrival()
	if got.Anchor != nil || !got.DueAt.Equal(mustTime("2026-09-12T05:00:00Z")) || got.Kind != want.Kind || got.Subject != want.Subject ||
		got.FactKey != want.FactKey || got.Grace != want.Grace || got.Basis != want.Basis || !got.Horizon.Equal(want.Horizon) ||
		got.Origin != want.Origin || len(got.After) != 1 || got.After[0] != depart || got.Expects != want.Expects {
		t.Fatalf("extension with --due: %s", evs[0].Encode())
	}
	if v := h.view("a2"); !v.CurrentDue.Equal(mustTime("2026-09-12T05:00:00Z")) {
		t.Fatalf("the new due is not the one in force: %s", jsonOf(v))
	}

	// A due and an anchor stated: the anchor is kept (and re-anchors).
	evs = h.do(agent, false, now, SupersedeCommand{Raise: Raise{ExpectationID: "a3", Supersedes: "a2", DueAt: mustTime("2026-09-12T06:00:00Z"),
		Anchor: &Anchor{ExpectationID: depart, Offset: 3 * time.Hour}}})
	if a := evs[0].Raise.Anchor; a == nil || a.Offset != 3*time.Hour {
		t.Fatalf("stated anchor: %s", evs[0].Encode())
	}
	if v := h.view("a3"); !v.CurrentDue.Equal(mustTime("2026-09-11T07:00:00Z")) {
		t.Fatalf("stated anchor re-anchors: %s", jsonOf(v))
	}

	// No due: the due and the anchor are both inherited; a zero grace
	// stated is kept, an unstated one inherited.
	evs = h.do("ops", true, now, SupersedeCommand{Raise: Raise{ExpectationID: "a4", Supersedes: "a3"}, GraceGiven: true})
	if r := evs[0].Raise; r.Anchor == nil || r.Anchor.Offset != 3*time.Hour || !r.DueAt.Equal(mustTime("2026-09-12T06:00:00Z")) || r.Grace != 0 {
		t.Fatalf("extension without --due: %s", evs[0].Encode())
	}

	// Past the inherited horizon (2026-09-13T05:00): refused, naming it.
	late := mustTime("2026-09-14T00:00:00Z")
	cmd := SupersedeCommand{Raise: Raise{ExpectationID: "a5", Supersedes: "a4", DueAt: mustTime("2026-09-15T00:00:00Z")}}
	_, err := h.s.Decide("ops", true, late, cmd)
	if r, ok := refuse.As(err); !ok || r.Code != refuse.Invalid || r.Field != "horizon" || !strings.Contains(r.Error(), "--horizon") || !strings.Contains(r.Error(), "2026-09-13T05:00:00Z") {
		t.Fatalf("passed inherited horizon: %v", err)
	}
	// A later horizon stated: accepted.
	cmd.Raise.Horizon = mustTime("2026-09-16T00:00:00Z")
	h.do("ops", true, late, cmd)
}
