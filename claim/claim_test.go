package claim

import (
	"cmp"
	"reflect"
	"strings"
	"testing"
	"time"

	"tally/digest"
	"tally/refuse"
)

// The seed's parser story: tests pass on patch A, review passes on patch B:
// not satisfied. A failing review: ValidationFailed. Successor C18 with patch
// B passing both: Satisfied, while C17 keeps its failure, patch and review.
func TestParserStory(t *testing.T) {
	l := newLedger(t)
	l.open("C17", parserSlots())
	l.expect("C17", Received)
	l.do(parser, Progress{Claim: "C17", Generation: 1, Note: "found the faulty branch"})
	l.expect("C17", Progressed)

	l.publish("C17", "patch-a", "change", 1)
	l.respond("C17", "T1", 1, map[string]string{"change": "patch-a"})
	l.expect("C17", TestamentAcknowledged)
	l.publish("C17", "patch-b", "change", 1)
	l.respond("C17", "T2", 1, map[string]string{"change": "patch-b"})

	l.verdict(maintainer, "C17", "behavior", "patch-a", Pass)
	l.verdict(maintainer, "C17", "review", "patch-b", Pass)
	l.expect("C17", Validating)
	v := l.view("C17")
	if v.Slots[0].Witness != nil || v.LocalSuccess {
		t.Fatalf("tests on A and review on B made a witness: %+v", v.Slots[0])
	}
	if v.Slots[0].Status != "evaluating" || v.Delivery.State != "passed" {
		t.Fatalf("slot %s, delivery %s", v.Slots[0].Status, v.Delivery.State)
	}

	// The review of A finds an unchecked read.
	l.verdict(maintainer, "C17", "review", "patch-a", Fail)
	l.expect("C17", ValidationFailed)
	v = l.view("C17")
	if v.Terminal.Check != "review" || v.Terminal.Artifact != "patch-a" || v.Terminal.Slot != "change" {
		t.Fatalf("terminal %+v", v.Terminal)
	}

	// More work on C17 is refused: the failure is committed.
	l.refuse(parser, PublishArtifact{Claim: "C17", Artifact: "patch-c", Role: RoleOutput, Slot: "change", Kind: "patch",
		Generation: 1, Content: digest.HashContent([]byte("c"))}, refuse.Conflict, "claim")

	// The successor.
	l.open("C18", parserSlots(), func(c *Create) { c.Predecessor = "C17" })
	l.publish("C18", "patch-b", "change", 1)
	l.respond("C18", "T1", 1, map[string]string{"change": "patch-b"})
	l.verdict(maintainer, "C18", "behavior", "patch-b", Pass)
	l.expect("C18", Validating)
	l.verdict(maintainer, "C18", "review", "patch-b", Pass)
	l.expect("C18", Satisfied)
	w := l.view("C18").Slots[0].Witness
	if w == nil || w.Artifact != "patch-b" || len(w.Results) != 2 {
		t.Fatalf("C18 witness %+v", w)
	}

	l.expect("C17", ValidationFailed)
	v = l.view("C17")
	if len(v.Successors) != 1 || v.Successors[0] != "C18" {
		t.Fatalf("C17 successors %v", v.Successors)
	}
	if len(v.Artifacts) < 2 || v.Artifacts[0].Artifact != "patch-a" {
		t.Fatalf("C17 lost its patch: %+v", v.Artifacts)
	}
	var review *CheckView
	for i := range v.Slots[0].Checks {
		if v.Slots[0].Checks[i].ID == "review" {
			review = &v.Slots[0].Checks[i]
		}
	}
	if review == nil || len(review.Targets) != 2 || review.Targets[1].State != "failed" {
		t.Fatalf("C17 lost its review: %+v", review)
	}
	if got := l.replay(); allViews(got, l.now) != allViews(l.s, l.now) {
		t.Fatal("replay differs")
	}
}

func TestComplementaryChecksOnTwoArtifactsNeverMakeASlotPass(t *testing.T) {
	l := newLedger(t)
	l.twoCandidates("C1")
	l.verdict(maintainer, "C1", "behavior", "A", Pass)
	l.verdict(maintainer, "C1", "review", "B", Pass)
	if v := l.view("C1"); v.LocalSuccess || v.Slots[0].Witness != nil || v.State.Terminal() {
		t.Fatalf("complementary passes made a witness: %s", v.State)
	}
	// Completing either artifact makes it the witness.
	l.verdict(maintainer, "C1", "review", "A", Pass)
	l.expect("C1", Satisfied)
	if w := l.view("C1").Slots[0].Witness; w.Artifact != "A" {
		t.Fatalf("witness %s", w.Artifact)
	}
}

