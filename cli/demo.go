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
		Short: "Walk a promise's whole life on a temporary ledger, with real commands",
		Long: "demo makes a temporary ledger and runs the lifecycle from the promise-ledger seed through tally's own\n" +
			"commands, at the seed's clock times: a promise waits on an antecedent, becomes owed, passes its\n" +
			"deadline (nothing is appended), is amended, assessed violated, and satisfied late with evidence.",
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
	fmt.Fprintf(w, "A temporary ledger at %s\n", dir)
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
		sub := Streams{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(string) string { return "" }, Cwd: io.Cwd, Now: func() time.Time { return clock }}
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
