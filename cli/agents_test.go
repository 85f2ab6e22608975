package cli

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"tally/prime"
)

// TestPrimeCommandsCarrySessionAndAs: the commands prime and owed print
// carry --session when the session is not the default and --as when the
// seat is not the one TALLY_ACTOR names; in the default session with the
// seat in the environment they are as before.
func TestPrimeCommandsCarrySessionAndAs(t *testing.T) {
	p := newPrimeLedger(t)
	p.at("2026-09-01T10:00:00Z")
	for _, s := range []string{"default/default", "fleet/load"} {
		p.must("worker", "--session", s, "promise", "write it", "--id", "L1", "--to", "lead", "--until", "2026-09-01T09:00:00Z")
	}
	const now = "2026-09-01T10:00:00Z"
	for _, c := range []struct {
		env  string   // TALLY_ACTOR
		args []string // before the verb
		want string   // the resolve command printed
	}{
		{"worker", nil, "next: tally resolve L1 --satisfied --evidence REF\n"},
		{"worker", []string{"--session", "fleet/load"}, "next: tally --session fleet/load resolve L1 --satisfied --evidence REF\n"},
		{"", []string{"--session", "fleet/load", "--as", "worker"}, "next: tally --session fleet/load --as worker resolve L1 --satisfied --evidence REF\n"},
		{"lead", []string{"--session", "fleet/load"}, "next: tally --session fleet/load --as worker resolve L1 --satisfied --evidence REF\n"}, // --seat worker
	} {
		args := append(append([]string{}, c.args...), "prime", "--now", now)
		if c.env == "lead" {
			args = append(args, "--seat", "worker")
		}
		got := p.must(c.env, args...)
		if !strings.Contains(got, c.want) || !strings.Contains(got, "… and") && strings.Contains(got, "--as worker") != strings.Contains(c.want, "--as") {
			t.Errorf("TALLY_ACTOR %q, %q:\n%s", c.env, args, got)
		}
		if c.env == "lead" {
			continue
		}
		owed := p.must(c.env, append(append([]string{}, c.args...), "owed", "--now", now)...)
		flags := strings.TrimSuffix(strings.TrimPrefix(c.want, "next: tally "), "resolve L1 --satisfied --evidence REF\n")
		if want := "Resolve one with: tally " + flags + "resolve ID --satisfied --evidence REF\n  or:   tally " + flags +
			"resolve ID --cancelled --reason TEXT\nMove a deadline with: tally " + flags + "amend ID --until WHEN --reason TEXT\n"; !strings.HasSuffix(owed, want) {
			t.Errorf("owed, TALLY_ACTOR %q, %q:\n%s\nwant suffix:\n%s", c.env, c.args, owed, want)
		}
	}
}

// TestExpectPastDueIsAView: an open expectation past its due and grace
// shows as such in expect ls, expect show and prime, with nothing
// recorded; once the timekeeper records the lapse, the view gives way to
// the lapse.
func TestExpectPastDueIsAView(t *testing.T) {
	p := newPrimeLedger(t)
	p.at("2026-09-01T10:00:00Z")
	p.must("worker", "expect", "raise", "--id", "exp-1", "--kind", "build", "--subject", "repo:parser", "--fact-key", "built:parser",
		"--due", "2026-09-01T11:00:00Z", "--grace", "30m", "--basis", "declared")
	p.must("lead", "expect", "raise", "--id", "exp-2", "--kind", "bench", "--subject", "repo:lexer", "--fact-key", "bench:lexer",
		"--due", "2026-09-01T11:00:00Z", "--basis", "declared", "--producer", "worker")
	before := p.logBytes()
	const early, late = "2026-09-01T11:20:00Z", "2026-09-01T11:45:00Z"
	if ls := p.must("worker", "expect", "ls", "--now", early); !strings.Contains(ls, "exp-1  open    ") || !strings.Contains(ls, "exp-2  open (due passed, lapse not yet recorded)") {
		t.Errorf("exp-1 within its grace, exp-2 (none) past due:\n%s", ls)
	}
	ls := p.must("worker", "expect", "ls", "--now", late)
	if !strings.Contains(ls, "exp-1  open (due passed, lapse not yet recorded)  build") {
		t.Errorf("expect ls past grace:\n%s", ls)
	}
	show := p.must("worker", "expect", "show", "exp-1", "--now", late)
	if !strings.Contains(show, "  past due:   due passed 15m ago (at 2026-09-01T11:30:00Z), lapse not yet recorded\n") {
		t.Errorf("expect show:\n%s", show)
	}
	if show := p.must("worker", "expect", "show", "exp-2", "--now", late); !strings.Contains(show, "  producer:   worker\n") {
		t.Errorf("expect show exp-2:\n%s", show)
	}
	// --json carries the view too: duePassed, only while it holds.
	if doc := p.must("worker", "expect", "show", "exp-1", "--now", late, "--json"); !strings.Contains(doc, `"duePassed":true`) {
		t.Errorf("expect show --json past grace:\n%s", doc)
	}
	if doc := p.must("worker", "expect", "ls", "--now", early, "--json"); strings.Count(doc, `"duePassed":true`) != 1 {
		t.Errorf("expect ls --json, exp-2 alone past due:\n%s", doc)
	}
	prime := p.must("worker", "prime", "--now", late)
	for _, want := range []string{
		"- exp-1 due passed 15m ago, lapse not yet recorded, due 2026-09-01T11:00:00Z: build on repo:parser\n",
		"## Facts expected of worker\n- exp-2 raised by lead, due passed 45m ago, lapse not yet recorded (due 2026-09-01T11:00:00Z): bench on repo:lexer\n  next: tally fact bench:lexer --subject repo:lexer --at WHEN\n",
	} {
		if !strings.Contains(prime, want) {
			t.Errorf("prime lacks %q:\n%s", want, prime)
		}
	}
	if !bytes.Equal(p.logBytes(), before) {
		t.Fatal("a read recorded something")
	}
	p.at(late)
	p.must("", "watch", "--once", "--now", late)
	if ls := p.must("worker", "expect", "ls", "--now", late); strings.Contains(ls, "due passed") || !strings.Contains(ls, "1 lapse(s)") {
		t.Errorf("after the lapse:\n%s", ls)
	}
	if doc := p.must("worker", "expect", "show", "exp-1", "--now", late, "--json"); strings.Contains(doc, "duePassed") {
		t.Errorf("expect show --json after the lapse:\n%s", doc)
	}
}

