package claim

import (
	"fmt"
	"testing"

	"tally/digest"
)

// The verdict that makes a claim with no dependents Satisfied allocates only
// what it returns or keeps: the record, the result it adds to the attempt,
// the claim's end and its time, the slot's witness. No preview clone, no
// per-verdict maps (issue 3's acceptance figure).
func TestVerdictAllocations(t *testing.T) {
	l := newLedger(t)
	slots := []SlotSpec{slot("change", Required, check("tests", maintainer, Required))}
	const n = 120
	ids := make([]string, n)
	for i := range ids {
		id := fmt.Sprint("X", i)
		ids[i] = id
		l.do(maintainer, Create{Claim: id, Respondent: parser, Work: "w", Slots: slots})
		l.do(maintainer, Post{Claim: id})
		l.do(parser, AcquireReceipt{Claim: id})
		l.do(parser, PublishArtifact{Claim: id, Artifact: "A", Role: RoleOutput, Slot: "change", Kind: "patch", Generation: 1, Content: digest.HashContent([]byte(id))})
		l.do(parser, CloseTestament{Claim: id, Testament: "T1", Generation: 1, Outcome: Complete, Summary: "s", Bindings: []Binding{{Slot: "change", Artifact: "A"}}})
		l.do(parser, PostTestament{Claim: id, Testament: "T1"})
		l.do(maintainer, ReceiveTestament{Claim: id, Testament: "T1"})
		l.do(maintainer, PublishArtifact{Claim: id, Artifact: "E", Role: RoleResult, Kind: "log", Content: digest.HashContent([]byte("e"))})
		l.do(maintainer, BeginCheck{Claim: id, Check: "tests", Artifact: "A"})
	}
	k := 0
	allocs := testing.AllocsPerRun(n-1, func() {
		evs, err := l.s.Decide(maintainer, t0, ReportVerdict{Claim: ids[k], Check: "tests", Artifact: "A", Result: Pass, Evidence: "E"})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			l.seq++
			l.s.Apply(Meta{Seq: l.seq, Actor: maintainer, TS: t0}, e)
		}
		k++
	})
	if allocs > 5 {
		t.Errorf("%v allocations per verdict, want ≤ 5", allocs)
	}
	for _, id := range ids[:k] {
		if st := l.s.claims[id].status(); st != Satisfied {
			t.Fatalf("%s: %s", id, st)
		}
	}
}

// Small claims look slots and checks up by scanning their terms, large ones
// through maps: both answer alike.
func TestSlotAndCheckLookup(t *testing.T) {
	for _, shape := range [][2]int{{1, 1}, {5, 3}, {4, 4}, {3, 6}, {64, 2}} {
		var slots []SlotSpec
		for i := 0; i < shape[0]; i++ {
			var checks []CheckSpec
			for j := 0; j < shape[1]; j++ {
				checks = append(checks, check(fmt.Sprintf("c%d.%d", i, j), maintainer, Required))
			}
			slots = append(slots, slot(fmt.Sprintf("s%d", i), Required, checks...))
		}
		c := newClaimRec(Meta{Seq: 1, TS: t0}, &Event{Type: TypeCreate, Claim: "C", Slots: slots})
		if indexed := c.checkIdx != nil; indexed != (shape[0]*shape[1] > indexedTerms) {
			t.Fatalf("%v: indexed %v", shape, indexed)
		}
		for i, sl := range slots {
			if got := c.slotIndex(sl.Name); got != i {
				t.Fatalf("%v: slot %s at %d, want %d", shape, sl.Name, got, i)
			}
			for j, ch := range sl.Checks {
				gs, gc, ok := c.check(ch.ID)
				if !ok || gs != &c.terms.Slots[i] || gc != &c.terms.Slots[i].Checks[j] {
					t.Fatalf("%v: check %s not found at (%d, %d)", shape, ch.ID, i, j)
				}
			}
		}
		if c.slotIndex("nope") != -1 {
			t.Fatalf("%v: unknown slot found", shape)
		}
		if _, _, ok := c.check("nope"); ok {
			t.Fatalf("%v: unknown check found", shape)
		}
	}
}
