package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"tally/ledger"
	"tally/prime"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ with what the tests print")

// primeLedger is a ledger run in process, with its clock set per step.
type primeLedger struct {
	t     *testing.T
	dir   string
	work  string
	clock time.Time
}

func newPrimeLedger(t *testing.T) *primeLedger {
	t.Helper()
	p := &primeLedger{t: t, dir: filepath.Join(t.TempDir(), "ledger"), work: t.TempDir()}
	p.at("2026-08-28T20:14:03Z").must("", "init", "--dir", p.dir)
	return p
}

// at sets the clock the next commands run at.
func (p *primeLedger) at(ts string) *primeLedger {
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		p.t.Fatal(err)
	}
	p.clock = t
	return p
}

// run runs tally as who ("" for no identity) against the ledger.
func (p *primeLedger) run(who string, args ...string) (ExitCode, string, string) {
	p.t.Helper()
	var out, errb bytes.Buffer
	env := map[string]string{"TALLY_DIR": p.dir}
	if who != "" {
		env["TALLY_ACTOR"] = who
	}
	s := testStreams(&out, &errb, env)
	s.Cwd = p.work
	clock := p.clock
	s.Now = func() time.Time { return clock }
	code := Main(args, s)
	return code, out.String(), errb.String()
}

func (p *primeLedger) must(who string, args ...string) string {
	p.t.Helper()
	code, out, errs := p.run(who, args...)
	if code != ExitOK {
		p.t.Fatalf("tally %q as %q: exit %d\nstdout: %s\nstderr: %s", args, who, code, out, errs)
	}
	return out
}

func (p *primeLedger) file(name, content string) string {
	p.t.Helper()
	path := filepath.Join(p.work, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		p.t.Fatal(err)
	}
	return path
}

func (p *primeLedger) logBytes() []byte {
	p.t.Helper()
	b, err := os.ReadFile(filepath.Join(p.dir, "sessions", "default", "default", "log.jsonl"))
	if err != nil {
		p.t.Fatal(err)
	}
	return b
}

// golden compares got with testdata/prime/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "prime", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./cli -run %s -update to write it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

// seedLedger is the seed's promise lifecycle of desk/ship-91 and
// desk/ship-92, owed by reviewer to author, with around it: a promise
// author owes reviewer (desk/fx-1, late from noon), one of reviewer's that
// waits on ship-92 (desk/ship-93), an expectation reviewer raised
// (exp-fixtures, due 16:30 without grace), claim C17 whose review check
// reviewer evaluates, and claim C21 that reviewer is the respondent of.
// It stops before the first deadline passes.
func seedLedger(t *testing.T) *primeLedger {
	p := newPrimeLedger(t)
	p.must("reviewer", "promise", "hand back a reviewed schema", "--id", "desk/ship-91", "--to", "author", "--until", "2026-09-01T17:00:00Z")
	p.must("reviewer", "promise", "ship the parser fix", "--id", "desk/ship-92", "--to", "author", "--until", "2026-09-03T12:00:00Z")
	p.must("reviewer", "promise", "announce the release", "--id", "desk/ship-93", "--to", "author", "--on", "desk/ship-92", "--until", "2026-09-04T12:00:00Z")
	p.must("author", "promise", "send the test fixtures", "--id", "desk/fx-1", "--to", "reviewer", "--until", "2026-09-01T12:00:00Z")
	p.must("reviewer", "expect", "raise", "--id", "exp-fixtures", "--kind", "fixtures.delivery", "--subject", "repo:parser",
		"--fact-key", "fixtures.sent:parser", "--due", "2026-09-01T16:30:00Z", "--basis", "declared")

	p.at("2026-08-29T09:00:00Z")
	p.must("maintainer", "claim", "create", "C17", "--respondent", "parser", "--work", "reject incomplete Unicode escapes",
		"--check", "change/behavior:validator=command@1", "--check", "change/review:validator=review@1,evaluator=reviewer,phases=quality")
	p.must("maintainer", "claim", "post", "C17")
	p.must("parser", "receipt", "acquire", "C17")
	p.must("parser", "artifact", "put", p.file("patch.txt", "+\tif len(s) < 6 { return errIncomplete }\n"), "--claim", "C17",
		"--slot", "change", "--generation", "1", "--kind", "patch", "--id", "patch-a")
	p.must("parser", "testament", "close", "C17", "--id", "T1", "--generation", "1", "--outcome", "complete",
		"--summary", "length check before decoding the escape", "--bind", "change=patch-a")
	p.must("parser", "testament", "post", "C17", "T1")
	p.must("maintainer", "testament", "receive", "C17", "T1")
	p.must("maintainer", "claim", "create", "C21", "--respondent", "reviewer", "--work", "review the schema migration",
		"--check", "report/read:validator=review@1,phases=quality", "--deadline", "2026-09-02T12:00:00Z")
	p.must("maintainer", "claim", "post", "C21")
	return p
}

