package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/store"
)

// readySteps post claims to a pool and to a named respondent at several
// priorities and deadlines, declare promises the seat owes (one waiting on
// an antecedent), and have two seats race for one pool claim.
func readySteps() []parityStep {
	const m, w1, w2 = "maintainer", "worker-1", "worker-2"
	return []parityStep{
		{as: m, args: claimArgs("claim create P1 --work triage~the~parser~bugs --no-checks --pool worker-1,worker-2 --priority 1 --deadline 2026-09-02T00:00:00Z"), exit: ExitOK},
		{as: m, args: claimArgs("claim create P2 --work any~seat~may --no-checks --deadline 2026-09-01T18:00:00Z"), exit: ExitOK},
		{as: m, args: claimArgs("claim create P3 --work after~P1 --no-checks --depends-on P1 --priority 0"), exit: ExitOK},
		{as: m, args: claimArgs("claim create P4 --work only~worker-2 --no-checks --pool worker-2 --priority 0"), exit: ExitOK},
		{as: m, args: claimArgs("claim create N1 --respondent worker-1 --work named~to~worker-1 --no-checks --priority P3"), exit: ExitOK},
		{as: m, args: claimArgs("claim create G1 --work not~posted --no-checks --pool worker-1"), exit: ExitOK},
		// refusals: a respondent and a pool, a priority out of range, a seat twice
		{as: m, args: claimArgs("claim create X1 --respondent worker-1 --pool worker-2 --work w --no-checks --json"), exit: ExitUsage},
		{as: m, args: claimArgs("claim create X1 --work w --no-checks --priority 5"), exit: ExitUsage},
		{as: m, args: claimArgs("claim create X1 --work w --no-checks --pool a,a --json"), exit: ExitUsage},
		{as: w1, args: claimArgs("promise write~the~notes --to maintainer --until 2026-09-01T20:00:00Z --priority 1 --id notes"), exit: ExitOK},
		{as: w1, args: claimArgs("promise a~later~note --to maintainer --until 2026-09-03T00:00:00Z --id later --on notes --priority 0"), exit: ExitOK},
		{as: w1, args: claimArgs("promise tidy --to maintainer --until 2026-09-01T13:00:00Z --id tidy --meta {\"priority\":3}"), exit: ExitOK},
		{as: w1, args: claimArgs("promise x --to maintainer --until 2h --priority 2 --meta {\"priority\":3}"), exit: ExitUsage},
		{as: w1, args: claimArgs("ready"), exit: ExitOK}, // nothing posted yet: the promises alone
		{as: m, args: claimArgs("claim post P1"), exit: ExitOK},
		{as: m, args: claimArgs("claim post P2"), exit: ExitOK},
		{as: m, args: claimArgs("claim post P3"), exit: ExitOK},
		{as: m, args: claimArgs("claim post P4"), exit: ExitOK},
		{as: m, args: claimArgs("claim post N1"), exit: ExitOK},
		{as: w1, args: claimArgs("ready"), exit: ExitOK},
		{as: w1, args: claimArgs("ready --json"), exit: ExitOK},
		{as: w2, args: claimArgs("ready"), exit: ExitOK},
		// the race: worker-2 takes P1 first; worker-1 is refused, naming it
		{as: w2, args: claimArgs("receipt acquire P1"), exit: ExitOK},
		{as: w1, args: claimArgs("receipt acquire P1"), exit: ExitError},
		{as: w1, args: claimArgs("receipt acquire P1 --json"), exit: ExitError},
		{as: "outsider", args: claimArgs("receipt acquire P4 --json"), exit: ExitError},
		{as: w1, args: claimArgs("receipt acquire P2 --decline --reason busy --json"), exit: ExitError},
		{as: w1, args: claimArgs("ready"), exit: ExitOK},
		{as: m, args: claimArgs("claim show P1 --json"), exit: ExitOK},
		{as: m, args: claimArgs("claim ls --respondent worker-2"), exit: ExitOK},
		{as: w1, args: claimArgs("ready --now 2026-09-01T19:00:00Z"), exit: ExitOK},
	}
}

// TestParityReady: tally ready, pool claims, priorities and the race for
// a receipt answer the same locally and through a server (with tokens,
// and with --insecure-dev), byte for byte, and a refusal appends nothing.
func TestParityReady(t *testing.T) {
	tokens := map[string]string{"maintainer": "agent", "worker-1": "agent", "worker-2": "agent", "outsider": "agent"}
	runParity(t, []parityScenario{
		{name: "tokens", tokens: tokens, steps: readySteps()},
		{name: "insecure", steps: readySteps()},
	})
}

