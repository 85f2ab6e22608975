package promise

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"tally/family"
	"tally/refuse"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// The exact bytes of every record shape tally writes.
func TestEncodeWireStrings(t *testing.T) {
	at := ts("2026-08-28T20:14:03Z")
	cases := []struct {
		name string
		ev   Event
		want string
	}{
		{"promise", Event{TS: at, Type: TypePromise, ID: "pnk_4f3a91", Text: "hand back a reviewed schema", By: "…/reviewer", To: "…/author", On: "pnk_0c2b77", Until: "2026-09-01T17:00:00Z"},
			`{"ts":"2026-08-28T20:14:03Z","type":"promise","id":"pnk_4f3a91","promise":"hand back a reviewed schema","by":"…/reviewer","to":"…/author","on":"pnk_0c2b77","until":"2026-09-01T17:00:00Z"}`},
		{"promise with task and meta", Event{TS: at, Type: TypePromise, ID: "desk/ship-91", Text: "t", By: "a", To: "b", Until: "2026-09-01T17:00:00Z", Task: "a2a-task-9c1f0e", Meta: `{"k":[1,2]}`},
			`{"ts":"2026-08-28T20:14:03Z","type":"promise","id":"desk/ship-91","promise":"t","by":"a","to":"b","until":"2026-09-01T17:00:00Z","task":"a2a-task-9c1f0e","meta":{"k":[1,2]}}`},
		{"amend", Event{TS: at, Type: TypeAmend, ID: "pnk_4f3a91", By: "…/reviewer", Until: "2026-09-01T18:00:00Z", Reason: "nudge 1", Meta: `{"rung":1}`},
			`{"ts":"2026-08-28T20:14:03Z","type":"amend","promise":"pnk_4f3a91","by":"…/reviewer","until":"2026-09-01T18:00:00Z","reason":"nudge 1","meta":{"rung":1}}`},
		{"amend without reason", Event{TS: at, Type: TypeAmend, ID: "p", By: "a", Until: "2026-09-01T18:00:00Z"},
			`{"ts":"2026-08-28T20:14:03Z","type":"amend","promise":"p","by":"a","until":"2026-09-01T18:00:00Z"}`},
		{"satisfied", Event{TS: at, Type: TypeResolve, ID: "pnk_4f3a91", As: AsSatisfied, By: "…", Evidence: []string{"https://…"}},
			`{"ts":"2026-08-28T20:14:03Z","type":"resolve","promise":"pnk_4f3a91","as":"satisfied","by":"…","evidence":["https://…"]}`},
		{"cancelled", Event{TS: at, Type: TypeResolve, ID: "pnk_1", As: AsCancelled, By: "…", Reason: "…"},
			`{"ts":"2026-08-28T20:14:03Z","type":"resolve","promise":"pnk_1","as":"cancelled","by":"…","reason":"…"}`},
		{"released", Event{TS: at, Type: TypeResolve, ID: "pnk_1", As: AsReleased, By: "…/creditor"},
			`{"ts":"2026-08-28T20:14:03Z","type":"resolve","promise":"pnk_1","as":"released","by":"…/creditor"}`},
		{"assess", Event{TS: at, Type: TypeAssess, ID: "pnk_88de10", State: StateViolated, Observer: "…", Note: "…"},
			`{"ts":"2026-08-28T20:14:03Z","type":"assess","promise":"pnk_88de10","state":"violated","observer":"…","note":"…"}`},
		{"escaping like serde_json", Event{TS: at, Type: TypeAmend, ID: "p", By: "a\"b\\c", Until: "2026-09-01T18:00:00Z", Reason: "line\nnext\ttab\x01 <&>"},
			`{"ts":"2026-08-28T20:14:03Z","type":"amend","promise":"p","by":"a\"b\\c","until":"2026-09-01T18:00:00Z","reason":"line\nnext\ttab\u0001 <&>"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := string(c.ev.Encode())
			if got != c.want {
				t.Fatalf("Encode:\n got %s\nwant %s", got, c.want)
			}
			back, err := Decode([]byte(got))
			if err != nil {
				t.Fatalf("Decode(Encode): %v", err)
			}
			if again := string(back.Encode()); again != c.want {
				t.Fatalf("re-encode:\n got %s\nwant %s", again, c.want)
			}
		})
	}
}

// The seed's worked lifecycle (promise-ledger.txt appendix), line for line.
var seedLifecycle = []string{
	`{"ts":"2026-08-28T20:14:03Z","type":"promise","id":"desk/ship-91","promise":"hand back a reviewed schema","by":"…/reviewer","to":"…/author","on":"pnk_0c2b77","until":"2026-09-01T17:00:00Z"}`,
	`{"ts":"2026-09-01T17:12:00Z","type":"amend","promise":"desk/ship-91","by":"…/reviewer","until":"2026-09-01T18:00:00Z","reason":"nudge 1","meta":{"rung":1}}`,
	`{"ts":"2026-09-01T18:40:00Z","type":"assess","promise":"desk/ship-91","state":"violated","observer":"…/author","note":"deadline passed, nothing delivered","meta":{"seat":"desk"}}`,
	`{"ts":"2026-09-02T09:40:00Z","type":"resolve","promise":"desk/ship-91","as":"satisfied","by":"…/reviewer","evidence":["https://example.org/reviews/91"],"meta":{"seat":"reviewer"}}`,
}

const antecedentLine = `{"ts":"2026-08-28T20:10:00Z","type":"promise","id":"pnk_0c2b77","promise":"draft","by":"…/author","to":"…/reviewer","until":"2026-08-31T12:00:00Z"}`
const antecedentSatisfied = `{"ts":"2026-08-30T09:00:00Z","type":"resolve","promise":"pnk_0c2b77","as":"satisfied","by":"…/author","evidence":["e"]}`

func fold(t testing.TB, lines ...string) *State {
	t.Helper()
	s := NewState()
	for i, l := range lines {
		ev, err := Decode([]byte(l))
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		s.Apply(Meta{Seq: uint64(i + 1)}, &ev)
	}
	return s
}

func viewJSON(s *State, id string, now time.Time) string {
	p, ok := s.Get(id)
	if !ok {
		return "<none>"
	}
	v := s.View(p, now)
	return string(v.AppendJSON(nil))
}

func TestSeedLifecycleGolden(t *testing.T) {
	type step struct {
		lines   []string
		now     string
		state   Status
		overdue bool
		horizon int
		assess  int
	}
	steps := []step{
		// The antecedent was minted elsewhere: unknown here, so conditional, never overdue.
		{seedLifecycle[:1], "2026-09-01T17:05:00Z", Conditional, false, 1, 0},
		// With the antecedent declared but open: still conditional.
		{[]string{antecedentLine, seedLifecycle[0]}, "2026-09-01T17:05:00Z", Conditional, false, 1, 0},
		// Antecedent satisfied: owed, and past the deadline: overdue (a view, nothing appended).
		{[]string{antecedentLine, seedLifecycle[0], antecedentSatisfied}, "2026-09-01T17:00:00Z", Owed, false, 1, 0},
		{[]string{antecedentLine, seedLifecycle[0], antecedentSatisfied}, "2026-09-01T17:00:01Z", Owed, true, 1, 0},
		// Amended at 17:12 to 18:00: not overdue at 17:30.
		{[]string{antecedentLine, seedLifecycle[0], antecedentSatisfied, seedLifecycle[1]}, "2026-09-01T17:30:00Z", Owed, false, 2, 0},
		// Assessed violated at 18:40: the state does not move.
		{[]string{antecedentLine, seedLifecycle[0], antecedentSatisfied, seedLifecycle[1], seedLifecycle[2]}, "2026-09-01T18:41:00Z", Owed, true, 2, 1},
		// Satisfied late with evidence; the assessment stays beside it.
		{[]string{antecedentLine, seedLifecycle[0], antecedentSatisfied, seedLifecycle[1], seedLifecycle[2], seedLifecycle[3]}, "2026-09-02T10:00:00Z", Satisfied, false, 2, 1},
	}
	for i, st := range steps {
		s := fold(t, st.lines...)
		p, _ := s.Get("desk/ship-91")
		v := s.View(p, ts(st.now))
		if v.State != st.state || v.Overdue != st.overdue || len(v.Horizons) != st.horizon || len(v.Assessments) != st.assess {
			t.Errorf("step %d: state %s overdue %v horizons %d assessments %d; want %s %v %d %d",
				i, v.State, v.Overdue, len(v.Horizons), len(v.Assessments), st.state, st.overdue, st.horizon, st.assess)
		}
	}
	s := fold(t, seedLifecycle...)
	got := viewJSON(s, "desk/ship-91", ts("2026-09-02T10:00:00Z"))
	want := `{"id":"desk/ship-91","promise":"hand back a reviewed schema","by":"…/reviewer","to":"…/author","on":"pnk_0c2b77","task":null,"until":"2026-09-01T18:00:00Z","horizons":["2026-09-01T17:00:00Z","2026-09-01T18:00:00Z"],"state":"satisfied","overdue":false,"evidence":["https://example.org/reviews/91"],"reason":null,"resolved_by":"…/reviewer","resolved_at":"2026-09-02T09:40:00Z","assessments":[{"observer":"…/author","state":"violated","note":"deadline passed, nothing delivered","ts":"2026-09-01T18:40:00Z"}],"declared":"2026-08-28T20:14:03Z","seq":1,"meta":null}`
	if got != want {
		t.Fatalf("show --json of the seed lifecycle:\n got %s\nwant %s", got, want)
	}
}

func TestFoldRules(t *testing.T) {
	decl := func(id, on string) string {
		s := `{"ts":"2026-08-28T20:00:00Z","type":"promise","id":"` + id + `","promise":"x","by":"d","to":"c",`
		if on != "" {
			s += `"on":"` + on + `",`
		}
		return s + `"until":"2026-09-01T17:00:00Z"}`
	}
	res := func(id, as string) string {
		extra := `,"evidence":["e"]`
		if as != AsSatisfied {
			extra = `,"reason":"r"`
		}
		return `{"ts":"2026-08-29T00:00:00Z","type":"resolve","promise":"` + id + `","as":"` + as + `","by":"d"` + extra + `}`
	}
	amend := func(id, until string) string {
		return `{"ts":"2026-08-29T00:00:00Z","type":"amend","promise":"` + id + `","by":"d","until":"` + until + `"}`
	}
	cases := []struct {
		name  string
		lines []string
		id    string
		want  Status
	}{
		{"no on is owed", []string{decl("a", "")}, "a", Owed},
		{"unknown antecedent is conditional", []string{decl("a", "zz")}, "a", Conditional},
		{"open antecedent is conditional", []string{decl("b", ""), decl("a", "b")}, "a", Conditional},
		{"satisfied antecedent makes owed", []string{decl("b", ""), decl("a", "b"), res("b", AsSatisfied)}, "a", Owed},
		{"cancelled antecedent expires", []string{decl("b", ""), decl("a", "b"), res("b", AsCancelled)}, "a", Expired},
		{"released antecedent expires", []string{decl("b", ""), decl("a", "b"), res("b", AsReleased)}, "a", Expired},
		{"expiry is transitive", []string{decl("c", ""), decl("b", "c"), decl("a", "b"), res("c", AsCancelled)}, "a", Expired},
		{"two-cycle is conditional", []string{decl("a", "b"), decl("b", "a")}, "a", Conditional},
		{"self-cycle is conditional", []string{decl("a", "a")}, "a", Conditional},
		{"resolution wins over antecedent", []string{decl("a", "zz"), res("a", AsSatisfied)}, "a", Satisfied},
		{"first declaration wins", []string{decl("a", ""), decl("a", "zz")}, "a", Owed},
		{"first resolve wins", []string{decl("a", ""), res("a", AsCancelled), res("a", AsSatisfied)}, "a", Cancelled},
		{"cycle broken by a resolve", []string{decl("a", "b"), decl("b", "a"), res("b", AsSatisfied)}, "a", Owed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := fold(t, c.lines...)
			p, _ := s.Get(c.id)
			if got := s.Status(p); got != c.want {
				t.Fatalf("state %s, want %s", got, c.want)
			}
		})
	}
	t.Run("amend after resolve is ignored", func(t *testing.T) {
		s := fold(t, decl("a", ""), amend("a", "2026-09-02T00:00:00Z"), res("a", AsSatisfied), amend("a", "2026-09-03T00:00:00Z"))
		p, _ := s.Get("a")
		if len(p.Horizons) != 2 {
			t.Fatalf("horizons %d, want 2", len(p.Horizons))
		}
	})
	t.Run("records about unknown ids are ignored", func(t *testing.T) {
		s := fold(t, amend("zz", "2026-09-02T00:00:00Z"), res("zz", AsSatisfied))
		if s.Len() != 0 {
			t.Fatal("unknown id created a promise")
		}
	})
	t.Run("conditional is never overdue", func(t *testing.T) {
		s := fold(t, decl("a", "zz"))
		p, _ := s.Get("a")
		if s.Overdue(p, ts("2030-01-01T00:00:00Z")) {
			t.Fatal("conditional promise overdue")
		}
	})
	t.Run("overdue is strict", func(t *testing.T) {
		s := fold(t, decl("a", ""))
		p, _ := s.Get("a")
		if s.Overdue(p, ts("2026-09-01T17:00:00Z")) || !s.Overdue(p, ts("2026-09-01T17:00:01Z")) {
			t.Fatal("overdue must be now > until")
		}
	})
	t.Run("long chain", func(t *testing.T) {
		lines := []string{decl("n0", "")}
		for i := 1; i < 3000; i++ {
			lines = append(lines, decl("n"+itoa(i), "n"+itoa(i-1)))
		}
		lines = append(lines, res("n0", AsCancelled))
		s := fold(t, lines...)
		p, _ := s.Get("n2999")
		if got := s.Status(p); got != Expired {
			t.Fatalf("state %s, want expired", got)
		}
	})
}

func TestDecideRefusals(t *testing.T) {
	s := fold(t, antecedentLine, seedLifecycle[0], seedLifecycle[3])
	lim := DefaultLimits()
	now := ts("2026-09-03T00:00:00Z")
	until := ts("2026-09-05T00:00:00Z")
	long := strings.Repeat("x", 129)
	cases := []struct {
		name  string
		actor string
		cmd   Command
		field string
		code  refuse.Code
	}{
		{"empty text", "a", Declare{ID: "n1", Text: "  ", By: "a", To: "b", Until: until}, "promise", refuse.Invalid},
		{"id with whitespace", "a", Declare{ID: "n 1", Text: "t", By: "a", To: "b", Until: until}, "id", refuse.Invalid},
		{"id over 128", "a", Declare{ID: long, Text: "t", By: "a", To: "b", Until: until}, "id", refuse.Invalid},
		{"duplicate id", "a", Declare{ID: "pnk_0c2b77", Text: "t", By: "a", To: "b", Until: until}, "id", refuse.Conflict},
		{"missing until", "a", Declare{ID: "n1", Text: "t", By: "a", To: "b"}, "until", refuse.Invalid},
		{"missing creditor", "a", Declare{ID: "n1", Text: "t", By: "a", Until: until}, "to", refuse.Invalid},
		{"meta not an object", "a", Declare{ID: "n1", Text: "t", By: "a", To: "b", Until: until, Meta: `[1]`}, "meta", refuse.Invalid},
		{"meta empty object", "a", Declare{ID: "n1", Text: "t", By: "a", To: "b", Until: until, Meta: `{}`}, "meta", refuse.Invalid},
		{"meta over 8 KiB", "a", Declare{ID: "n1", Text: "t", By: "a", To: "b", Until: until, Meta: `{"k":"` + strings.Repeat("x", 8200) + `"}`}, "meta", refuse.Invalid},
		{"declare for someone else", "a", Declare{ID: "n1", Text: "t", By: "b", To: "c", Until: until}, "by", refuse.Forbidden},
		{"no actor", "", Declare{ID: "n1", Text: "t", By: "a", To: "b", Until: until}, "actor", refuse.Invalid},
		{"amend unknown", "…/author", Amend{ID: "nope", Until: until}, "promise", refuse.NotFound},
		{"amend by non-debtor", "…/reviewer", Amend{ID: "pnk_0c2b77", Until: until}, "by", refuse.Forbidden},
		{"amend resolved", "…/reviewer", Amend{ID: "desk/ship-91", Until: until}, "promise", refuse.Conflict},
		{"satisfy without evidence", "…/author", Resolve{ID: "pnk_0c2b77", As: AsSatisfied}, "evidence", refuse.Invalid},
		{"satisfy with blank evidence", "…/author", Resolve{ID: "pnk_0c2b77", As: AsSatisfied, Evidence: []string{"ok", " "}}, "evidence", refuse.Invalid},
		{"cancel without reason", "…/author", Resolve{ID: "pnk_0c2b77", As: AsCancelled}, "reason", refuse.Invalid},
		{"release by debtor", "…/author", Resolve{ID: "pnk_0c2b77", As: AsReleased}, "by", refuse.Forbidden},
		{"satisfy by creditor", "…/reviewer", Resolve{ID: "pnk_0c2b77", As: AsSatisfied, Evidence: []string{"e"}}, "by", refuse.Forbidden},
		{"resolve twice", "…/reviewer", Resolve{ID: "desk/ship-91", As: AsCancelled, Reason: "r"}, "promise", refuse.Conflict},
		{"resolve unknown", "…/reviewer", Resolve{ID: "nope", As: AsCancelled, Reason: "r"}, "promise", refuse.NotFound},
		{"assess as someone else", "x", Assess{ID: "pnk_0c2b77", State: StateViolated, Observer: "y"}, "observer", refuse.Forbidden},
		{"assess unknown", "x", Assess{ID: "nope", State: StateViolated}, "promise", refuse.NotFound},
		{"assess other state", "x", Assess{ID: "pnk_0c2b77", State: "kept"}, "state", refuse.Invalid},
	}
	// The refusals that depend on the state come from Admit; Prepare, which
	// writers run outside the session lock, must not make them.
	byState := map[string]bool{"duplicate id": true, "amend unknown": true, "amend by non-debtor": true, "amend resolved": true,
		"release by debtor": true, "satisfy by creditor": true, "resolve twice": true, "resolve unknown": true, "assess unknown": true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := s.Decide(lim, c.actor, now, c.cmd)
			r, ok := refuse.As(err)
			if !ok {
				t.Fatalf("want a refusal, got %v", err)
			}
			if r.Field != c.field || r.Code != c.code {
				t.Fatalf("refusal %q (code %s), want field %q code %s", r.Error(), r.Code, c.field, c.code)
			}
			p, perr := Prepare(lim, c.actor, now, c.cmd)
			if byState[c.name] {
				if perr != nil {
					t.Fatalf("Prepare refused what only the state decides: %v", perr)
				}
				if _, aerr := s.Admit(&p); aerr == nil || aerr.Error() != err.Error() {
					t.Fatalf("Admit: %v, want %v", aerr, err)
				}
			} else if perr == nil || perr.Error() != err.Error() {
				t.Fatalf("Prepare: %v, want %v", perr, err)
			}
		})
	}
	t.Run("unknown antecedent is a warning", func(t *testing.T) {
		ev, warn, err := s.Decide(lim, "a", now, Declare{ID: "n1", Text: "t", By: "a", To: "b", On: "ghost", Until: until})
		if err != nil || len(warn) != 1 || ev.On != "ghost" {
			t.Fatalf("got %v %v %+v", err, warn, ev)
		}
	})
	t.Run("meta is compacted onto one line", func(t *testing.T) {
		ev, _, err := s.Decide(lim, "a", now, Declare{ID: "n1", Text: "t", By: "a", To: "b", Until: until, Meta: "{\n  \"a\": [1, 2]\n}"})
		if err != nil || ev.Meta != `{"a":[1,2]}` {
			t.Fatalf("meta %q err %v", ev.Meta, err)
		}
	})
}

// AdmitFresh gives a declaration whose id is taken new ones until one is
// free; Admit refuses it.
func TestAdmitFreshMintsAgain(t *testing.T) {
	s := fold(t, antecedentLine, seedLifecycle[0])
	taken := []string{}
	s.Each(func(p *Promise) bool { taken = append(taken, p.ID); return len(taken) < 2 })
	until := ts("2026-09-05T00:00:00Z")
	p, err := Prepare(DefaultLimits(), "a", ts("2026-09-03T00:00:00Z"), Declare{ID: taken[0], Text: "t", By: "a", To: "b", Until: until})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admit(&p); err == nil {
		t.Fatal("Admit accepted a taken id")
	}
	ids := append(taken[1:], "pnk_free01")
	calls := 0
	if _, err := s.AdmitFresh(&p, func() string { calls++; return ids[calls-1] }); err != nil {
		t.Fatal(err)
	}
	if p.Event.ID != "pnk_free01" || calls != len(ids) {
		t.Fatalf("id %q after %d mints, want pnk_free01 after %d", p.Event.ID, calls, len(ids))
	}
}

func TestDecodeKeepsUnknownAndRefusesMalformed(t *testing.T) {
	ev, err := Decode([]byte(`{"ts":"2026-08-28T20:14:03Z","type":"promise","id":"a","promise":"x","by":"d","to":"c","until":"2026-09-01T17:00:00Z","provenance":{"via":"x"}}`))
	if err != nil || ev.ID != "a" {
		t.Fatalf("unknown field: %v", err)
	}
	_, err = Decode([]byte(`{"ts":"2026-08-28T20:14:03Z","type":"escalate","promise":"a"}`))
	if !errors.Is(err, family.ErrUnknownType) {
		t.Fatalf("unknown type: %v", err)
	}
	for _, bad := range []string{
		`{"ts":"2026-08-28T20:14:03Z","type":"promise","id":"a","promise":"x","by":"d","to":"c","until":"soon"}`,
		`{"ts":"2026-08-28T20:14:03Z","type":"resolve","promise":"a","as":"done","by":"d"}`,
		`{"ts":"2026-08-28T20:14:03Z","type":"promise","id":"a","id":"b","promise":"x","by":"d","to":"c","until":"2026-09-01T17:00:00Z"}`,
		`{"type":"promise","id":"a","promise":"x","by":"d","to":"c","until":"2026-09-01T17:00:00Z"}`,
		`{"ts":"2026-08-28T20:14:03Z","type":"promise","id":"a","promise":"x","by":"d","to":"c","until":"2026-09-01T17:00:00Z"`,
	} {
		if _, err := Decode([]byte(bad)); err == nil || errors.Is(err, family.ErrUnknownType) {
			t.Errorf("accepted %s: %v", bad, err)
		}
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	s := fold(t, append([]string{antecedentLine, antecedentSatisfied}, seedLifecycle...)...)
	b := s.AppendSnapshot(nil)
	s2, rest, err := ReadSnapshot(b)
	if err != nil || len(rest) != 0 {
		t.Fatalf("ReadSnapshot: %v (rest %d)", err, len(rest))
	}
	now := ts("2026-09-02T10:00:00Z")
	for _, id := range []string{"pnk_0c2b77", "desk/ship-91"} {
		if a, b := viewJSON(s, id, now), viewJSON(s2, id, now); a != b {
			t.Fatalf("snapshot changed %s:\n%s\n%s", id, a, b)
		}
	}
	if !bytes.Equal(s2.AppendSnapshot(nil), s.AppendSnapshot(nil)) {
		t.Fatal("snapshot of a loaded snapshot differs")
	}
	// An amend after loading must not write into a neighbour's horizons.
	p, _ := s2.Get("pnk_0c2b77")
	before := viewJSON(s2, "desk/ship-91", now)
	p.Horizons = append(p.Horizons, 1)
	if viewJSON(s2, "desk/ship-91", now) != before {
		t.Fatal("horizons of two promises share storage")
	}
	if _, _, err := ReadSnapshot(b[:len(b)/2]); err == nil {
		t.Fatal("truncated snapshot accepted")
	}
}

// TestDecideDefaults checks the defaults every mode gets from the core: a
// declaration without by is the acting identity's own, an assessment
// without a state is violated (and without an observer, the actor's).
func TestDecideDefaults(t *testing.T) {
	s := fold(t, antecedentLine, seedLifecycle[0], seedLifecycle[3])
	now := ts("2026-09-03T00:00:00Z")
	ev, _, err := s.Decide(DefaultLimits(), "a", now, Declare{ID: "n1", Text: "t", To: "b", Until: ts("2026-09-05T00:00:00Z")})
	if err != nil || ev.By != "a" {
		t.Fatalf("declare without by: by %q, %v", ev.By, err)
	}
	ev, _, err = s.Decide(DefaultLimits(), "…/author", now, Assess{ID: "pnk_0c2b77"})
	if err != nil || ev.State != StateViolated || ev.Observer != "…/author" {
		t.Fatalf("assess without state: state %q observer %q, %v", ev.State, ev.Observer, err)
	}
}

// TestDecodeErrorWords pins the words of a decode error, which reach import
// and verify reports: the member and the rule, through family.DecodeError.
func TestDecodeErrorWords(t *testing.T) {
	_, err := Decode([]byte(`{"ts":"2026-08-28T20:14:03Z","promise":"a"}`))
	if err == nil || err.Error() != "type: missing" {
		t.Fatalf("Decode = %v, want %q", err, "type: missing")
	}
}
