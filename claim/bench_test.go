package claim

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"testing"
	"time"

	"tally/digest"
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
	content := digest.HashContent([]byte("bytes"))
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("C%d", i)
		add(maintainer, Event{Type: TypeCreate, Claim: id, Claimant: maintainer, Respondent: parser, Work: "w", MaxResponses: 4, Slots: slots})
		add(maintainer, Event{Type: TypePost, Claim: id})
		add(parser, Event{Type: TypeReceipt, Claim: id, Holder: parser, Generation: 1})
		var bindings []Binding
		for s := 0; s < 5; s++ {
			name := slots[s].Name
			d := digest.ArtifactDigest(digest.Description{Kind: "patch", Producer: parser, Claim: id, Cycle: 1, Role: "output", Slot: name, Size: 5, Content: content}).String()
			add(parser, Event{Type: TypeArtifact, Claim: id, Artifact: name, Role: "output", Slot: name, Kind: "patch", Cycle: 1, Generation: 1, Content: content.String(), Size: 5, Digest: d})
			bindings = append(bindings, Binding{Slot: name, Artifact: name, Digest: d})
		}
		ed := digest.ArtifactDigest(digest.Description{Kind: "log", Producer: maintainer, Claim: id, Role: "result", Size: 5, Content: content}).String()
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
// that makes a claim Satisfied (one Required slot, one Required check, no
// dependents) in a ledger of 1,000 claims and in one of 1,000,000, in the
// same run, alternating rounds (issue 3: the 1M cost ≤ 2× the 1k cost).
//
// Fairness: every claim in either ledger has the measured claim's terms
// (one Required slot "change" with one Required check "tests"); background
// claims are created, posted and received. Each round prepares 512 claims
// up to the verdict (posted, received, output, testament received, evidence,
// check begun) with the clock stopped; the small ledger is rebuilt each
// round so that it holds exactly 1,000 claims when the round starts (488
// background + 512 prepared), the large one holds 1,000,000 background
// claims plus those prepared so far. Then runtime.GC() clears the
// preparation's garbage and the prepared claims are looked up once (the
// begin record just before a verdict does that in real use), and the
// verdicts are timed. The order of the two sizes swaps every round.
//
// Metrics: ns/verdict at each size, ratio (total 1M time / total 1k time),
// ratio-median (median over rounds of the per-round ratio), gc/verdict (the
// collections that ran during timed sections, forced ones excluded), the
// live heap of the large ledger. Run with GOGC=off too for the GC's share.
func BenchmarkAcceptanceAfterOneVerdict(b *testing.B) {
	const round, small, large = 512, 1_000, 1_000_000
	big := newAcceptanceLedger(b, large)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap := float64(ms.HeapAlloc) / (1 << 20)

	var tSmall, tLarge time.Duration
	var gcs uint32
	var ratios []float64
	b.ResetTimer()
	b.StopTimer()
	for done, r := 0, 0; done < b.N; r++ {
		k := min(round, b.N-done)
		var ts, tl time.Duration
		for j := 0; j < 2; j++ {
			if (j == 0) == (r%2 == 0) {
				l := newAcceptanceLedger(b, small-k)
				d, g := l.round(b, fmt.Sprintf("S%d-", r), k)
				ts, gcs = d, gcs+g
			} else {
				d, g := big.round(b, fmt.Sprintf("L%d-", r), k)
				tl, gcs = d, gcs+g
			}
		}
		tSmall, tLarge = tSmall+ts, tLarge+tl
		ratios = append(ratios, float64(tl)/float64(ts))
		done += k
	}
	sort.Float64s(ratios)
	n := float64(b.N)
	b.ReportMetric(float64(tSmall.Nanoseconds())/n, "ns/verdict@1k")
	b.ReportMetric(float64(tLarge.Nanoseconds())/n, "ns/verdict@1M")
	b.ReportMetric(float64(tLarge)/float64(tSmall), "ratio")
	b.ReportMetric(ratios[len(ratios)/2], "ratio-median")
	b.ReportMetric(float64(gcs)/(2*n), "gc/verdict")
	b.ReportMetric(heap, "heap-MB@1M")
}

type acceptanceLedger struct {
	l     *ledger
	slots []SlotSpec
}

