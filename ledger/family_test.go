package ledger

import (
	"encoding/json"
	"testing"
	"time"

	"tally/claim"
	"tally/expect"
	"tally/family"
	"tally/promise"
)

// foldBothWays decides cmds with family a and folds each event two ways:
// into a as the event (Apply), into b as the line it is written as
// (ApplyLine of Encode's body). The two must then show the same view of
// id: the fold of a record this process just wrote and the fold of the
// same record read back from the log cannot drift apart.
func foldBothWays[C, E, V any](t *testing.T, a, b family.Interface[C, E, V], in family.Input, id string, cmds ...C) {
	t.Helper()
	var seq uint64
	for _, c := range cmds {
		evs, _, err := a.Decide(in, c)
		if err != nil {
			t.Fatalf("decide %T: %v", c, err)
		}
		if len(evs) == 0 {
			t.Fatalf("decide %T: no events", c)
		}
		for _, ev := range evs {
			seq++
			r := a.Encode(ev)
			if !b.Known(r.Type) {
				t.Fatalf("%s: the family does not know its own record type", r.Type)
			}
			m := family.Meta{Seq: seq}
			if r.Party != in.Actor {
				m.Actor = in.Actor
			}
			a.Apply(m, ev)
			if err := b.ApplyLine(m, r.Body); err != nil {
				t.Fatalf("fold %s line %s: %v", r.Type, r.Body, err)
			}
		}
	}
	va, okA := a.View(id, in.Now)
	vb, okB := b.View(id, in.Now)
	if !okA || !okB {
		t.Fatalf("view of %v: %v as events, %v as lines", id, okA, okB)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	if string(ja) != string(jb) {
		t.Fatalf("the fold of events and of lines differ:\n%s\n%s", ja, jb)
	}
	if _, ok := a.View("no-such-id", in.Now); ok {
		t.Fatal("a view of an id never recorded exists")
	}
}

func TestFamiliesFoldEventsAsTheirLines(t *testing.T) {
	cfg := testConfig(t0)
	t.Run("promise", func(t *testing.T) {
		fam := func() promise.Family { return promise.Family{S: promise.NewState(), Limits: cfg.Limits} }
		in := family.Input{Actor: "d", Now: t0}
		foldBothWays(t, fam(), fam(), in, "p1",
			promise.Command(declare("p1", "d")),
			promise.Command(promise.Amend{ID: "p1", Until: t0.Add(48 * time.Hour)}))
	})
	t.Run("claim", func(t *testing.T) {
		fam := func() claim.Family {
			return claim.Family{S: claim.NewStateConfig(claim.Config{Timekeeper: cfg.Timekeeper})}
		}
		in := family.Input{Actor: "boss", Now: t0}
		foldBothWays(t, fam(), fam(), in, "C1", claim.Command(claimCreate("C1")), claim.Command(claim.Post{Claim: "C1"}))
	})
	t.Run("expect", func(t *testing.T) {
		fam := func() expect.Family { return expect.Family{S: expect.NewState(cfg.expectConfig())} }
		in := family.Input{Actor: "agent", Now: t0}
		raise := expect.Raise{ExpectationID: "arrive", Kind: "shipment", Subject: expect.Subject{Type: "shipment", ID: "S1"},
			FactKey: "shipment.arrived", DueAt: t0.Add(time.Hour), Basis: "declared"}
		foldBothWays(t, fam(), fam(), in, "arrive", expect.Command(expect.RaiseCommand{Raise: raise}))
	})
}