// prime runs tally prime as reviewer at now.
func (p *primeLedger) prime(now string, extra ...string) string {
	p.t.Helper()
	return p.must("reviewer", append([]string{"prime", "--now", now}, extra...)...)
}

// TestPrimeSeedLifecycle: the seat's context before ship-91's deadline,
// just after it (with the expectation's lapse recorded), after the nudge
// moved it, and a day later once it was resolved; as text and as JSON.
func TestPrimeSeedLifecycle(t *testing.T) {
	p := seedLedger(t)
	p.at("2026-09-01T16:00:00Z")
	golden(t, "1-before-deadline.txt", p.prime("2026-09-01T16:00:00Z"))

	p.at("2026-09-01T17:05:00Z")
	p.must("", "watch", "--once", "--now", "2026-09-01T17:05:00Z")
	just := p.prime("2026-09-01T17:05:00Z")
	golden(t, "2-just-after.txt", just)
	golden(t, "2-just-after.json", p.prime("2026-09-01T17:05:00Z", "--json"))
	// tally owed --format prime is the same output.
	if got := p.must("reviewer", "owed", "--format", "prime", "--now", "2026-09-01T17:05:00Z"); got != just {
		t.Errorf("owed --format prime differs from prime:\n%s", got)
	}

	// The nudge (seed: amend at 17:12), and reviewer begins its review.
	p.at("2026-09-01T17:12:00Z")
	p.must("reviewer", "amend", "desk/ship-91", "--until", "2026-09-01T18:00:00Z", "--reason", "nudge 1")
	p.must("reviewer", "check", "begin", "review", "--claim", "C17", "--artifact", "patch-a")
	golden(t, "3-amended.txt", p.prime("2026-09-01T17:15:00Z"))

	// The observer's judgment, then the late delivery with evidence.
	p.at("2026-09-01T18:40:00Z")
	p.must("author", "assess", "desk/ship-91", "--violated", "--note", "deadline passed, nothing delivered")
	p.at("2026-09-02T09:40:00Z")
	p.must("reviewer", "resolve", "desk/ship-91", "--satisfied", "--evidence", "https://example.org/reviews/91")
	// reviewer takes C21 on: its work is now to publish.
	p.at("2026-09-02T10:00:00Z")
	p.must("reviewer", "receipt", "acquire", "C21")
	golden(t, "4-day-after.txt", p.prime("2026-09-02T17:05:00Z"))
}