// Two artifacts with the same bytes and description still differ by id: the
// checks of one never count for the other; a digest that does not match the
// artifact's is refused.
func TestChecksAccumulateOnlyOnSameIDAndDigest(t *testing.T) {
	l := newLedger(t)
	l.open("C1", parserSlots())
	content := digest.HashContent([]byte("same bytes"))
	for _, id := range []string{"A1", "A2"} {
		l.do(parser, PublishArtifact{Claim: "C1", Artifact: id, Role: RoleOutput, Slot: "change", Kind: "patch", Generation: 1, Content: content, Size: 10})
	}
	a1, a2 := l.s.claims["C1"].artifacts["A1"], l.s.claims["C1"].artifacts["A2"]
	if a1.digest != a2.digest {
		t.Fatal("same description and content should give the same digest (the id is outside it)")
	}
	l.respond("C1", "T1", 1, map[string]string{"change": "A1"})
	l.respond("C1", "T2", 1, map[string]string{"change": "A2"})
	l.verdict(maintainer, "C1", "behavior", "A1", Pass)
	l.verdict(maintainer, "C1", "review", "A2", Pass)
	if l.view("C1").LocalSuccess {
		t.Fatal("checks on A1 and A2 added up")
	}
	ev := l.evidence(maintainer, "C1")
	wrong := strings.Repeat("0", 64)
	l.refuse(maintainer, BeginCheck{Claim: "C1", Check: "review", Artifact: "A1", Digest: wrong}, refuse.Conflict, "artifact")
	l.refuse(maintainer, ReportVerdict{Claim: "C1", Check: "review", Artifact: "A1", Digest: wrong, Result: Pass, Evidence: ev}, refuse.Conflict, "artifact")
	// An artifact not bound in any received response cannot be evaluated.
	l.publish("C1", "A3", "change", 1)
	l.refuse(maintainer, BeginCheck{Claim: "C1", Check: "review", Artifact: "A3"}, refuse.Conflict, "artifact")
}

func TestLaterAlternativeNeverHealsCommittedFailure(t *testing.T) {
	l := newLedger(t)
	l.open("C1", parserSlots())
	l.publish("C1", "A", "change", 1)
	l.respond("C1", "T1", 1, map[string]string{"change": "A"})
	l.publish("C1", "B", "change", 1)
	l.do(parser, CloseTestament{Claim: "C1", Testament: "T2", Generation: 1, Outcome: Complete, Summary: "B",
		Bindings: []Binding{{Slot: "change", Artifact: "B"}}})
	l.do(parser, PostTestament{Claim: "C1", Testament: "T2"})
	// Begin behavior on A, then fail review on A: terminal.
	l.do(maintainer, BeginCheck{Claim: "C1", Check: "behavior", Artifact: "A"})
	l.verdict(maintainer, "C1", "review", "A", Fail)
	l.expect("C1", ValidationFailed)
	// The posted alternative can no longer be received, evaluated or extended.
	l.refuse(maintainer, ReceiveTestament{Claim: "C1", Testament: "T2"}, refuse.Conflict, "claim")
	l.refuse(maintainer, BeginCheck{Claim: "C1", Check: "review", Artifact: "B"}, refuse.Conflict, "claim")
	// The check already running may finish for the audit; nothing changes.
	ev := l.evidence(maintainer, "C1")
	l.do(maintainer, ReportVerdict{Claim: "C1", Check: "behavior", Artifact: "A", Result: Pass, Evidence: ev})
	l.expect("C1", ValidationFailed)
	v := l.view("C1")
	if len(v.Late) == 0 || !v.Slots[0].Checks[0].Targets[0].Results[0].Late {
		t.Fatalf("late result not kept for audit: %+v", v.Late)
	}
}

// A valid artifact from one response covers its slot even though another
// response failed; different slots may have witnesses from different cycles.
func TestAlternativesAcrossCycles(t *testing.T) {
	l := newLedger(t)
	slots := []SlotSpec{
		slot("code", Required, check("tests", maintainer, Required)),
		slot("docs", Required, check("proofread", maintainer, Required)),
	}
	l.open("C1", slots)
	l.publish("C1", "code1", "code", 1)
	l.publish("C1", "docs1", "docs", 1)
	l.respond("C1", "T1", 1, map[string]string{"code": "code1", "docs": "docs1"})
	l.publish("C1", "code2", "code", 1)
	l.publish("C1", "docs2", "docs", 1)
	l.respond("C1", "T2", 1, map[string]string{"code": "code2", "docs": "docs2"})
	l.verdict(maintainer, "C1", "tests", "code2", Pass)
	l.verdict(maintainer, "C1", "tests", "code1", Fail) // covered by code2: no failure
	l.expect("C1", Validating)
	l.verdict(maintainer, "C1", "proofread", "docs1", Pass)
	l.expect("C1", Satisfied)
	v := l.view("C1")
	if v.Slots[0].Witness.Testament != "T2" || v.Slots[1].Witness.Testament != "T1" {
		t.Fatalf("witnesses %+v %+v", v.Slots[0].Witness, v.Slots[1].Witness)
	}
}

