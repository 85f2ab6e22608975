package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// demoStep is one command of the walkthrough, run at a fixed clock.
type demoStep struct {
	say   string
	clock string
	args  []string
}

func newDemo(g *global) *cobra.Command {
	var keep bool
	c := &cobra.Command{
		Use:   "demo",
		Short: "Walk a promise, a claim and an expectation through their lives on a temporary ledger, with real commands",
		Long: "demo makes a temporary ledger and runs the lifecycle from the promise-ledger seed through tally's own\n" +
			"commands, at the seed's clock times: a promise waits on an antecedent, becomes owed, passes its\n" +
			"deadline (nothing is appended), is amended, assessed violated, and satisfied late with evidence. Then\n" +
			"the proof-of-work seed's claim C17 fails its review on the artifact its tests passed, and its successor\n" +
			"C18 is satisfied; and a shipment expectation lapses, is superseded, and is satisfied by a fact. It ends\n" +
			"with verify.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "tally-demo-*")
			if err != nil {
				return err
			}
			if !keep {
				defer os.RemoveAll(dir)
			}
			return runDemo(g.io, filepath.Join(dir, ".tally"))
		},
	}
	c.Flags().BoolVar(&keep, "keep", false, "keep the temporary ledger and print its path")
	return c
}

func runDemo(io Streams, dir string) error {
	const (
		reviewer = "https://example.org/agents/reviewer"
		author   = "https://example.org/agents/author"
	)
	w := io.Out
	steps := []demoStep{
		{"Create a ledger.", "2026-08-28T20:00:00Z", []string{"init"}},
		{"The author promises the reviewer a draft schema. This is the antecedent.", "2026-08-28T20:10:00Z",
			[]string{"promise", "draft the schema", "--as", author, "--to", reviewer, "--until", "2026-08-31T12:00:00Z", "--id", "pnk_0c2b77"}},
		{"The reviewer promises to hand back a reviewed schema, on the draft: it is conditional until the draft lands.", "2026-08-28T20:14:03Z",
			[]string{"promise", "hand back a reviewed schema", "--as", reviewer, "--to", author, "--on", "pnk_0c2b77", "--until", "2026-09-01T17:00:00Z", "--id", "desk/ship-91"}},
		{"", "2026-08-28T20:15:00Z", []string{"ls"}},
		{"The antecedent lands: the author delivers the draft, with evidence.", "2026-08-30T09:00:00Z",
			[]string{"resolve", "pnk_0c2b77", "--satisfied", "--evidence", "https://example.org/drafts/schema-v1", "--as", author}},
		{"Now the reviewer's promise is owed.", "2026-08-30T09:01:00Z", []string{"ls", "--all"}},
		{"The deadline passes. Nothing is appended: overdue is arithmetic at now, not a record.", "2026-09-01T17:05:00Z", []string{"ls", "--overdue"}},
		{"", "2026-09-01T17:05:00Z", []string{"verify"}},
		{"The debtor moves the deadline, on the record; the old one stays in the horizons.", "2026-09-01T17:12:00Z",
			[]string{"amend", "desk/ship-91", "--until", "2026-09-01T18:00:00Z", "--reason", "nudge 1", "--meta", `{"rung":1}`, "--as", reviewer}},
		{"An observer signs a judgment. It sits beside the promise; the state does not change.", "2026-09-01T18:40:00Z",
			[]string{"assess", "desk/ship-91", "--violated", "--observer", author, "--note", "deadline passed, nothing delivered", "--meta", `{"seat":"desk"}`}},
		{"The debtor delivers anyway, 15 hours late, with evidence.", "2026-09-02T09:40:00Z",
			[]string{"resolve", "desk/ship-91", "--satisfied", "--evidence", "https://example.org/reviews/91", "--meta", `{"seat":"reviewer"}`, "--as", reviewer}},
		{"Both records are true, side by side. Reconciling them is nobody's job yet.", "2026-09-02T10:00:00Z", []string{"show", "desk/ship-91"}},
		{"The seed's log, as pinki would write it:", "2026-09-02T10:00:00Z", []string{"export", "--format", "pinki"}},
		{"Every line is hash-chained; verify checks them all.", "2026-09-02T10:00:00Z", []string{"verify"}},
	}
	steps = append(steps, demoClaimSteps()...)
	steps = append(steps, demoExpectSteps()...)
	steps = append(steps, demoStep{"One log holds all three families, and the chain is whole.", "2026-09-11T09:00:00Z", []string{"verify"}})
	fmt.Fprintf(w, "A temporary ledger at %s\n", dir)
	// The claim story's patches and reviews are files beside the ledger,
	// named relative to the steps' working directory.
	work := filepath.Dir(dir)
	for name, body := range demoFiles() {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("demo file: %w", err)
		}
	}
	for _, s := range steps {
		clock, err := time.Parse(time.RFC3339, s.clock)
		if err != nil {
			return err
		}
		if s.say != "" {
			fmt.Fprintf(w, "\n# %s\n", s.say)
		}
		args := append([]string{"--dir", dir}, s.args...)
		fmt.Fprintf(w, "[clock %s] $ tally %s\n", s.clock, quoteArgs(s.args))
		var out, errb bytes.Buffer
		sub := Streams{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(string) string { return "" }, Cwd: work, Now: func() time.Time { return clock }}
		code := Main(args, sub)
		w.Write(out.Bytes())
		w.Write(errb.Bytes())
		if code != ExitOK {
			return fmt.Errorf("demo step `tally %s` exited %d", quoteArgs(s.args), code)
		}
	}
	return nil
}

func quoteArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'{}$") {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			out[i] = a
		}
	}
	return strings.Join(out, " ")
}

// demoFiles are the files the claim story's agents produce: two patches,
// the tests' log and two reviews.
func demoFiles() map[string]string {
	return map[string]string{
		"patch-a.txt":  "--- a/parser.go\n+++ b/parser.go\n+\tif len(s) < 6 { return errIncomplete }\n",
		"patch-b.txt":  "--- a/parser.go\n+++ b/parser.go\n+\tif len(s) < i+6 { return errIncomplete } // bounds checked\n",
		"review-a.md":  "patch-a: rejects the incomplete escape, then reads past the end of the input\n",
		"review-b.md":  "patch-b: bounds checked before every read\n",
		"tests-log.md": "go test ./parser: ok\n",
	}
}

// demoDelivery is one work cycle of the claim story: the parser publishes
// the patch in file as artifact id, closes and posts a testament binding it,
// and the maintainer receives it; clocks are the four steps' times.
func demoDelivery(say, claim, testament, id, file, summary string, clocks [4]string) []demoStep {
	return []demoStep{
		{say, clocks[0], []string{"artifact", "put", file, "--claim", claim, "--slot", "change", "--generation", "1", "--kind", "patch", "--id", id, "--as", "parser"}},
		{"", clocks[1], []string{"testament", "close", claim, "--id", testament, "--generation", "1", "--outcome", "complete", "--summary", summary, "--bind", "change=" + id, "--as", "parser"}},
		{"", clocks[2], []string{"testament", "post", claim, testament, "--as", "parser"}},
		{"", clocks[3], []string{"testament", "receive", claim, testament, "--as", "maintainer"}},
	}
}

