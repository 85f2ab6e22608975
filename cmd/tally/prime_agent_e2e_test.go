package main

// Agents run what prime prints. These tests set up a fleet's ledger in a
// session of its own, then act as a seat would: in a shell of its own
// worktree (another directory), with only the environment docs/AGENTS.md
// gives it, each command run verbatim through sh -c.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// fleet is a ledger directory with a session of work in it, and an empty
// worktree beside it.
type fleet struct {
	t        *testing.T
	dir      string // the fleet's ledger directory
	worktree string // where a seat's shell runs: not under dir
	file     string // a file for the FILE placeholder
}

const fleetSession = "default/load"

func newFleet(t *testing.T) *fleet {
	t.Helper()
	f := &fleet{t: t, dir: filepath.Join(t.TempDir(), "fleet"), worktree: t.TempDir()}
	f.file = filepath.Join(f.worktree, "report.txt")
	if err := os.WriteFile(f.file, []byte("go test ./...: FAIL\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := run(t, runOpts{}, "init", "--dir", f.dir); r.code != 0 {
		t.Fatalf("init: %v", r)
	}
	return f
}

// as runs a setup step as who in the fleet's session.
func (f *fleet) as(who string, args ...string) string {
	f.t.Helper()
	r := run(f.t, runOpts{}, append([]string{"--dir", f.dir, "--session", fleetSession, "--as", who}, args...)...)
	if r.code != 0 {
		f.t.Fatalf("as %s: %v", who, r)
	}
	return r.out
}

// seed sets up: what worker-1 owes (L1 due, L2 overdue), what maintainer
// owes it late (M1), an expectation worker-1 raised past its due with no
// lapse recorded (exp-1), one maintainer raised that names worker-1 as the
// seat producing its fact (exp-2), a claim posted to worker-1 (C1) and one
// whose required check failed (C2).
func (f *fleet) seed() {
	ago := func(d time.Duration) string { return time.Now().UTC().Add(-d).Format(time.RFC3339) }
	f.as("worker-1", "promise", "write the parser", "--id", "L1", "--to", "maintainer", "--until", "2h")
	f.as("worker-1", "promise", "send the notes", "--id", "L2", "--to", "maintainer", "--until", ago(time.Hour))
	f.as("maintainer", "promise", "review the plan", "--id", "M1", "--to", "worker-1", "--until", ago(30*time.Minute))
	f.as("worker-1", "expect", "raise", "--id", "exp-1", "--kind", "build", "--subject", "repo:parser", "--fact-key", "built:parser",
		"--due", ago(10*time.Minute), "--basis", "declared")
	f.as("maintainer", "expect", "raise", "--id", "exp-2", "--kind", "benchmark", "--subject", "repo:lexer", "--fact-key", "bench:lexer",
		"--due", "3h", "--basis", "declared", "--producer", "worker-1")
	for _, c := range []string{"C1", "C2"} {
		f.as("maintainer", "claim", "create", c, "--respondent", "worker-1", "--work", "fix "+c,
			"--check", "change/tests:validator=command@1,evaluator=maintainer")
		f.as("maintainer", "claim", "post", c)
	}
	f.as("worker-1", "receipt", "acquire", "C2")
	f.as("worker-1", "artifact", "put", f.file, "--claim", "C2", "--slot", "change", "--generation", "1", "--id", "a1")
	f.as("worker-1", "testament", "close", "C2", "--id", "T1", "--generation", "1", "--outcome", "complete", "--summary", "fixed", "--bind", "change=a1")
	f.as("worker-1", "testament", "post", "C2", "T1")
	f.as("maintainer", "testament", "receive", "C2", "T1")
	f.as("maintainer", "check", "report", "tests", "--claim", "C2", "--artifact", "a1", "--result", "fail", "--evidence-file", f.file)
}

// shell is a seat's shell as docs/AGENTS.md sets it up: the ledger in
// TALLY_DIR, and the seat in TALLY_ACTOR unless actor is "" (then each
// command must say --as itself).
func (f *fleet) shell(actor string) []string {
	env := []string{"PATH=" + filepath.Dir(tallyBin) + ":/usr/bin:/bin", "HOME=" + f.worktree, "NO_COLOR=1", "TALLY_DIR=" + f.dir}
	if actor != "" {
		env = append(env, "TALLY_ACTOR="+actor)
	}
	return env
}

// sh runs line through sh -c in the worktree with env alone.
func (f *fleet) sh(env []string, line string) result {
	f.t.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.Env, cmd.Dir = env, f.worktree
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{args: []string{line}, out: out.String(), err: errb.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		f.t.Fatalf("sh -c %q: %v", line, err)
	}
	return r
}

// suggested are the commands a prime text offers: its next, then and or
// steps and its pointers to full lists.
var suggested = regexp.MustCompile(`(?m)(?:^  (?:next|then|or): +|: )(tally [^\n]*)$`)

func commandsOf(text string) []string {
	var out []string
	for _, m := range suggested.FindAllStringSubmatch(text, -1) {
		out = append(out, strings.TrimSpace(m[1]))
	}
	return out
}

// fill puts a value in each placeholder (CAPITALS), each one word.
func (f *fleet) fill(cmd string) string {
	at := time.Now().UTC().Add(-time.Minute).Format(time.RFC3339)
	return strings.NewReplacer("--at WHEN", "--at "+at, "WHEN", "2h", "REF", "ref-1", "TEXT", "done", "FILE", f.file,
		"ARTIFACT", "art-9", "TESTAMENT", "T9", "NEW", "new-1", "CMD", "true", "VERDICT", "pass", "ID", "L1").Replace(cmd)
}

// notFound are the words of a refusal that names something that is not
// there: a command that dropped its session, or named the wrong ledger.
var notFound = regexp.MustCompile(`no promise with id|no claim "|no artifact "|no testament "|no expectation|no ledger|not a tally ledger|owes nothing open|required: pass --as`)

// TestE2EPrimeCommandsRunAsPrinted: every command prime and owed print for
// a seat of a session other than the default, in a shell of the seat's
// worktree with only the environment docs/AGENTS.md sets, runs as printed:
// none is refused as usage (exit 2) or for naming what is not there. With
// the seat in TALLY_ACTOR the commands carry --session; with it given by
// --as, they carry --as too.
func TestE2EPrimeCommandsRunAsPrinted(t *testing.T) {
	f := newFleet(t)
	f.seed()
	total := 0
	for _, c := range []struct {
		seat, actor string // actor: TALLY_ACTOR, "" when the seat comes by --as
	}{{"maintainer", "maintainer"}, {"worker-1", "worker-1"}, {"maintainer", ""}, {"worker-1", ""}} {
		env := f.shell(c.actor)
		prime := "tally --session " + fleetSession + " prime"
		flags := "--session " + fleetSession + " "
		if c.actor == "" {
			prime += " --as " + c.seat
			flags += "--as " + c.seat + " "
		}
		r := f.sh(env, prime)
		if r.code != 0 {
			t.Fatalf("%s: %v", prime, r)
		}
		text := r.out
		owed := f.sh(env, strings.Replace(prime, " prime", " owed", 1))
		text += owed.out
		cmds := commandsOf(text)
		total += len(cmds)
		if len(cmds) == 0 {
			t.Fatalf("%s (TALLY_ACTOR %q) offers %d commands:\n%s", c.seat, c.actor, len(cmds), text)
		}
		for _, cmd := range cmds {
			if !strings.HasPrefix(cmd, "tally "+flags) {
				t.Errorf("%s: %q does not carry %q", c.seat, cmd, flags)
				continue
			}
			r := f.sh(env, f.fill(cmd))
			if r.code == 2 || r.code == 127 || notFound.MatchString(r.err) {
				t.Errorf("%s (TALLY_ACTOR %q): %q fails as printed: exit %d: %s", c.seat, c.actor, f.fill(cmd), r.code, r.err)
			}
		}
	}
	if total < 20 {
		t.Errorf("%d commands offered in all: too few to hold the rule", total)
	}
	// Outside any ledger, the refusal points at the fleet's before init.
	env := []string{"PATH=" + filepath.Dir(tallyBin) + ":/usr/bin:/bin", "HOME=" + f.worktree, "TALLY_ACTOR=worker-1"}
	r := f.sh(env, "tally prime")
	if r.code != 1 || !strings.Contains(r.err, "to use your fleet's ledger set TALLY_DIR to its directory (or pass --dir DIR), or TALLY_URL (with TALLY_TOKEN) to its server; to start a new ledger here, run `tally init`") {
		t.Fatalf("prime with no ledger: %v", r)
	}
}

// TestE2EPrimeScriptedAgentSession: a seat wakes, reads prime, runs every
// next step as printed, and reads prime again: what it acted on moved on.
func TestE2EPrimeScriptedAgentSession(t *testing.T) {
	f := newFleet(t)
	f.seed()
	env := f.shell("worker-1")
	prime := "tally --session " + fleetSession + " prime"
	before := f.sh(env, prime)
	for _, want := range []string{
		"- L2 to maintainer, overdue 1h",
		"- M1 by maintainer, overdue 30m",
		"- C1 as respondent (Posted): acquire the execution receipt",
		"- C2 as respondent (ValidationFailed): failed: ",
		"- exp-1 due passed 10m ago, lapse not yet recorded",
		"- exp-2 raised by maintainer, due in ",
		"next: tally --session default/load fact bench:lexer --subject repo:lexer --at WHEN",
	} {
		if !strings.Contains(before.out, want) {
			t.Errorf("prime of worker-1 lacks %q:\n%s", want, before.out)
		}
	}
	var steps []string
	for _, m := range regexp.MustCompile(`(?m)^  (?:next|then): +(tally [^\n]*)$`).FindAllStringSubmatch(before.out, -1) {
		steps = append(steps, m[1])
	}
	for _, s := range steps {
		if r := f.sh(env, f.fill(s)); r.code != 0 && !strings.HasPrefix(s, "tally --session default/load claim show") {
			t.Errorf("%q: %v", f.fill(s), r)
		}
	}
	after := f.sh(env, prime).out
	for _, gone := range []string{"- L1 ", "- L2 ", "- C1 as respondent (Posted)", "- exp-1 ", "- exp-2 "} {
		if strings.Contains(after, gone) {
			t.Errorf("%q still waits after its next steps ran:\n%s", gone, after)
		}
	}
	// C1 moved on to the work; C2 still waits on its claimant's answer.
	if !strings.Contains(after, "- C1 as respondent (Received): publish the work") || !strings.Contains(after, "- C2 as respondent (ValidationFailed)") {
		t.Errorf("after:\n%s", after)
	}
	// The maintainer answers C2 with a successor, as its prime says; then
	// C2 leaves both seats' primes.
	m := f.shell("maintainer")
	mp := f.sh(m, prime).out
	if !strings.Contains(mp, "next: tally --session default/load claim create NEW --predecessor C2 --respondent worker-1 --work TEXT") {
		t.Fatalf("prime of maintainer:\n%s", mp)
	}
	if r := f.sh(m, "tally --session default/load claim create C3 --predecessor C2 --respondent worker-1 --work 'fix C2 again'"); r.code != 0 {
		t.Fatalf("successor: %v", r)
	}
	for _, e := range [][]string{m, env} {
		if p := f.sh(e, prime).out; strings.Contains(p, "- C2 ") {
			t.Errorf("C2 answered by C3 still shows:\n%s", p)
		}
	}
}

// TestE2EPrimeMCPToolIsPrime: tally mcp's tool tally_prime and prompt
// resume_seat answer the bytes tally prime --as SEAT prints, in the
// session asked for, bounded alike.
func TestE2EPrimeMCPToolIsPrime(t *testing.T) {
	f := newFleet(t)
	f.seed()
	const now = "2030-01-01T00:00:00Z"
	cmd := exec.Command(tallyBin, "mcp")
	cmd.Env = append(baseEnv(), "TALLY_DIR="+f.dir, "TALLY_ACTOR=worker-1")
	cmd.Dir = f.worktree
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "0"}, nil).Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, tokens := range []int{1500, 120} {
		want := run(t, runOpts{cwd: f.worktree, env: []string{"TALLY_DIR=" + f.dir}}, "--session", fleetSession, "--as", "worker-1",
			"prime", "--now", now, "--max-tokens", strconv.Itoa(tokens))
		if want.code != 0 || !strings.Contains(want.out, "tally --session default/load --as worker-1 ") {
			t.Fatalf("prime: %v", want)
		}
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "tally_prime",
			Arguments: map[string]any{"session": fleetSession, "now": now, "max_tokens": tokens}})
		if err != nil || res.IsError {
			t.Fatalf("tally_prime: %v %+v", err, res)
		}
		if got := res.Content[0].(*sdk.TextContent).Text; got != want.out {
			t.Errorf("tally_prime at %d tokens:\n%s\ntally prime:\n%s", tokens, got, want.out)
		}
	}
	pr, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "resume_seat", Arguments: map[string]string{"session": fleetSession}})
	if err != nil {
		t.Fatal(err)
	}
	text := pr.Messages[0].Content.(*sdk.TextContent).Text
	as := strings.SplitN(text, "\n", 2)[0] // its own instant
	want := run(t, runOpts{cwd: f.worktree, env: []string{"TALLY_DIR=" + f.dir}}, "--session", fleetSession, "--as", "worker-1",
		"prime", "--now", strings.TrimPrefix(as, "# tally prime: worker-1, as of "))
	if text != want.out {
		t.Errorf("resume_seat:\n%s\ntally prime:\n%s", text, want.out)
	}
}