// TestReadyOutput pins what tally ready prints: priority, then deadline
// (none last), then the log's order; each item with the command that takes
// it, carrying --session when it is not the default and --as when the
// identity came from --as.
func TestReadyOutput(t *testing.T) {
	root := filepath.Join(t.TempDir(), "ledger")
	if err := store.Init(root); err != nil {
		t.Fatal(err)
	}
	clock := parityClock
	run := func(as string, exit ExitCode, args ...string) (string, string) {
		t.Helper()
		var out, errb bytes.Buffer
		env := map[string]string{"TALLY_DIR": root}
		if as != "" {
			env["TALLY_ACTOR"] = as
		}
		st := testStreams(&out, &errb, env)
		st.Cwd = t.TempDir()
		st.Now = func() time.Time { return clock }
		if code := Main(args, st); code != exit {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, exit, out.String(), errb.String())
		}
		return out.String(), errb.String()
	}
	var last []byte
	for i, s := range readySteps() {
		if strings.Contains(strings.Join(s.args, " "), "ready") {
			continue
		}
		before, _ := os.ReadFile(filepath.Join(root, "sessions", "default", "default", "log.jsonl"))
		run(s.as, s.exit, s.args...)
		after, _ := os.ReadFile(filepath.Join(root, "sessions", "default", "default", "log.jsonl"))
		if s.exit != ExitOK && !bytes.Equal(before, after) {
			t.Fatalf("step %d %v: refused, but the log changed", i+1, s.args)
		}
		last = after
	}
	if n := bytes.Count(last, []byte(`"type":"claim.receipt"`)); n != 1 {
		t.Fatalf("%d receipts in the log, want 1 (worker-2's)", n)
	}
	_, errs := run("worker-1", ExitError, "receipt", "acquire", "P1")
	if errs != "tally: claim: receipt already acquired by worker-2 (generation 1)\n" {
		t.Fatalf("the second acquirer: %q", errs)
	}
	out, _ := run("worker-1", ExitOK, "ready")
	// later waits on notes (conditional); P3 waits on P1; P4 is worker-2's
	// alone; G1 is not posted; P1 is taken. A deadline comes before none.
	want := `worker-1 can take 4 now (as of 2026-09-01T12:00:00Z), highest priority first:
P1 promise notes to maintainer: write the notes (until 2026-09-01T20:00:00Z)
   tally resolve notes --satisfied --evidence REF
P2 claim P2 from maintainer: any seat may (deadline 2026-09-01T18:00:00Z; pool: any seat)
   tally receipt acquire P2
P3 promise tidy to maintainer: tidy (until 2026-09-01T13:00:00Z)
   tally resolve tidy --satisfied --evidence REF
P3 claim N1 from maintainer: named to worker-1
   tally receipt acquire N1
`
	if out != want {
		t.Fatalf("ready:\n%s\nwant:\n%s", out, want)
	}
	// --as and a session that is not the default ride along in every command.
	run("maintainer", ExitOK, "claim", "create", "S1", "--work", "w", "--no-checks", "--session", "acme/main")
	run("maintainer", ExitOK, "claim", "post", "S1", "--session", "acme/main")
	out, _ = run("", ExitOK, "ready", "--as", "worker 3", "--session", "acme/main")
	if !strings.HasSuffix(out, "   tally receipt acquire S1 --session acme/main --as 'worker 3'\n") {
		t.Fatalf("ready in acme/main:\n%s", out)
	}
	out, _ = run("worker-2", ExitOK, "ready", "--session", "acme/main", "--json")
	if !strings.Contains(out, `"command":"tally receipt acquire S1 --session acme/main --as worker-2"`) {
		t.Fatalf("ready --json:\n%s", out)
	}
	out, _ = run("nobody", ExitOK, "ready", "--session", "acme/main", "--now", "2026-09-01T12:00:00Z")
	if out != "nobody can take 1 now (as of 2026-09-01T12:00:00Z), highest priority first:\nP2 claim S1 from maintainer: w (pool: any seat)\n   tally receipt acquire S1 --session acme/main\n" {
		t.Fatalf("nobody:\n%q", out)
	}
	run("", ExitUsage, "ready")
}