// demoClaimSteps is the proof-of-work seed's C17 → C18 story: a claim whose
// checks must all pass on one artifact, a failed review, and a successor.
func demoClaimSteps() []demoStep {
	var steps []demoStep
	add := func(s ...demoStep) { steps = append(steps, s...) }
	add([]demoStep{
		{"Claims. The maintainer asks the parser for a fix, to be accepted only when tests and a review pass on the same patch.", "2026-09-03T09:00:00Z",
			[]string{"claim", "create", "C17", "--respondent", "parser", "--work", "reject incomplete Unicode escapes",
				"--check", "change/behavior:validator=command@1", "--check", "change/review:validator=review@1,phases=quality", "--as", "maintainer"}},
		{"", "2026-09-03T09:01:00Z", []string{"claim", "post", "C17", "--as", "maintainer"}},
		{"The parser takes the claim and publishes patch-a, closing a testament that binds it.", "2026-09-03T09:05:00Z",
			[]string{"receipt", "acquire", "C17", "--as", "parser"}},
	}...)
	add(demoDelivery("", "C17", "T1", "patch-a", "patch-a.txt", "length check before decoding the escape",
		[4]string{"2026-09-03T10:30:00Z", "2026-09-03T10:31:00Z", "2026-09-03T10:32:00Z", "2026-09-03T10:40:00Z"})...)
	add(demoDelivery("A second cycle: patch-b.", "C17", "T2", "patch-b", "patch-b.txt", "bounds checked",
		[4]string{"2026-09-03T11:30:00Z", "2026-09-03T11:31:00Z", "2026-09-03T11:32:00Z", "2026-09-03T11:40:00Z"})...)
	add([]demoStep{
		{"The tests pass on patch-a and the review passes on patch-b.", "2026-09-03T12:00:00Z",
			[]string{"check", "report", "behavior", "--claim", "C17", "--artifact", "patch-a", "--result", "pass", "--evidence-file", "tests-log.md", "--as", "maintainer"}},
		{"", "2026-09-03T12:10:00Z", []string{"check", "report", "review", "--claim", "C17", "--artifact", "patch-b", "--result", "pass", "--evidence-file", "review-b.md", "--as", "maintainer"}},
		{"Not satisfied: every required check of a slot must pass on one artifact. claim show says why.", "2026-09-03T12:11:00Z",
			[]string{"claim", "show", "C17"}},
		{"The review of patch-a finds an unchecked read. A conclusive fail ends the claim.", "2026-09-03T12:30:00Z",
			[]string{"check", "report", "review", "--claim", "C17", "--artifact", "patch-a", "--result", "fail", "--evidence-file", "review-a.md", "--note", "unchecked read after the escape", "--as", "maintainer"}},
		{"", "2026-09-03T12:31:00Z", []string{"claim", "show", "C17"}},
		{"Further work needs a successor. C18 names C17 and inherits its checks.", "2026-09-03T13:00:00Z",
			[]string{"claim", "create", "C18", "--respondent", "parser", "--work", "reject incomplete Unicode escapes, bounds checked", "--predecessor", "C17", "--as", "maintainer"}},
		{"", "2026-09-03T13:01:00Z", []string{"claim", "post", "C18", "--as", "maintainer"}},
		{"", "2026-09-03T13:05:00Z", []string{"receipt", "acquire", "C18", "--as", "parser"}},
	}...)
	add(demoDelivery("", "C18", "T1", "patch-b", "patch-b.txt", "bounds checked",
		[4]string{"2026-09-03T13:30:00Z", "2026-09-03T13:31:00Z", "2026-09-03T13:32:00Z", "2026-09-03T13:40:00Z"})...)
	add([]demoStep{
		{"Both checks pass on patch-b.", "2026-09-03T14:00:00Z",
			[]string{"check", "report", "behavior", "--claim", "C18", "--artifact", "patch-b", "--result", "pass", "--evidence-file", "tests-log.md", "--as", "maintainer"}},
		{"", "2026-09-03T14:10:00Z", []string{"check", "report", "review", "--claim", "C18", "--artifact", "patch-b", "--result", "pass", "--evidence-file", "review-b.md", "--as", "maintainer"}},
		{"C18 is satisfied; C17 keeps its failure, its patch and the review that rejected it.", "2026-09-03T14:11:00Z",
			[]string{"claim", "ls"}},
	}...)
	return steps
}

// demoExpectSteps is the shipment expectation: it lapses, the timekeeper
// records the lapse, it is superseded, and a fact satisfies the successor.
// Every clock here is in the past, so the sweep is not ahead of real time.
func demoExpectSteps() []demoStep {
	return []demoStep{
		{"Expectations. A booking agent expects the shipment to depart by 03:15, with two hours' grace.", "2026-09-10T12:00:00Z",
			[]string{"expect", "raise", "--id", "exp-depart", "--kind", "shipment.departure", "--subject", "shipment:PA-2026-0901",
				"--fact-key", "shipment.departed:PA-2026-0901", "--due", "2026-09-11T03:15:00Z", "--grace", "2h", "--basis", "observed", "--as", "agent://booking"}},
		{"Due and grace pass with no departure. The timekeeper's sweep records the lapse.", "2026-09-11T05:20:00Z", []string{"watch", "--once"}},
		{"", "2026-09-11T05:21:00Z", []string{"lapses"}},
		{"The agent replaces the lapsed expectation with a later due; the lapse stays on the record.", "2026-09-11T05:30:00Z",
			[]string{"expect", "supersede", "exp-depart", "--id", "exp-depart-2", "--due", "2026-09-11T09:00:00Z", "--as", "agent://booking"}},
		{"The departure is reported: the fact satisfies the successor.", "2026-09-11T08:10:00Z",
			[]string{"fact", "shipment.departed:PA-2026-0901", "--subject", "shipment:PA-2026-0901", "--as", "feed"}},
		{"", "2026-09-11T08:11:00Z", []string{"expect", "ls"}},
	}
}