// TestPrimeTokenBound: a small bound keeps the highest-priority items,
// says how many it left out of each section and where to list them, and
// fits; the JSON document keeps the same items.
func TestPrimeTokenBound(t *testing.T) {
	p := seedLedger(t)
	p.at("2026-09-01T17:05:00Z")
	p.must("", "watch", "--once", "--now", "2026-09-01T17:05:00Z")
	const now = "2026-09-01T17:05:00Z"
	full := p.prime(now)
	for _, tokens := range []int{150, 250, 350} {
		got := p.prime(now, "--max-tokens", strconv.Itoa(tokens))
		if len(got) > tokens*prime.BytesPerToken {
			t.Errorf("--max-tokens %d: %d bytes, over %d", tokens, len(got), tokens*prime.BytesPerToken)
		}
		if got == full || !strings.Contains(got, "… and ") {
			t.Errorf("--max-tokens %d: nothing trimmed:\n%s", tokens, got)
		}
	}
	// A bound the whole context just fits in keeps all of it; one byte less
	// (a token, here) trims.
	exact := (len(full) + prime.BytesPerToken - 1) / prime.BytesPerToken
	if got := p.prime(now, "--max-tokens", strconv.Itoa(exact)); got != full {
		t.Errorf("--max-tokens %d (%d bytes) trimmed a context of %d bytes:\n%s", exact, exact*prime.BytesPerToken, len(full), got)
	}
	if got := p.prime(now, "--max-tokens", strconv.Itoa(exact-1)); got == full || len(got) > (exact-1)*prime.BytesPerToken {
		t.Errorf("--max-tokens %d: %d bytes:\n%s", exact-1, len(got), got)
	}
	golden(t, "bound-200.txt", p.prime(now, "--max-tokens", "200"))
	// The JSON of a trimmed context holds the items the text kept.
	var doc map[string]struct {
		Total   int `json:"total"`
		LeftOut int `json:"left_out"`
		Items   []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	raw := p.prime(now, "--max-tokens", "200", "--json")
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &top); err != nil {
		t.Fatal(err)
	}
	delete(top, "schema_version")
	delete(top, "seat")
	delete(top, "now")
	delete(top, "max_tokens")
	b, _ := json.Marshal(top)
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	text := p.prime(now, "--max-tokens", "200")
	kept, left := 0, 0
	for name, s := range doc {
		left += s.LeftOut
		for _, it := range s.Items {
			kept++
			if !strings.Contains(text, "- "+it.ID+" ") {
				t.Errorf("%s: %s is in the JSON but not the text", name, it.ID)
			}
		}
		if len(s.Items)+s.LeftOut != s.Total {
			t.Errorf("%s: %d items + %d left out != total %d", name, len(s.Items), s.LeftOut, s.Total)
		}
	}
	if kept == 0 || left == 0 || strings.Count(text, "\n- ") != kept {
		t.Errorf("kept %d, left out %d; text:\n%s", kept, left, text)
	}
	// A bound too small for anything but the header prints the header and
	// the pointers only.
	if got := p.prime(now, "--max-tokens", "1"); strings.Contains(got, "\n- ") || !strings.Contains(got, "… and 3 more: tally owed --as reviewer") {
		t.Errorf("--max-tokens 1:\n%s", got)
	}
}

// TestPrimeStable: the same ledger and --now print the same bytes, run
// after run, with a checkpoint written, and with it deleted and rebuilt.
func TestPrimeStable(t *testing.T) {
	p := seedLedger(t)
	p.at("2026-09-01T17:05:00Z")
	p.must("", "watch", "--once", "--now", "2026-09-01T17:05:00Z")
	const now = "2026-09-01T17:05:00Z"
	outputs := func() [2]string { return [2]string{p.prime(now), p.prime(now, "--json")} }
	want := outputs()
	p.at("2026-09-05T00:00:00Z") // the clock moves; --now does not
	if got := outputs(); got != want {
		t.Fatalf("second run differs:\n%s\n%s", got[0], want[0])
	}
	dir := filepath.Join(p.dir, "sessions", "default", "default")
	l, err := ledger.Open(dir, ledger.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	cp := filepath.Join(dir, "checkpoint")
	if _, err := os.Stat(cp); err != nil {
		t.Fatalf("no checkpoint: %v", err)
	}
	if got := outputs(); got != want {
		t.Fatalf("from the checkpoint:\n%s\nwant\n%s", got[0], want[0])
	}
	if err := os.Remove(cp); err != nil {
		t.Fatal(err)
	}
	if got := outputs(); got != want {
		t.Fatalf("with the checkpoint deleted:\n%s\nwant\n%s", got[0], want[0])
	}
}

// TestPrimeBadInput: a bound that is not a positive number of tokens, a
// blank seat, no seat at all and a malformed --now exit 2 naming the flag,
// and append nothing; an unknown seat is an empty context, exit 0.
func TestPrimeBadInput(t *testing.T) {
	p := seedLedger(t)
	before := p.logBytes()
	for _, c := range []struct {
		who  string
		args []string
		want string
	}{
		{"reviewer", []string{"prime", "--max-tokens", "0"}, "max-tokens: must be a positive number of tokens (got 0)"},
		{"reviewer", []string{"prime", "--max-tokens", "-5"}, "max-tokens: must be a positive number of tokens (got -5)"},
		{"reviewer", []string{"prime", "--max-tokens", "many"}, `invalid argument "many" for "--max-tokens"`},
		{"reviewer", []string{"prime", "--seat", " "}, "seat: must not be blank"},
		{"", []string{"prime"}, "seat: required: pass --seat WHO or --as WHO, or set TALLY_ACTOR"},
		{"reviewer", []string{"prime", "--now", "yesterday"}, "now:"},
		{"reviewer", []string{"owed", "--format", "yaml"}, "format: must be text or prime"},
	} {
		code, out, errs := p.run(c.who, c.args...)
		if code != ExitUsage || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errs, c.want)
		}
		if strings.Contains(c.want, "invalid argument") {
			continue // a flag cobra cannot parse is refused before --json is read
		}
		code, _, errs = p.run(c.who, append(c.args, "--json")...)
		if code != ExitUsage || !strings.Contains(errs, `"schema_version"`) {
			t.Errorf("%q --json: exit %d, stderr %q", c.args, code, errs)
		}
	}
	if !bytes.Equal(before, p.logBytes()) {
		t.Fatal("a refused prime changed the log")
	}
	got := p.must("reviewer", "prime", "--seat", "nobody", "--now", "2026-09-01T17:05:00Z")
	golden(t, "unknown-seat.txt", got)
}