// TestSmallerAgentFixes: testament post says it posted; a promise declared
// overdue warns; owed prints whole seconds from a clock with nanoseconds;
// expect supersede's help requires no inherited term.
func TestSmallerAgentFixes(t *testing.T) {
	p := newPrimeLedger(t)
	p.at("2026-09-01T10:00:00Z")
	p.must("lead", "claim", "create", "C1", "--respondent", "worker", "--work", "w", "--no-checks")
	p.must("lead", "claim", "post", "C1")
	p.must("worker", "receipt", "acquire", "C1")
	p.must("worker", "testament", "close", "C1", "--id", "T1", "--generation", "1", "--outcome", "complete", "--summary", "s")
	if out := p.must("worker", "testament", "post", "C1", "T1"); out != "C1: testament T1 posted\nC1: TestamentGenerated\n" {
		t.Errorf("testament post printed %q", out)
	}
	code, _, errs := p.run("worker", "promise", "late", "--id", "P1", "--to", "lead", "--until", "2026-09-01T09:00:00Z")
	if code != ExitOK || errs != "warning: until: 2026-09-01T09:00:00Z has already passed: P1 is overdue from its declaration\n" {
		t.Errorf("declared overdue: exit %d, stderr %q", code, errs)
	}
	if _, _, errs := p.run("worker", "promise", "soon", "--id", "P2", "--to", "lead", "--until", "1h"); errs != "" {
		t.Errorf("declared in time: stderr %q", errs)
	}
	// An observer's identical assessment is recorded once: the second
	// answers with the first and appends nothing; another note is new.
	first := p.must("lead", "assess", "P1", "--violated", "--note", "late")
	log := p.logBytes()
	code, again, errs := p.run("lead", "assess", "P1", "--violated", "--note", "late")
	if code != ExitOK || again != first || errs != "warning: assess: lead already judged P1 violated with this note (seq 8); nothing appended\n" || !bytes.Equal(p.logBytes(), log) {
		t.Errorf("assessed twice: exit %d, %q (first %q), stderr %q, log changed %v", code, again, first, errs, !bytes.Equal(p.logBytes(), log))
	}
	if p.must("lead", "assess", "P1", "--violated", "--note", "very late"); bytes.Equal(p.logBytes(), log) {
		t.Error("another note was not recorded")
	}
	p.clock = time.Date(2026, 9, 1, 10, 0, 0, 123456789, time.UTC)
	if out := p.must("worker", "owed"); !strings.HasPrefix(out, "worker owes 2 open promise(s), 1 overdue, as of 2026-09-01T10:00:00Z:\n") {
		t.Errorf("owed:\n%s", out)
	}
	if out := p.must("worker", "prime"); !strings.HasPrefix(out, "# tally prime: worker, as of 2026-09-01T10:00:00Z\n") {
		t.Errorf("prime:\n%s", out)
	}
	p.must("lead", "claim", "create", "C2", "--respondent", "worker", "--work", "w", "--no-checks")
	if out := p.must("lead", "claim", "show", "C2"); !strings.Contains(out, "2026-09-01T10:00:00Z (seq ") {
		t.Errorf("claim show:\n%s", out)
	}
	help := p.must("", "expect", "supersede", "--help")
	for _, l := range strings.Split(help, "\n") {
		if (strings.Contains(l, "--basis") || strings.Contains(l, "--due ")) && strings.Contains(l, "required") {
			t.Errorf("supersede --help: %q", l)
		}
	}
}

// TestPrimeFailedClaimsBounded: the failed claims prime reads for a
// successor are the newest prime.FailedMax; older ones are counted, with
// the command that lists them.
func TestPrimeFailedClaimsBounded(t *testing.T) {
	p := newPrimeLedger(t)
	p.at("2026-09-01T10:00:00Z")
	n := prime.FailedMax + 2
	for i := 0; i < n; i++ {
		id := "F" + strconv.Itoa(10+i)
		p.must("lead", "claim", "create", id, "--respondent", "worker", "--work", "task "+id, "--no-checks")
		p.must("lead", "claim", "post", id, "--failed", "--reason", "no runner")
	}
	got := p.must("lead", "prime", "--now", "2026-09-01T11:00:00Z", "--max-tokens", "100000")
	if c := strings.Count(got, "\n- F"); c != prime.FailedMax {
		t.Errorf("%d failed claims shown, want %d:\n%s", c, prime.FailedMax, got)
	}
	if !strings.Contains(got, "- F"+strconv.Itoa(10+n-1)+" as claimant (PostFailed): failed: no runner; correct it with a successor claim; work: task F") ||
		strings.Contains(got, "- F10 ") || !strings.Contains(got, "… and 2 older failed claim(s) it took part in, not examined for a successor: tally claim ls --participant lead\n") {
		t.Errorf("prime of lead:\n%s", got)
	}
}