func TestOnlyErrorAdvancesAttemptsAndFallbacks(t *testing.T) {
	l := newLedger(t)
	ch := check("bench", maintainer, Required)
	ch.Attempts = 2
	ch.Fallbacks = []Validator{{Name: "bench-lite", Version: "3"}}
	other := check("lint", maintainer, Required)
	other.Attempts = 3
	l.open("C1", []SlotSpec{slot("code", Required, ch), slot("style", Required, other)})
	l.publish("C1", "A", "code", 1)
	l.publish("C1", "S", "style", 1)
	l.respond("C1", "T1", 1, map[string]string{"code": "A", "style": "S"})

	att := func(chk, art string) AttemptView {
		for _, sl := range l.view("C1").Slots {
			for _, c := range sl.Checks {
				if c.ID == chk {
					for _, tg := range c.Targets {
						if tg.Artifact == art {
							return tg
						}
					}
				}
			}
		}
		t.Fatalf("no attempt %s on %s", chk, art)
		return AttemptView{}
	}
	evs := l.verdict(maintainer, "C1", "bench", "A", Error)
	if evs[0].Attempt != 1 || evs[0].Handler != 0 {
		t.Fatalf("first attempt %+v", evs[0])
	}
	evs = l.verdict(maintainer, "C1", "bench", "A", Error)
	if evs[0].Attempt != 2 || evs[0].Handler != 0 {
		t.Fatalf("second attempt %+v", evs[0])
	}
	// Attempts exhausted: the fallback runs against the same pinned target.
	a := att("bench", "A")
	if a.Handler != 1 || a.Validator.Name != "bench-lite" || a.State != "pending" {
		t.Fatalf("after two errors %+v", a)
	}
	evs = l.verdict(maintainer, "C1", "bench", "A", Error)
	if evs[0].Handler != 1 || evs[0].Validator.Name != "bench-lite" || evs[0].Attempt != 1 {
		t.Fatalf("fallback attempt %+v", evs[0])
	}
	l.expect("C1", Validating)
	// A verdict must follow the state: a forged attempt number is refused.
	l.append(maintainer, Event{TS: l.now, Type: TypeCheckBegin, Claim: "C1", Check: "bench", Artifact: "A",
		Digest: evs[0].Digest, Phase: "programmatic", Handler: 0, Validator: ch.Validator, Attempt: 3})
	if _, n := l.s.Ignored(); n != 1 {
		t.Fatalf("forged begin not ignored (%d)", n)
	}
	l.verdict(maintainer, "C1", "bench", "A", Error)
	l.expect("C1", ValidationErrored)
	if tm := l.view("C1").Terminal; tm.Check != "bench" || tm.Slot != "code" {
		t.Fatalf("terminal %+v", tm)
	}

	// Fail is conclusive even with attempts left.
	l2 := newLedger(t)
	l2.open("C2", []SlotSpec{slot("style", Required, other, check("spell", maintainer, Required))})
	l2.publish("C2", "S", "style", 1)
	l2.respond("C2", "T1", 1, map[string]string{"style": "S"})
	l2.verdict(maintainer, "C2", "spell", "S", Error) // attempts 1, no fallback: errored
	l2.expect("C2", ValidationErrored)
	l3 := newLedger(t)
	l3.open("C3", []SlotSpec{slot("style", Required, other)})
	l3.publish("C3", "S", "style", 1)
	l3.respond("C3", "T1", 1, map[string]string{"style": "S"})
	l3.verdict(maintainer, "C3", "lint", "S", Incomplete)
	l3.expect("C3", ValidationIncomplete)
	l3.refuse(maintainer, BeginCheck{Claim: "C3", Check: "lint", Artifact: "S"}, refuse.Conflict, "claim")
}

func TestFailIsConclusiveWithAttemptsLeft(t *testing.T) {
	l := newLedger(t)
	ch := check("lint", maintainer, Observe)
	ch.Attempts = 5
	l.open("C1", []SlotSpec{slot("code", Required, ch, check("tests", maintainer, Required))})
	l.publish("C1", "A", "code", 1)
	l.respond("C1", "T1", 1, map[string]string{"code": "A"})
	l.verdict(maintainer, "C1", "lint", "A", Fail)
	l.refuse(maintainer, BeginCheck{Claim: "C1", Check: "lint", Artifact: "A"}, refuse.Conflict, "check")
}