// TestPrimeNextCommandsRun: every command prime offers as the next step
// runs as printed once its placeholders are filled in, and what it acted
// on leaves the context.
func TestPrimeNextCommandsRun(t *testing.T) {
	p := seedLedger(t)
	p.at("2026-09-01T17:05:00Z")
	p.must("", "watch", "--once", "--now", "2026-09-01T17:05:00Z")
	p.at("2026-09-01T17:12:00Z")
	p.must("reviewer", "check", "begin", "review", "--claim", "C17", "--artifact", "patch-a")
	p.must("reviewer", "receipt", "acquire", "C21")
	const now = "2026-09-01T17:20:00Z"
	p.at(now)
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(p.prime(now, "--json")), &doc); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("FILE", p.file("out.txt", "the report\n"), "ARTIFACT", "rep-1", "TESTAMENT", "T1", "TEXT", "done",
		"REF", "https://example.org/r/1", "WHEN", "2026-09-05T00:00:00Z", "NEW", "exp-fixtures-2", "CMD", "true",
		"VERDICT", "pass")
	ran := map[string]bool{}
	for _, name := range prime.SectionOrder {
		var sec struct {
			Items []prime.Item `json:"items"`
		}
		if err := json.Unmarshal(doc[name], &sec); err != nil {
			t.Fatal(err)
		}
		for _, it := range sec.Items {
			for _, cmd := range it.Next {
				args := strings.Fields(fill.Replace(cmd))
				if args[0] != "tally" {
					t.Fatalf("not a tally command: %q", cmd)
				}
				p.must("reviewer", args[1:]...)
			}
			ran[it.ID] = true
		}
	}
	for _, id := range []string{"desk/ship-91", "desk/ship-92", "desk/fx-1", "C17", "C21", "exp-fixtures"} {
		if !ran[id] {
			t.Errorf("no item for %s", id)
		}
	}
	after := p.prime(now)
	for _, gone := range []string{"- desk/ship-91 ", "- desk/ship-92 ", "- C17 ", "- C21 ", "- exp-fixtures "} {
		if strings.Contains(after, gone) {
			t.Errorf("%q is still waiting after its next commands ran:\n%s", gone, after)
		}
	}
	// ship-93 is owed now that ship-92 is satisfied; fx-1 was assessed
	// violated, which closes nothing: both remain.
	if !strings.Contains(after, "- desk/ship-93 to author, due in") || !strings.Contains(after, "- desk/fx-1 by author, overdue") {
		t.Errorf("after:\n%s", after)
	}
}

