package claim

import (
	"reflect"
	"testing"
)

// whyTexts is the texts of a claim's reasons, in order.
func (l *ledger) whyTexts(id string) []string {
	l.t.Helper()
	out := []string{}
	for _, r := range l.view(id).Why {
		out = append(out, r.Text)
	}
	return out
}

func (l *ledger) wantWhy(id string, want ...string) {
	l.t.Helper()
	if want == nil {
		want = []string{}
	}
	if got := l.whyTexts(id); !reflect.DeepEqual(got, want) {
		l.t.Fatalf("why of %s:\n got %q\nwant %q", id, got, want)
	}
}

// The seed's parser story, explained: the tests passed on one patch and the
// review on the other, so each candidate lacks the other's check.
func TestWhyNamesWhatEachCandidateLacks(t *testing.T) {
	l := newLedger(t)
	l.do(maintainer, Create{Claim: "C17", Respondent: parser, Work: "w", Slots: parserSlots()})
	l.wantWhy("C17", "the claim is not posted yet (claimant maintainer)",
		"slot change: no received response delivers it yet")
	l.do(maintainer, Post{Claim: "C17"})
	l.wantWhy("C17", "the respondent parser has not acquired the execution receipt",
		"slot change: no received response delivers it yet")
	l.do(parser, AcquireReceipt{Claim: "C17"})
	l.wantWhy("C17", "no closing testament from parser yet (work cycle 1 of 4)",
		"slot change: no received response delivers it yet")
	l.publish("C17", "patch-a", "change", 1)
	l.do(parser, CloseTestament{Claim: "C17", Testament: "T1", Generation: 1, Outcome: Complete, Summary: "a",
		Bindings: []Binding{{Slot: "change", Artifact: "patch-a"}}})
	l.wantWhy("C17", "testament T1 is closed but not posted", "slot change: no received response delivers it yet")
	l.do(parser, PostTestament{Claim: "C17", Testament: "T1"})
	l.wantWhy("C17", "testament T1 is posted; the claimant maintainer has not received it",
		"slot change: no received response delivers it yet")
	l.do(maintainer, ReceiveTestament{Claim: "C17", Testament: "T1"})
	l.wantWhy("C17", "slot change: patch-a: behavior missing, review missing")
	l.publish("C17", "patch-b", "change", 1)
	l.respond("C17", "T2", 1, map[string]string{"change": "patch-b"})

	l.verdict(maintainer, "C17", "behavior", "patch-a", Pass)
	l.do(maintainer, BeginCheck{Claim: "C17", Check: "review", Artifact: "patch-b"})
	l.wantWhy("C17", "slot change: patch-a: behavior pass, review missing; patch-b: behavior missing, review running")
	l.verdict(maintainer, "C17", "review", "patch-b", Pass)
	l.wantWhy("C17", "slot change: patch-a: behavior pass, review missing; patch-b: review pass, behavior missing")

	v := l.view("C17")
	want := Reason{Kind: ReasonSlot, Name: "change", Text: "slot change: patch-a: behavior pass, review missing; patch-b: review pass, behavior missing",
		Targets: []TargetState{
			{Artifact: "patch-a", Digest: v.Artifacts[0].Digest, Testament: "T1", Checks: []CheckState{{"behavior", "pass"}, {"review", "missing"}}},
			{Artifact: "patch-b", Digest: v.Artifacts[1].Digest, Testament: "T2", Checks: []CheckState{{"review", "pass"}, {"behavior", "missing"}}},
		}}
	if len(v.Why) != 1 || !reflect.DeepEqual(v.Why[0], want) {
		t.Fatalf("why %+v\nwant %+v", v.Why, want)
	}
	if got := WhyText(v.Why); got != want.Text {
		t.Fatalf("WhyText %q", got)
	}

	l.verdict(maintainer, "C17", "review", "patch-a", Pass)
	l.expect("C17", Satisfied)
	l.wantWhy("C17")
}

// A claim that ended unsatisfied says how, and what it lacked at the end:
// a verdict kept for the audit afterwards does not change that.
func TestWhyOfAnEndedClaimIsAsOfItsEnd(t *testing.T) {
	l := newLedger(t)
	l.twoCandidates("C1")
	l.verdict(maintainer, "C1", "behavior", "A", Pass)
	l.verdict(maintainer, "C1", "behavior", "B", Pass)
	l.do(maintainer, BeginCheck{Claim: "C1", Check: "review", Artifact: "B"})
	l.verdict(maintainer, "C1", "review", "A", Fail)
	l.expect("C1", ValidationFailed)
	ended := []string{"ValidationFailed: check review failed on A",
		"slot change: A: behavior pass, review fail; B: behavior pass, review running"}
	l.wantWhy("C1", ended...)
	ev := l.evidence(maintainer, "C1")
	l.do(maintainer, ReportVerdict{Claim: "C1", Check: "review", Artifact: "B", Result: Pass, Evidence: ev})
	l.wantWhy("C1", ended...)
}

// Each dependency says what it waits on, down the chain to the claim that
// lacks something itself; a cycle back to the claim is named as one.
func TestWhyFollowsDependencies(t *testing.T) {
	l := newLedger(t)
	one := []SlotSpec{slot("change", Required, check("behavior", maintainer, Required))}
	// C1 ⇄ C2 on depends_on; both delivered and passed locally.
	for _, id := range []string{"C1", "C2"} {
		other := map[string]string{"C1": "C2", "C2": "C1"}[id]
		l.open(id, one, func(c *Create) { c.DependsOn = []string{other} })
		l.publish(id, "A", "change", 1)
		l.respond(id, "T1", 1, map[string]string{"change": "A"})
		l.verdict(maintainer, id, "behavior", "A", Pass)
	}
	l.expect("C1", Validating)
	l.wantWhy("C1", "waits on C2, which waits on this claim")
	if r := l.view("C1").Why[0]; r.Kind != ReasonDependsOn || r.Name != "C2" || !reflect.DeepEqual(r.Chain, []string{"C2", "C1"}) {
		t.Fatalf("reason %+v", r)
	}

	// C3 → C4 → C5: C4 passed locally and waits on C5, which is only posted;
	// C3 also awaits a claim the ledger does not hold.
	l.do(maintainer, Create{Claim: "C5", Respondent: parser, Work: "w", Slots: one})
	l.do(maintainer, Post{Claim: "C5"})
	l.open("C4", one, func(c *Create) { c.DependsOn = []string{"C5"} })
	l.publish("C4", "A", "change", 1)
	l.respond("C4", "T1", 1, map[string]string{"change": "A"})
	l.verdict(maintainer, "C4", "behavior", "A", Pass)
	l.open("C3", one, func(c *Create) { c.DependsOn = []string{"C4"}; c.Awaits = []string{"C9"} })
	l.wantWhy("C3", "no closing testament from parser yet (work cycle 1 of 4)",
		"slot change: no received response delivers it yet",
		"waits on C4, which waits on C5 (Posted): the respondent parser has not acquired the execution receipt",
		"waits on C9, which the ledger does not hold")
	if r := l.view("C3").Why[3]; r.Kind != ReasonAwaits || r.Name != "C9" || !reflect.DeepEqual(r.Chain, []string{"C9"}) {
		t.Fatalf("reason %+v", r)
	}

	// A cycle below the claim, not through it.
	l.open("C6", one, func(c *Create) { c.DependsOn = []string{"C1"} })
	l.wantWhy("C6", "no closing testament from parser yet (work cycle 1 of 4)",
		"slot change: no received response delivers it yet",
		"waits on C1, which waits on C2, which waits on C1 (a cycle)")
}