// newAcceptanceLedger folds n background claims of the measured shape.
func newAcceptanceLedger(b *testing.B, n int) *acceptanceLedger {
	a := &acceptanceLedger{l: newLedger(b), slots: []SlotSpec{slot("change", Required, check("tests", maintainer, Required))}}
	l := a.l
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("bg%d", i)
		for _, me := range []struct {
			actor string
			e     Event
		}{
			{maintainer, Event{Type: TypeCreate, Claim: id, Claimant: maintainer, Respondent: parser, Work: "w", MaxResponses: 4, Slots: a.slots}},
			{maintainer, Event{Type: TypePost, Claim: id}},
			{parser, Event{Type: TypeReceipt, Claim: id, Holder: parser, Generation: 1}},
		} {
			l.seq++
			me.e.TS = t0
			l.s.Apply(Meta{Seq: l.seq, Actor: me.actor, TS: t0}, me.e)
		}
	}
	if _, ign := l.s.Ignored(); ign != 0 || l.s.Len() != n {
		b.Fatalf("background: %d claims, %d ignored", l.s.Len(), ign)
	}
	return a
}

func (a *acceptanceLedger) apply(b *testing.B, actor string, cmd Command) {
	evs, err := a.l.s.Decide(actor, t0, cmd)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range evs {
		a.l.seq++
		a.l.s.Apply(Meta{Seq: a.l.seq, Actor: actor, TS: t0}, e)
	}
}

// round prepares k claims up to their verdict, then times the k verdicts.
// It returns the time and the number of unforced collections during it.
func (a *acceptanceLedger) round(b *testing.B, prefix string, k int) (time.Duration, uint32) {
	ids := make([]string, k)
	verdicts := make([]Command, k)
	for i := range ids {
		id := prefix + strconv.Itoa(i)
		a.apply(b, maintainer, Create{Claim: id, Respondent: parser, Work: "w", Slots: a.slots})
		a.apply(b, maintainer, Post{Claim: id})
		a.apply(b, parser, AcquireReceipt{Claim: id})
		a.apply(b, parser, PublishArtifact{Claim: id, Artifact: "A", Role: RoleOutput, Slot: "change", Kind: "patch", Generation: 1, Content: digest.HashContent([]byte(id))})
		a.apply(b, parser, CloseTestament{Claim: id, Testament: "T1", Generation: 1, Outcome: Complete, Summary: "s", Bindings: []Binding{{Slot: "change", Artifact: "A"}}})
		a.apply(b, parser, PostTestament{Claim: id, Testament: "T1"})
		a.apply(b, maintainer, ReceiveTestament{Claim: id, Testament: "T1"})
		a.apply(b, maintainer, PublishArtifact{Claim: id, Artifact: "E", Role: RoleResult, Kind: "log", Content: digest.HashContent([]byte("e"))})
		a.apply(b, maintainer, BeginCheck{Claim: id, Check: "tests", Artifact: "A"})
		ids[i] = id
		verdicts[i] = ReportVerdict{Claim: id, Check: "tests", Artifact: "A", Result: Pass, Evidence: "E"}
	}
	runtime.GC()
	for _, id := range ids {
		if c := a.l.s.claims[id]; c == nil || c.status() != Validating {
			b.Fatalf("%s not validating", id)
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.NumGC
	var d time.Duration
	pprof.Do(context.Background(), pprof.Labels("phase", "verdict"), func(context.Context) {
		start := time.Now()
		for _, v := range verdicts {
			a.apply(b, maintainer, v)
		}
		d = time.Since(start)
	})
	runtime.ReadMemStats(&ms)
	for _, id := range ids {
		if a.l.s.claims[id].status() != Satisfied {
			b.Fatalf("%s: %s, not satisfied", id, a.l.s.claims[id].status())
		}
	}
	return d, ms.NumGC - before
}

// BenchmarkClaimView times one claim's view (what claim show and every
// write's answer compute): the seed's C17 with two candidates and one check
// passed on each, alone and with a DependsOn target that waits on it.
func BenchmarkClaimView(b *testing.B) {
	for _, deps := range []bool{false, true} {
		name := "alone"
		if deps {
			name = "cycle"
		}
		b.Run(name, func(b *testing.B) {
			l := newLedger(b)
			l.open("C17", parserSlots(), func(c *Create) {
				if deps {
					c.DependsOn = []string{"C2"}
				}
			})
			l.open("C2", parserSlots(), func(c *Create) { c.DependsOn = []string{"C17"} })
			for _, a := range []string{"A", "B"} {
				l.publish("C17", a, "change", 1)
				l.respond("C17", "T"+a, 1, map[string]string{"change": a})
			}
			l.verdict(maintainer, "C17", "behavior", "A", Pass)
			l.verdict(maintainer, "C17", "review", "B", Pass)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, ok := l.s.Claim("C17", t0); !ok {
					b.Fatal("no C17")
				}
			}
		})
	}
}