// TestPrimeClaimSteps: the steps of a claim wait on each party in turn:
// the claimant posts, the respondent acquires the receipt, publishes,
// closes and posts its testament, the claimant receives it, and each
// evaluator checks the candidate.
func TestPrimeClaimSteps(t *testing.T) {
	p := newPrimeLedger(t)
	const now = "2026-09-01T12:00:00Z"
	p.at("2026-08-30T09:00:00Z")
	p.must("maintainer", "claim", "create", "C30", "--respondent", "parser", "--work", "fix the lexer",
		"--check", "change/behavior:validator=command@1", "--check", "log/read:validator=review@1,evaluator=reviewer,phases=quality")
	step := func(name string, seats ...string) {
		t.Helper()
		var all strings.Builder
		for _, s := range seats {
			all.WriteString(p.must(s, "prime", "--now", now))
		}
		golden(t, "claim-"+name+".txt", all.String())
	}
	step("1-generated", "maintainer", "parser")
	p.must("maintainer", "claim", "post", "C30")
	step("2-posted", "maintainer", "parser")
	p.must("parser", "receipt", "acquire", "C30")
	step("3-received", "parser")
	p.must("parser", "artifact", "put", p.file("fix.patch", "+fixed\n"), "--claim", "C30", "--slot", "change", "--generation", "1", "--id", "fix-1")
	p.must("parser", "artifact", "put", p.file("test.log", "ok\n"), "--claim", "C30", "--slot", "log", "--generation", "1", "--id", "log-1")
	p.must("parser", "testament", "close", "C30", "--id", "T1", "--generation", "1", "--outcome", "complete", "--summary", "fixed",
		"--bind", "change=fix-1", "--bind", "log=log-1")
	step("4-closed", "parser", "maintainer")
	p.must("parser", "testament", "post", "C30", "T1")
	step("5-posted", "parser", "maintainer")
	p.must("maintainer", "testament", "receive", "C30", "T1")
	step("6-checks", "maintainer", "reviewer", "parser")
}

// TestPrimeClaimsExamined: prime reads at most prime.ClaimsMax of a seat's
// open claims, the most pressing first, and counts the rest as not
// examined, pointing at the full list.
func TestPrimeClaimsExamined(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a claim per examined slot")
	}
	p := newPrimeLedger(t)
	n := prime.ClaimsMax + 2
	for i := 0; i < n; i++ {
		id := "C" + strconv.Itoa(100+i)
		args := []string{"claim", "create", id, "--respondent", "reviewer", "--work", "task " + id, "--no-checks"}
		if i == n-1 {
			args = append(args, "--deadline", "2026-09-01T00:00:00Z") // the most pressing, created last
		}
		p.must("maintainer", args...)
		p.must("maintainer", "claim", "post", id)
	}
	got := p.must("reviewer", "prime", "--now", "2026-09-02T00:00:00Z", "--max-tokens", "100000")
	if !strings.Contains(got, "… and 2 more open claim(s) it takes part in, not examined: tally claim ls --open --participant reviewer\n") {
		t.Errorf("no count of the claims not examined:\n%s", got)
	}
	if !strings.Contains(got, "- C"+strconv.Itoa(100+n-1)+" as respondent (Posted, overdue 1d)") || strings.Contains(got, "- C"+strconv.Itoa(100+n-2)+" ") {
		t.Errorf("the overdue claim should be examined first, and the last two created without a deadline not at all:\n%s", got)
	}
	if c := strings.Count(got, "\n- C"); c != prime.ClaimsMax {
		t.Errorf("%d claim steps, want %d", c, prime.ClaimsMax)
	}
}

// TestPrimeRemoteIdentityFailure: over TALLY_URL without --seat the seat is
// the token's identity; a server that cannot be asked is an operational
// failure (exit 1) naming the server, not a missing flag.
func TestPrimeRemoteIdentityFailure(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main([]string{"prime"}, testStreams(&out, &errb, map[string]string{"TALLY_URL": "http://127.0.0.1:1"}))
	if code != ExitError || out.Len() != 0 || !strings.Contains(errb.String(), "server http://127.0.0.1:1") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}