func TestStaleReceiptGenerationRefused(t *testing.T) {
	l := newLedger(t)
	l.open("C1", parserSlots())
	l.refuse(parser, Adopt{Claim: "C1", Holder: "rescuer"}, refuse.Forbidden, "actor")
	l.do(maintainer, Adopt{Claim: "C1", Holder: "rescuer", Reason: "parser stopped answering"})
	if r := l.view("C1").Receipt; r.Holder != "rescuer" || r.Generation != 2 {
		t.Fatalf("receipt %+v", r)
	}
	l.refuse(parser, Progress{Claim: "C1", Generation: 1, Note: "still here"}, refuse.Conflict, "generation")
	l.refuse(parser, Progress{Claim: "C1", Generation: 2, Note: "still here"}, refuse.Forbidden, "actor")
	l.refuse(parser, PublishArtifact{Claim: "C1", Artifact: "A", Role: RoleOutput, Slot: "change", Kind: "patch",
		Generation: 1, Content: digest.HashContent([]byte("a"))}, refuse.Conflict, "generation")
	l.do("rescuer", Progress{Claim: "C1", Generation: 2, Note: "took over"})
	// A stale write appended by another tool is ignored by the fold.
	l.append(parser, Event{TS: l.now, Type: TypeProgress, Claim: "C1", Generation: 1, Note: "late"})
	if ig, n := l.s.Ignored(); n != 1 || ig[0].Code != "conflict" {
		t.Fatalf("ignored %v", ig)
	}
	if got := len(l.view("C1").Progress); got != 1 {
		t.Fatalf("stale progress applied: %d notes", got)
	}
	// A testament closed under generation 1 cannot be posted after adoption.
	l2 := newLedger(t)
	l2.open("C2", parserSlots())
	l2.publish("C2", "A", "change", 1)
	l2.do(parser, CloseTestament{Claim: "C2", Testament: "T1", Generation: 1, Outcome: Complete, Summary: "A", Bindings: []Binding{{Slot: "change", Artifact: "A"}}})
	l2.do(maintainer, Adopt{Claim: "C2", Holder: "rescuer"})
	l2.refuse(parser, PostTestament{Claim: "C2", Testament: "T1"}, refuse.Conflict, "generation")
	// Only the respondent takes the first receipt.
	l3 := newLedger(t)
	l3.do(maintainer, Create{Claim: "C3", Respondent: parser, Work: "w", Slots: parserSlots()})
	l3.refuse(parser, AcquireReceipt{Claim: "C3"}, refuse.Conflict, "claim") // not posted
	l3.do(maintainer, Post{Claim: "C3"})
	l3.refuse("someone", AcquireReceipt{Claim: "C3"}, refuse.Forbidden, "actor")
}

func TestWrongEvaluatorRefused(t *testing.T) {
	l := newLedger(t)
	slots := []SlotSpec{slot("change", Required, check("behavior", maintainer, Required), check("review", reviewer, Required, Quality))}
	l.open("C1", slots)
	l.publish("C1", "A", "change", 1)
	l.respond("C1", "T1", 1, map[string]string{"change": "A"})
	ev := l.evidence(maintainer, "C1")
	l.refuse(maintainer, ReportVerdict{Claim: "C1", Check: "review", Artifact: "A", Result: Pass, Evidence: ev}, refuse.Forbidden, "actor")
	l.refuse(parser, BeginCheck{Claim: "C1", Check: "behavior", Artifact: "A"}, refuse.Forbidden, "actor")
	// Someone else's evidence is refused too.
	l.refuse(reviewer, ReportVerdict{Claim: "C1", Check: "review", Artifact: "A", Result: Pass, Evidence: ev}, refuse.Forbidden, "evidence")
	// A verdict from the wrong evaluator written by another tool is ignored.
	begin, _ := l.s.Decide(reviewer, l.now, BeginCheck{Claim: "C1", Check: "review", Artifact: "A"})
	l.append(reviewer, begin[0])
	forged := begin[0]
	forged.Type, forged.Result, forged.Evidence, forged.EvidenceHash = TypeCheckVerdict, string(Pass), ev, l.s.claims["C1"].artifacts[ev].digest
	l.append(maintainer, forged)
	if _, n := l.s.Ignored(); n != 1 {
		t.Fatalf("forged verdict not ignored")
	}
	if l.view("C1").Slots[0].Checks[1].Targets[0].State != "running" {
		t.Fatal("forged verdict applied")
	}
	// Participants who are not evaluators cannot publish result artifacts.
	l.refuse(parser, PublishArtifact{Claim: "C1", Artifact: "X", Role: RoleResult, Kind: "log", Content: digest.HashContent([]byte("x"))}, refuse.Forbidden, "actor")
}

