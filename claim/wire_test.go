package claim

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"tally/family"
)

func exampleLines(t testing.TB) []string {
	b, err := os.ReadFile("testdata/examples.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// Every record type: its exact wire line decodes, re-encodes to the same
// bytes, and appears verbatim in doc.go.
func TestWireExamples(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, line := range exampleLines(t) {
		e, err := Decode([]byte(line))
		if err != nil {
			t.Fatalf("decode %s: %v", line, err)
		}
		if got := string(e.Encode()); got != line {
			t.Errorf("encode:\n got %s\nwant %s", got, line)
		}
		if !bytes.Contains(doc, []byte("//\t"+line+"\n")) {
			t.Errorf("doc.go lacks the example %s", line)
		}
		seen[e.Type] = true
	}
	for _, typ := range Types() {
		if !seen[typ] {
			t.Errorf("no wire example for %s", typ)
		}
	}
}

// Events built in Go encode to exact bytes.
func TestEncodeExactBytes(t *testing.T) {
	conf := 0.5
	cases := []struct {
		e    Event
		want string
	}{
		{Event{TS: t0, Type: TypePost, Claim: "C17"}, `{"ts":"2026-09-01T17:00:00Z","type":"claim.post","claim":"C17"}`},
		{Event{TS: t0.Add(1500 * time.Millisecond), Type: TypeCancel, Claim: "C1", Reason: `a "quoted" <reason>`},
			`{"ts":"2026-09-01T17:00:01.5Z","type":"claim.cancel","claim":"C1","reason":"a \"quoted\" <reason>"}`},
		{Event{TS: t0, Type: TypeTestament, Claim: "C1", Testament: "R", Role: "result", Summary: "s", Confidence: &conf},
			`{"ts":"2026-09-01T17:00:00Z","type":"claim.testament","claim":"C1","testament":"R","role":"result","summary":"s","confidence":0.5}`},
		{Event{TS: t0, Type: TypeCreate, Claim: "C1", Claimant: "m", Respondent: "p", Work: "w", MaxResponses: 4},
			`{"ts":"2026-09-01T17:00:00Z","type":"claim.create","claim":"C1","claimant":"m","respondent":"p","work":"w","max_responses":4,"slots":[]}`},
		{Event{TS: t0, Type: TypeDependency, Claim: "C2", On: "C1", Origin: "C0", Extra: []Field{{Key: "x-team", Value: []byte(`{"a":1}`)}}},
			`{"ts":"2026-09-01T17:00:00Z","type":"claim.dependency","claim":"C2","on":"C1","origin":"C0","x-team":{"a":1}}`},
	}
	for _, c := range cases {
		if got := string(c.e.Encode()); got != c.want {
			t.Errorf("encode:\n got %s\nwant %s", got, c.want)
		}
	}
}

func TestDecodeKeepsUnknownAndIgnoresEnvelope(t *testing.T) {
	line := `{"tally":{"seq":7,"actor":"m","hash":"ab"},"claim":"C1","future":[1, 2],"type":"claim.post","ts":"2026-09-01T17:00:00Z","zz":"x"}`
	e, err := Decode([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"ts":"2026-09-01T17:00:00Z","type":"claim.post","claim":"C1","future":[1,2],"zz":"x"}`
	if got := string(e.Encode()); got != want {
		t.Fatalf("got %s", got)
	}
	if string(e.Raw()) != line {
		t.Fatal("raw line not kept")
	}
	// A member of another type is unknown here and kept too.
	e, _ = Decode([]byte(`{"ts":"2026-09-01T17:00:00Z","type":"claim.post","claim":"C1","reason":"x"}`))
	if e.Reason != "" || len(e.Extra) != 1 {
		t.Fatalf("foreign member %+v", e)
	}
}

func TestDecodeRefusals(t *testing.T) {
	bad := map[string]string{
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.post"}`:                                                       "claim",
		`{"type":"claim.post","claim":"C1"}`:                                                                      "ts",
		`{"ts":"2026-09-01T19:00:00+02:00","type":"claim.post","claim":"C1"}`:                                     "ts",
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.post","claim":"C1","claim":"C2"}`:                             "claim",
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.post","claim":"C 1"}`:                                         "claim",
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.post","claim":null}`:                                          "claim",
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.post","claim":"C1"} x`:                                        "",
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.receipt","claim":"C1","holder":"p"}`:                          "generation",
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.receipt","claim":"C1","holder":"p","generation":-1}`:          "generation",
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.artifact.receive","claim":"C1","artifact":"A","digest":"AB"}`: "digest",
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.cancel","claim":"C1","reason":"  "}`:                          "reason",
		`[1]`: "",
	}
	for line, field := range bad {
		_, err := Decode([]byte(line))
		var de *family.DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%s: %v", line, err)
			continue
		}
		if de.Field != field {
			t.Errorf("%s: field %q (%v), want %q", line, de.Field, err, field)
		}
	}
	_, err := Decode([]byte(`{"ts":"2026-09-01T17:00:00Z","type":"promise","id":"p1"}`))
	if !errors.Is(err, family.ErrUnknownType) {
		t.Fatalf("unknown type: %v", err)
	}
}

// randomSession drives a random but valid-ish session through Decide: most
// commands are refused, the rest are logged.
func randomSession(t testing.TB, seed int64, steps int) *ledger {
	rng := rand.New(rand.NewSource(seed))
	l := newLedger(t)
	actors := []string{maintainer, parser, reviewer, "rescuer", timekeeperActor}
	claims := []string{"C1", "C2", "C3", "C4"}
	arts := []string{"A", "B", "D"}
	checks := []string{"behavior", "review", "bench"}
	slots := func() []SlotSpec {
		b := check("bench", reviewer, Observe)
		b.Attempts = 2
		b.Fallbacks = []Validator{{Name: "lite", Version: "1"}}
		return []SlotSpec{slot("change", Required, check("behavior", maintainer, Required), check("review", reviewer, Required, Programmatic, Quality), b)}
	}
	pick := func(xs []string) string { return xs[rng.Intn(len(xs))] }
	n := 0
	for i := 0; i < steps; i++ {
		c := pick(claims)
		holder, gen := parser, uint64(1)
		if cr := l.s.claims[c]; cr != nil && cr.receipt.generation > 0 {
			holder, gen = cr.receipt.holder, cr.receipt.generation
		}
		if rng.Intn(8) == 0 {
			gen = uint64(1 + rng.Intn(2))
		}
		evaluator := map[string]string{"behavior": maintainer, "review": reviewer, "bench": reviewer}
		chk := pick(checks)
		var actor string
		var cmd Command
		switch rng.Intn(16) {
		case 0:
			cr := Create{Claim: c, Respondent: parser, Work: "w", Slots: slots(), Deadline: t0.Add(time.Duration(rng.Intn(200)) * time.Hour)}
			if rng.Intn(3) == 0 {
				cr.DependsOn = []string{pick(claims)}
			}
			if rng.Intn(3) == 0 {
				cr.Awaits = []string{pick(claims)}
			}
			actor, cmd = maintainer, cr
		case 1:
			actor, cmd = maintainer, Post{Claim: c}
		case 2:
			actor, cmd = parser, AcquireReceipt{Claim: c}
		case 3:
			if rng.Intn(4) != 0 {
				continue
			}
			actor, cmd = maintainer, Adopt{Claim: c, Holder: pick(actors[:4])}
		case 4:
			actor, cmd = holder, PublishArtifact{Claim: c, Artifact: pick(arts), Role: RoleOutput, Slot: "change", Kind: "patch", Generation: gen, Content: [32]byte{byte(rng.Intn(3)) + 1}}
		case 5:
			n++
			actor, cmd = evaluator[chk], PublishArtifact{Claim: c, Artifact: "E" + string(rune('a'+n%20)), Role: RoleResult, Kind: "log", Content: [32]byte{9}}
		case 6:
			actor, cmd = holder, CloseTestament{Claim: c, Testament: "T" + string(rune('a'+rng.Intn(4))), Generation: gen, Outcome: Complete, Summary: "s", Bindings: []Binding{{Slot: "change", Artifact: pick(arts)}}}
		case 7:
			if cr := l.s.claims[c]; cr != nil {
				for _, id := range cr.tOrder {
					if t := cr.testaments[id]; t.posted == 0 {
						actor, cmd = holder, PostTestament{Claim: c, Testament: id}
					}
				}
				if cmd != nil {
					break
				}
			}
			actor, cmd = holder, PostTestament{Claim: c, Testament: "T" + string(rune('a'+rng.Intn(4)))}
		case 8:
			if cr := l.s.claims[c]; cr != nil {
				for _, id := range cr.tOrder {
					if t := cr.testaments[id]; t.posted > 0 && t.recvd == 0 && rng.Intn(2) == 0 {
						actor, cmd = maintainer, ReceiveTestament{Claim: c, Testament: id}
					}
				}
				if cmd != nil {
					break
				}
			}
			actor, cmd = maintainer, ReceiveTestament{Claim: c, Testament: "T" + string(rune('a'+rng.Intn(4)))}
		case 9, 10, 11, 12:
			res := []Result{Pass, Pass, Pass, Pass, Fail, Error, Incomplete}[rng.Intn(7)]
			ev := ""
			if cr := l.s.claims[c]; cr != nil {
				for _, id := range cr.artOrder {
					if a := cr.artifacts[id]; a.role == string(RoleResult) && a.producer == evaluator[chk] {
						ev = id
					}
				}
			}
			actor, cmd = evaluator[chk], ReportVerdict{Claim: c, Check: chk, Artifact: pick(arts), Result: res, Evidence: ev}
		case 13:
			if rng.Intn(40) != 0 {
				continue
			}
			actor, cmd = maintainer, Cancel{Claim: c, Reason: "r"}
		case 14:
			l.now = l.now.Add(time.Hour)
			if rng.Intn(4) != 0 {
				continue
			}
			actor, cmd = timekeeperActor, CommitDeadline{Claim: c}
		case 15:
			actor, cmd = holder, Progress{Claim: c, Generation: gen, Note: "n"}
		}
		if rng.Intn(10) == 0 {
			actor = pick(actors)
		}
		evs, err := l.s.Decide(actor, l.now, cmd)
		if err != nil {
			continue
		}
		for _, e := range evs {
			l.append(actor, e)
		}
	}
	return l
}

// Property: replay is deterministic. The same records give byte-identical
// JSON of every view, folding from the bytes or from the events.
func TestReplayDeterminism(t *testing.T) {
	for seed := int64(0); seed < 40; seed++ {
		l := randomSession(t, seed, 400)
		want := allViews(l.s, l.now)
		for k := 0; k < 2; k++ {
			if got := allViews(l.replay(), l.now); got != want {
				t.Fatalf("seed %d: replay differs", seed)
			}
		}
		if _, n := l.s.Ignored(); n != 0 {
			t.Fatalf("seed %d: Decide produced records Apply ignored", seed)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, line := range exampleLines(f) {
		f.Add([]byte(line))
	}
	f.Add([]byte(`{"ts":"2026-09-01T17:00:00Z","type":"claim.post","claim":"C1","x":{"tally":1}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := Decode(line)
		if err != nil {
			return
		}
		enc := e.Encode()
		e2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", enc, err)
		}
		e.raw, e2.raw = nil, nil
		if !reflect.DeepEqual(e, e2) {
			t.Fatalf("round trip differs:\n%+v\n%+v", e, e2)
		}
		if enc2 := e2.Encode(); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n%s\n%s", enc, enc2)
		}
	})
}

// FuzzAggregate drives random sessions and checks the aggregation invariants:
// terminal states absorb; Satisfied means every Required slot has one
// witness on which every gating check passed; replay is deterministic.
func FuzzAggregate(f *testing.F) {
	f.Add(int64(1), uint16(200))
	f.Add(int64(7), uint16(600))
	f.Fuzz(func(t *testing.T, seed int64, steps uint16) {
		l := randomSession(t, seed, int(steps%1500))
		ends := map[string]Status{}
		s := NewState()
		for _, ll := range l.log {
			e, _ := Decode(ll.line)
			s.Apply(ll.meta, e)
			for id, c := range s.claims {
				if prev, ok := ends[id]; ok && c.status() != prev {
					t.Fatalf("%s left terminal %s for %s", id, prev, c.status())
				}
				if c.end != nil {
					ends[id] = c.end.State
				}
			}
		}
		for _, c := range s.order {
			if c.end == nil || c.end.State != Satisfied {
				continue
			}
			v, _ := s.Claim(c.id, l.now)
			for i, sl := range v.Slots {
				if sl.Mode != Required {
					continue
				}
				if sl.Witness == nil {
					t.Fatalf("%s satisfied without a witness for %s", c.id, sl.Name)
				}
				for _, ch := range c.terms.Slots[i].Checks {
					if ch.Mode != Required {
						continue
					}
					a := c.attempts[attemptKey{ch.ID, sl.Witness.Artifact, sl.Witness.Digest}]
					if a == nil || a.state != attemptPassed {
						t.Fatalf("%s satisfied but %s did not pass on witness %s", c.id, ch.ID, sl.Witness.Artifact)
					}
				}
			}
			if v.Delivery.State != "passed" {
				t.Fatalf("%s satisfied without delivery", c.id)
			}
		}
		if allViews(s, l.now) != allViews(l.s, l.now) {
			t.Fatal("replay differs")
		}
	})
}

// TestEncodeEscapes pins the bytes a claim record's strings are written
// with, in a member and nested in a value: jsonline.AppendString's, which
// pinki's lines agree with (as serde_json escapes). Where encoding/json
// wrote otherwise (U+2028, U+2029 and invalid UTF-8 escaped) lines written
// before decode to the same record; elsewhere the bytes are unchanged.
func TestEncodeEscapes(t *testing.T) {
	ts := time.Date(2026, 9, 1, 17, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, in, want, old, read string
	}{
		{"U+2028 and U+2029", "a\u2028b\u2029", "\"a\u2028b\u2029\"", `"a\u2028b\u2029"`, "a\u2028b\u2029"},
		{"invalid UTF-8", "a\xffb", "\"a\uFFFDb\"", `"a\ufffdb"`, "a\uFFFDb"},
		{"backspace and form feed", "\b\f", `"\b\f"`, `"\u0008\u000c"`, "\b\f"},
		{"other C0 controls", "\x01\x1f", `"\u0001\u001f"`, "", ""},
		{"newline, return, tab", "\n\r\t", `"\n\r\t"`, "", ""},
		{"quote and backslash", `"\`, `"\"\\"`, "", ""},
		{"HTML characters and DEL as they are", "<a>&\x7f", "\"<a>&\x7f\"", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := Event{TS: ts, Type: TypePostFailed, Claim: "C1", Reason: c.in}
			pre := `{"ts":"2026-09-01T17:00:00Z","type":"claim.post.failed","claim":"C1","reason":`
			if got, want := string(e.Encode()), pre+c.want+"}"; got != want {
				t.Fatalf("Encode =\n%q\nwant\n%q", got, want)
			}
			v := Event{TS: ts, Type: TypeCheckBegin, Claim: "C1", Check: "b", Artifact: "A",
				Digest: strings.Repeat("b", 64), Phase: "programmatic", Validator: Validator{Name: "command", Version: c.in}, Attempt: 1}
			vpre := `{"ts":"2026-09-01T17:00:00Z","type":"claim.check.begin","claim":"C1","check":"b","artifact":"A","digest":"` +
				strings.Repeat("b", 64) + `","phase":"programmatic","handler":0,"validator":{"name":"command","version":`
			if got, want := string(v.Encode()), vpre+c.want+`},"attempt":1}`; got != want {
				t.Fatalf("Encode (nested) =\n%q\nwant\n%q", got, want)
			}
			if c.old == "" {
				return
			}
			d, err := Decode([]byte(pre + c.old + "}"))
			if err != nil {
				t.Fatalf("Decode of the earlier bytes: %v", err)
			}
			if d.Reason != c.read {
				t.Fatalf("Decode of the earlier bytes: reason %q, want %q", d.Reason, c.read)
			}
		})
	}
}

// Types lists the family's record types, sorted.
func Types() []string {
	out := make([]string, 0, len(schemas))
	for t := range schemas {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
