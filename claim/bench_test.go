package claim

import (
	"fmt"
	"testing"
	"time"

	"tally/artifact"
)

type metaEvent struct {
	m Meta
	e Event
}

// genClaims builds the full record stream of n claims, each with 5 Required
// slots × 3 Required checks, driven to Satisfied: create, post, receipt, five
// outputs, one evidence artifact, testament close/post/receive, and a begin
// and a pass verdict per check (42 records a claim).
func genClaims(n int) []metaEvent {
	out := make([]metaEvent, 0, n*42)
	var seq uint64
	add := func(actor string, e Event) {
		seq++
		e.TS = t0
		out = append(out, metaEvent{Meta{Seq: seq, Actor: actor, TS: t0}, e})
	}
	var slots []SlotSpec
	for s := 0; s < 5; s++ {
		var checks []CheckSpec
		for c := 0; c < 3; c++ {
			checks = append(checks, check(fmt.Sprintf("s%dc%d", s, c), maintainer, Required))
		}
		slots = append(slots, slot(fmt.Sprintf("slot%d", s), Required, checks...))
	}
	content := artifact.HashContent([]byte("bytes"))
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("C%d", i)
		add(maintainer, Event{Type: TypeCreate, Claim: id, Claimant: maintainer, Respondent: parser, Work: "w", MaxResponses: 4, Slots: slots})
		add(maintainer, Event{Type: TypePost, Claim: id})
		add(parser, Event{Type: TypeReceipt, Claim: id, Holder: parser, Generation: 1})
		var bindings []Binding
		for s := 0; s < 5; s++ {
			name := slots[s].Name
			d := artifact.ArtifactDigest(artifact.Description{Kind: "patch", Producer: parser, Claim: id, Cycle: 1, Role: "output", Slot: name, Size: 5, Content: content}).String()
			add(parser, Event{Type: TypeArtifact, Claim: id, Artifact: name, Role: "output", Slot: name, Kind: "patch", Cycle: 1, Generation: 1, Content: content.String(), Size: 5, Digest: d})
			bindings = append(bindings, Binding{Slot: name, Artifact: name, Digest: d})
		}
		ed := artifact.ArtifactDigest(artifact.Description{Kind: "log", Producer: maintainer, Claim: id, Role: "result", Size: 5, Content: content}).String()
		add(maintainer, Event{Type: TypeArtifact, Claim: id, Artifact: "E", Role: "result", Kind: "log", Content: content.String(), Size: 5, Digest: ed})
		add(parser, Event{Type: TypeTestament, Claim: id, Testament: "T1", Role: TestamentResponse, Generation: 1, Cycle: 1, Outcome: "complete", Summary: "s", Bindings: bindings})
		add(parser, Event{Type: TypeTestamentPost, Claim: id, Testament: "T1"})
		add(maintainer, Event{Type: TypeTestamentReceive, Claim: id, Testament: "T1"})
		for s := 0; s < 5; s++ {
			for _, ch := range slots[s].Checks {
				base := Event{Claim: id, Check: ch.ID, Artifact: bindings[s].Artifact, Digest: bindings[s].Digest, Phase: "programmatic", Validator: ch.Validator, Attempt: 1}
				b := base
				b.Type = TypeCheckBegin
				add(maintainer, b)
				v := base
				v.Type, v.Result, v.Evidence, v.EvidenceHash = TypeCheckVerdict, "pass", "E", ed
				add(maintainer, v)
			}
		}
	}
	return out
}

var fold100k []metaEvent

// BenchmarkFold100kClaims folds 100,000 claims of 5 slots × 3 checks each
// (4.2 million records) into a fresh state and reports records per second.
func BenchmarkFold100kClaims(b *testing.B) {
	if fold100k == nil {
		fold100k = genClaims(100_000)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		s := NewState()
		for _, me := range fold100k {
			s.Apply(me.m, me.e)
		}
		if _, n := s.Ignored(); n != 0 || s.claims["C99999"].status() != Satisfied {
			b.Fatalf("fold went wrong: %d ignored, last %s", n, s.claims["C99999"].status())
		}
	}
	b.ReportMetric(float64(len(fold100k)*b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkFoldLines10kClaims is the same fold from wire bytes (decode
// included), over 10,000 claims.
func BenchmarkFoldLines10kClaims(b *testing.B) {
	evs := genClaims(10_000)
	lines := make([][]byte, len(evs))
	for i, me := range evs {
		lines[i] = me.e.Encode()
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		s := NewState()
		for j, line := range lines {
			e, err := Decode(line)
			if err != nil {
				b.Fatal(err)
			}
			s.Apply(evs[j].m, e)
		}
	}
	b.ReportMetric(float64(len(lines)*b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkAcceptanceAfterOneVerdict measures Decide + Apply of the verdict
// that makes a claim Satisfied (one slot, one check, no dependents), in a
// ledger of 1,000 and of 1,000,000 other claims. The two ns/op should match.
func BenchmarkAcceptanceAfterOneVerdict(b *testing.B) {
	for _, n := range []int{1_000, 1_000_000} {
		b.Run(fmt.Sprintf("claims=%d", n), func(b *testing.B) {
			l := newLedger(b)
			for i := 0; i < n; i++ {
				l.seq++
				l.s.Apply(Meta{Seq: l.seq, Actor: maintainer, TS: t0}, Event{TS: t0, Type: TypeCreate, Claim: fmt.Sprintf("bg%d", i),
					Claimant: maintainer, Respondent: parser, Work: "w", MaxResponses: 4, Slots: []SlotSpec{}})
			}
			slots := []SlotSpec{slot("change", Required, check("tests", maintainer, Required))}
			apply := func(actor string, cmd Command) {
				evs, err := l.s.Decide(actor, t0, cmd)
				if err != nil {
					b.Fatal(err)
				}
				for _, e := range evs {
					l.seq++
					l.s.Apply(Meta{Seq: l.seq, Actor: actor, TS: t0}, e)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				id := fmt.Sprintf("T%d", i)
				apply(maintainer, Create{Claim: id, Respondent: parser, Work: "w", Slots: slots})
				apply(maintainer, Post{Claim: id})
				apply(parser, AcquireReceipt{Claim: id})
				apply(parser, PublishArtifact{Claim: id, Artifact: "A", Role: RoleOutput, Slot: "change", Kind: "patch", Generation: 1, Content: artifact.HashContent([]byte(id))})
				apply(parser, CloseTestament{Claim: id, Testament: "T1", Generation: 1, Outcome: Complete, Summary: "s", Bindings: []Binding{{Slot: "change", Artifact: "A"}}})
				apply(parser, PostTestament{Claim: id, Testament: "T1"})
				apply(maintainer, ReceiveTestament{Claim: id, Testament: "T1"})
				apply(maintainer, PublishArtifact{Claim: id, Artifact: "E", Role: RoleResult, Kind: "log", Content: artifact.HashContent([]byte("e"))})
				apply(maintainer, BeginCheck{Claim: id, Check: "tests", Artifact: "A"})
				b.StartTimer()
				apply(maintainer, ReportVerdict{Claim: id, Check: "tests", Artifact: "A", Result: Pass, Evidence: "E"})
				b.StopTimer()
				if l.s.claims[id].status() != Satisfied {
					b.Fatal("not satisfied")
				}
				b.StartTimer()
			}
		})
	}
}