func TestArtifactDigestMustMatchDescription(t *testing.T) {
	l := newLedger(t)
	l.open("C1", parserSlots())
	evs, err := l.s.Decide(parser, l.now, PublishArtifact{Claim: "C1", Artifact: "A", Role: RoleOutput, Slot: "change", Kind: "patch", Generation: 1, Content: digest.HashContent([]byte("a")), Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	e := evs[0]
	e.Size = 2 // the description changed; the digest did not
	l.append(parser, e)
	if ig, n := l.s.Ignored(); n != 1 || !strings.Contains(ig[0].Reason, "digest") {
		t.Fatalf("ignored %v", ig)
	}
	// Another producer claiming the same digest is refused: the producer is digested.
	e = evs[0]
	l.append("impostor", e)
	if _, n := l.s.Ignored(); n != 2 {
		t.Fatal("artifact by another producer with the holder's digest accepted")
	}
}

func TestPhasesInOrder(t *testing.T) {
	l := newLedger(t)
	l.open("C1", []SlotSpec{slot("report", Required,
		check("research", reviewer, Required, Programmatic, Quality),
		check("taste", reviewer, Required, Quality))})
	l.publish("C1", "R", "report", 1)
	l.respond("C1", "T1", 1, map[string]string{"report": "R"})
	digest := l.s.claims["C1"].artifacts["R"].digest
	// A quality begin before the programmatic pass is refused.
	l.append(reviewer, Event{TS: l.now, Type: TypeCheckBegin, Claim: "C1", Check: "research", Artifact: "R", Digest: digest,
		Phase: "quality", Validator: Validator{Name: "research-validator", Version: "1"}, Attempt: 1})
	if _, n := l.s.Ignored(); n != 1 {
		t.Fatal("quality phase began before the programmatic pass")
	}
	evs := l.verdict(reviewer, "C1", "research", "R", Pass)
	if evs[0].Phase != "programmatic" {
		t.Fatalf("first phase %s", evs[0].Phase)
	}
	l.expect("C1", Validating)
	evs = l.verdict(reviewer, "C1", "research", "R", Pass)
	if evs[0].Phase != "quality" {
		t.Fatalf("second phase %s", evs[0].Phase)
	}
	// The agentic-only check starts in quality.
	evs = l.verdict(reviewer, "C1", "taste", "R", Pass)
	if evs[0].Phase != "quality" {
		t.Fatalf("agentic-only phase %s", evs[0].Phase)
	}
	l.expect("C1", Satisfied)
}

func TestObserveNeverBlocks(t *testing.T) {
	l := newLedger(t)
	slots := []SlotSpec{
		slot("change", Required, check("tests", maintainer, Required), check("throughput", maintainer, Observe)),
		slot("notes", Observe, check("tone", maintainer, Required)),
	}
	l.open("C1", slots)
	l.publish("C1", "A", "change", 1)
	l.respond("C1", "T1", 1, map[string]string{"change": "A"}) // the Observe slot is missing: no cause
	l.expect("C1", TestamentAcknowledged)
	l.verdict(maintainer, "C1", "throughput", "A", Fail)
	l.expect("C1", Validating)
	l.verdict(maintainer, "C1", "tests", "A", Pass)
	l.expect("C1", Satisfied)
	// An Observe check may still run after acceptance, for the record.
	l2 := newLedger(t)
	l2.open("C2", slots[:1])
	l2.publish("C2", "A", "change", 1)
	l2.respond("C2", "T1", 1, map[string]string{"change": "A"})
	l2.verdict(maintainer, "C2", "tests", "A", Pass)
	l2.expect("C2", Satisfied)
	l2.verdict(maintainer, "C2", "throughput", "A", Error)
	l2.expect("C2", Satisfied)
}

func TestMissingRequiredSlotIsIncompleteByDeclarationIndex(t *testing.T) {
	l := newLedger(t)
	slots := []SlotSpec{
		slot("first", Required, check("c1", maintainer, Required)),
		slot("second", Required, check("c2", maintainer, Required)),
		slot("third", Required, check("c3", maintainer, Required)),
	}
	l.open("C1", slots)
	l.publish("C1", "X", "first", 1)
	l.respond("C1", "T1", 1, map[string]string{"first": "X"})
	l.expect("C1", ValidationIncomplete)
	if tm := l.view("C1").Terminal; tm.Slot != "second" || tm.Testament != "T1" {
		t.Fatalf("terminal %+v", tm)
	}
	// Declaration order, not severity: the slot declared first decides.
	l2 := newLedger(t)
	ch := check("c1", maintainer, Required)
	l2.open("C2", []SlotSpec{slot("a", Required, ch), slot("b", Required, check("c2", maintainer, Required))})
	l2.publish("C2", "A", "a", 1)
	l2.publish("C2", "B", "b", 1)
	l2.respond("C2", "T1", 1, map[string]string{"a": "A", "b": "B"})
	l2.verdict(maintainer, "C2", "c1", "A", Error)
	l2.expect("C2", ValidationErrored)
}

func TestNonCompleteOutcomeNeedsDiagnostic(t *testing.T) {
	l := newLedger(t)
	l.open("C1", parserSlots())
	l.refuse(parser, CloseTestament{Claim: "C1", Testament: "T1", Generation: 1, Outcome: Refused, Summary: "cannot"}, refuse.Invalid, "diagnostics")
	l.publish("C1", "D", "", 1)
	l.do(parser, CloseTestament{Claim: "C1", Testament: "T1", Generation: 1, Outcome: Refused, Summary: "cannot", Diagnostics: []Ref{{Artifact: "D"}}})
	l.refuse(parser, CloseTestament{Claim: "C1", Testament: "T2", Generation: 1, Outcome: Complete, Summary: "x", Bindings: []Binding{{Slot: "change", Artifact: "D"}}}, refuse.Conflict, "bindings.artifact")
}

func TestResultEvidenceEndsAtGeneratedAndPosted(t *testing.T) {
	l := newLedger(t)
	l.open("C1", parserSlots())
	l.publish("C1", "A", "change", 1)
	l.respond("C1", "T1", 1, map[string]string{"change": "A"})
	l.verdict(maintainer, "C1", "behavior", "A", Pass)
	l.verdict(maintainer, "C1", "review", "A", Fail)
	ev := l.view("C1").Artifacts[1].Artifact
	l.refuse(maintainer, ReceiveArtifact{Claim: "C1", Artifact: ev}, refuse.Conflict, "claim")
	l.do(maintainer, ResultTestament{Claim: "C1", Testament: "R1", Summary: "behavior passed; review failed", Results: []Ref{{Artifact: ev}}})
	l.do(maintainer, PostTestament{Claim: "C1", Testament: "R1"})
	l.refuse(maintainer, ReceiveTestament{Claim: "C1", Testament: "R1"}, refuse.Conflict, "")
	l.expect("C1", ValidationFailed)
	// Before the end, a result artifact cannot be received either, and a
	// result artifact cannot be bound as work.
	l2 := newLedger(t)
	l2.open("C2", parserSlots())
	ev2 := l2.evidence(maintainer, "C2")
	l2.refuse(maintainer, ReceiveArtifact{Claim: "C2", Artifact: ev2}, refuse.Conflict, "artifact")
	l2.refuse(parser, CloseTestament{Claim: "C2", Testament: "T1", Generation: 1, Outcome: Complete, Summary: "x",
		Bindings: []Binding{{Slot: "change", Artifact: ev2}}}, refuse.Conflict, "bindings.artifact")
}

func TestControlTransitions(t *testing.T) {
	l := newLedger(t)
	l.do(maintainer, Create{Claim: "C1", Respondent: parser, Work: "w", Slots: parserSlots()})
	l.refuse(parser, Cancel{Claim: "C1", Reason: "x"}, refuse.Forbidden, "actor")
	l.refuse(maintainer, Revoke{Claim: "C1", Reason: "x"}, refuse.Conflict, "claim")
	l.do(maintainer, ReportPostFailure{Claim: "C1", Reason: "unreachable"})
	l.expect("C1", PostFailed)

	l.do(maintainer, Create{Claim: "C2", Respondent: parser, Work: "w"})
	l.do(maintainer, Post{Claim: "C2"})
	l.do(parser, DeclineReceipt{Claim: "C2", Reason: "out of scope"})
	l.expect("C2", ReceiptFailed)

	l.open("C3", parserSlots())
	l.do(parser, FailTestament{Claim: "C3", Generation: 1, Reason: "lost the tree"})
	l.expect("C3", TestamentGenerationFailed)

	l.open("C4", parserSlots())
	l.publish("C4", "A", "change", 1)
	l.respond("C4", "T1", 1, map[string]string{"change": "A"})
	l.do(maintainer, BeginCheck{Claim: "C4", Check: "behavior", Artifact: "A"})
	ev := l.evidence(maintainer, "C4")
	l.do(maintainer, Revoke{Claim: "C4", Reason: "withdrawn"})
	l.expect("C4", Revoked)
	// Revoke fenced the running check: its late verdict is refused.
	l.refuse(maintainer, ReportVerdict{Claim: "C4", Check: "behavior", Artifact: "A", Result: Pass, Evidence: ev}, refuse.Conflict, "claim")

	l.open("C5", parserSlots())
	l.refuse(maintainer, Supersede{Claim: "C5", Successor: "C6"}, refuse.NotFound, "successor")
	l.do(maintainer, Create{Claim: "C6", Respondent: parser, Work: "w", Predecessor: "C5"})
	l.refuse(parser, Create{Claim: "C7", Respondent: parser, Work: "w", Predecessor: "C5"}, refuse.Forbidden, "predecessor")
	l.do(maintainer, Supersede{Claim: "C5", Successor: "C6"})
	l.expect("C5", Superseded)
	l.refuse(maintainer, Cancel{Claim: "C5", Reason: "again"}, refuse.Conflict, "claim")
	l.do(maintainer, Cancel{Claim: "C6", Reason: "not needed"})
	l.expect("C6", Cancelled)
	l.refuse(maintainer, Create{Claim: "C6", Respondent: parser, Work: "w"}, refuse.Conflict, "claim")
	l.refuse(parser, Create{Claim: "C9", Respondent: parser, Work: "w", Slots: []SlotSpec{slot("s", Required, CheckSpec{ID: "x"})}}, refuse.Invalid, "")
}

func TestDeadlineOnlyFromTimekeeperFact(t *testing.T) {
	l := newLedger(t)
	l.open("C1", parserSlots(), func(c *Create) { c.Deadline = t0.Add(time.Hour) })
	l.refuse(timekeeperActor, CommitDeadline{Claim: "C1"}, refuse.Conflict, "deadline")
	l.now = t0.Add(2 * time.Hour)
	if !l.view("C1").Overdue || l.state("C1") != Received {
		t.Fatal("a passed deadline changed state by itself")
	}
	l.refuse(maintainer, CommitDeadline{Claim: "C1"}, refuse.Forbidden, "actor")
	l.do(timekeeperActor, CommitDeadline{Claim: "C1"})
	l.expect("C1", Expired)
	if len(l.s.List(Filter{Overdue: true}, l.now)) != 0 {
		t.Fatal("an expired claim is still listed overdue")
	}
}

func TestListFilters(t *testing.T) {
	l := newLedger(t)
	l.open("C1", parserSlots())
	l.do(maintainer, Create{Claim: "C2", Respondent: "other", Work: "w"})
	l.do(maintainer, Cancel{Claim: "C2", Reason: "x"})
	if got := l.s.List(Filter{Open: true}, l.now); len(got) != 1 || got[0].Claim != "C1" {
		t.Fatalf("open %v", got)
	}
	if got := l.s.List(Filter{Participant: "other"}, l.now); len(got) != 1 || got[0].Claim != "C2" {
		t.Fatalf("participant %v", got)
	}
	if got := l.s.List(Filter{States: []Status{Cancelled}}, l.now); len(got) != 1 || got[0].Reason != "x" {
		t.Fatalf("states %v", got)
	}
}

// A verdict may carry its evidence: the artifact is published in the same
// batch, first, and a refused verdict leaves no evidence behind.
func TestVerdictPublishesItsEvidence(t *testing.T) {
	l := newLedger(t)
	slots := []SlotSpec{slot("change", Required, check("behavior", maintainer, Required), check("review", reviewer, Required, Quality))}
	l.open("C1", slots)
	l.publish("C1", "A", "change", 1)
	l.respond("C1", "T1", 1, map[string]string{"change": "A"})
	pub := &PublishArtifact{Artifact: "EV1", Role: RoleResult, Kind: "log", Content: digest.HashContent([]byte("log")), Size: 3}
	// The wrong evaluator: refused, and the evidence with it.
	l.refuse(maintainer, ReportVerdict{Claim: "C1", Check: "review", Artifact: "A", Result: Pass, Publish: pub}, refuse.Forbidden, "actor")
	if _, ok := l.s.claims["C1"].artifacts["EV1"]; ok {
		t.Fatal("a refused verdict left its evidence")
	}
	l.refuse(maintainer, ReportVerdict{Claim: "C1", Check: "behavior", Artifact: "A", Result: Pass,
		Publish: &PublishArtifact{Artifact: "EV1", Role: RoleOutput, Kind: "log", Content: pub.Content}}, refuse.Invalid, "evidence_artifact.role")
	l.refuse(maintainer, ReportVerdict{Claim: "C1", Check: "behavior", Artifact: "A", Result: Pass, Evidence: "OTHER", Publish: pub}, refuse.Invalid, "evidence")
	evs := l.do(maintainer, ReportVerdict{Claim: "C1", Check: "behavior", Artifact: "A", Result: Pass, Publish: pub})
	if len(evs) != 3 || evs[0].Type != TypeArtifact || evs[1].Type != TypeCheckBegin || evs[2].Type != TypeCheckVerdict {
		t.Fatalf("records %v", evs)
	}
	if evs[2].Evidence != "EV1" || evs[2].EvidenceHash != evs[0].Digest {
		t.Fatalf("the verdict names %s %s, the evidence is %s %s", evs[2].Evidence, evs[2].EvidenceHash, evs[0].Artifact, evs[0].Digest)
	}
	if got := l.view("C1").Slots[0].Checks[0].Targets[0].State; got != "passed" {
		t.Fatalf("behavior on A: %s", got)
	}
}

// A check that was running when the claim ended may finish for the audit,
// but the view of a terminal claim is its acceptance as of the end: a late
// Pass completing the other candidate never makes the slot read covered.
func TestLatePassNeverShowsAsWitness(t *testing.T) {
	l := newLedger(t)
	l.twoCandidates("C1")
	l.verdict(maintainer, "C1", "behavior", "B", Pass)
	l.do(maintainer, BeginCheck{Claim: "C1", Check: "review", Artifact: "B"})
	l.verdict(maintainer, "C1", "review", "A", Fail)
	l.expect("C1", ValidationFailed)
	end := l.view("C1").Terminal.Seq

	ev := l.evidence(maintainer, "C1")
	l.do(maintainer, ReportVerdict{Claim: "C1", Check: "review", Artifact: "B", Result: Pass, Evidence: ev})
	l.expect("C1", ValidationFailed)
	v := l.view("C1")
	sl := v.Slots[0]
	if sl.Witness != nil || sl.Status != "blocked" {
		t.Fatalf("a late pass shows as the witness: status %s, witness %+v", sl.Status, sl.Witness)
	}
	if len(sl.Causes) != 1 || sl.Causes[0].Artifact != "A" || sl.Causes[0].Seq > end {
		t.Fatalf("causes %+v", sl.Causes)
	}
	var late *resultRec
	for _, tg := range sl.Checks[1].Targets {
		if tg.Artifact == "B" && len(tg.Results) == 1 {
			late = &tg.Results[0]
		}
	}
	if late == nil || !late.Late || late.Result != Pass || late.Seq <= end {
		t.Fatalf("the late review of B is not kept for the audit: %+v", sl.Checks[1].Targets)
	}
	if len(v.Late) == 0 {
		t.Fatal("no late records listed")
	}
	if got := l.replay(); allViews(got, l.now) != allViews(l.s, l.now) {
		t.Fatal("replay differs")
	}
}

// A successor that declares no slots inherits its predecessor's; one with
// nothing to inherit must say it means no requirement; terms left out
// default in Decide, whichever mode sent them.
func TestCreateDefaultsAndInheritance(t *testing.T) {
	l := newLedger(t)
	evs := l.do(maintainer, Create{Claim: "C17", Respondent: parser, Work: "w", Slots: []SlotSpec{
		{Name: "change", Checks: []CheckSpec{{ID: "behavior", Validator: Validator{Name: "command"}, Fallbacks: []Validator{{Name: "old"}}}}}}})
	want := []SlotSpec{{Name: "change", Mode: Required, Checks: []CheckSpec{{ID: "behavior", Validator: Validator{Name: "command", Version: "1"},
		Evaluator: maintainer, Mode: Required, Phases: []Phase{Programmatic}, Attempts: 1, Fallbacks: []Validator{{Name: "old", Version: "1"}}}}}}
	if !reflect.DeepEqual(evs[0].Slots, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", evs[0].Slots, want)
	}

	c18 := Create{Claim: "C18", Respondent: parser, Work: "w", Predecessor: "C17"}
	if !c18.Inherits() {
		t.Fatal("a successor without slots does not inherit")
	}
	evs = l.do(maintainer, c18)
	if !reflect.DeepEqual(evs[0].Slots, want) {
		t.Fatalf("inherited:\n got %+v\nwant %+v", evs[0].Slots, want)
	}
	v := l.view("C18")
	if got := InheritNote(c18, &v); got != "C18 inherits the slots and checks of its predecessor C17: change (behavior)" {
		t.Fatalf("note %q", got)
	}
	own := Create{Claim: "C19", Respondent: parser, Work: "w", Predecessor: "C17", Slots: parserSlots()}
	if evs := l.do(maintainer, own); own.Inherits() || len(evs[0].Slots[0].Checks) != 2 || InheritNote(own, &v) != "" {
		t.Fatalf("a successor with its own slots: %+v", evs[0].Slots)
	}

	l.do(maintainer, Create{Claim: "C20", Respondent: parser, Work: "w"})
	r := l.refuse(maintainer, Create{Claim: "C21", Respondent: parser, Work: "w", Predecessor: "C20"}, refuse.Invalid, "slots")
	if r.Error() != "slots: successor C21 declares none and its predecessor C20 has none to inherit: declare them, or pass no_checks (--no-checks) if the closing testament is the only requirement" {
		t.Fatalf("refusal %q", r.Error())
	}
	l.refuse(maintainer, Create{Claim: "C21", Respondent: parser, Work: "w", NoChecks: true, Slots: parserSlots()}, refuse.Invalid, "no_checks")
	l.refuse(maintainer, Create{Claim: "C21", Respondent: parser, Work: "w", Predecessor: "C99"}, refuse.NotFound, "predecessor")
	if evs := l.do(maintainer, Create{Claim: "C21", Respondent: parser, Work: "w", Predecessor: "C20", NoChecks: true}); len(evs[0].Slots) != 0 {
		t.Fatalf("no_checks: %+v", evs[0].Slots)
	}
	// no_checks on a successor of a claim with slots: none, on purpose.
	if evs := l.do(maintainer, Create{Claim: "C22", Respondent: parser, Work: "w", Predecessor: "C17", NoChecks: true}); len(evs[0].Slots) != 0 {
		t.Fatalf("no_checks with slots to inherit: %+v", evs[0].Slots)
	}
}

// TestDescriptionDefaults checks that an artifact's role and kind, and a
// response testament's outcome, default in decide for every mode alike:
// the CLI, a REST body and an A2A record leave them out the same way.
func TestDescriptionDefaults(t *testing.T) {
	l := newLedger(t)
	l.open("C1", parserSlots())
	content := digest.HashContent([]byte("x"))
	for _, tc := range []struct {
		actor string
		cmd   PublishArtifact
		role  Role
	}{
		{parser, PublishArtifact{Claim: "C1", Artifact: "out", Slot: "change", Generation: 1, Content: content, Size: 1}, RoleOutput},
		{parser, PublishArtifact{Claim: "C1", Artifact: "diag", Generation: 1, Content: content, Size: 1}, RoleDiagnostic},
		{maintainer, PublishArtifact{Claim: "C1", Artifact: "ev", Content: content, Size: 1}, RoleResult},
		{parser, PublishArtifact{Claim: "C1", Artifact: "given", Role: RoleDiagnostic, Kind: "patch", Generation: 1, Content: content, Size: 1}, RoleDiagnostic},
	} {
		evs := l.do(tc.actor, tc.cmd)
		kind := cmp.Or(tc.cmd.Kind, "file")
		if len(evs) != 1 || evs[0].Role != string(tc.role) || evs[0].Kind != kind {
			t.Errorf("%s: role %q kind %q, want %q %q", tc.cmd.Artifact, evs[0].Role, evs[0].Kind, tc.role, kind)
		}
	}
	evs := l.do(parser, CloseTestament{Claim: "C1", Testament: "T1", Generation: 1, Summary: "done", Bindings: []Binding{{Slot: "change", Artifact: "out"}}})
	if evs[0].Outcome != string(Complete) {
		t.Errorf("outcome %q, want complete", evs[0].Outcome)
	}
}
