package main

// tally prime through the real binary: the same context from a local
// ledger and through `tally serve` (TALLY_URL), byte for byte.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2EPrimeLocalAndRemote: a seat's context read through the server is
// the bytes a local read of the server's directory prints (text, JSON,
// trimmed, owed --format prime, another seat), run after run; bad bounds
// exit 2 both ways.
func TestE2EPrimeLocalAndRemote(t *testing.T) {
	srv := startServerWith(t, []string{"--watch-every", "100ms"}, "reviewer", "author", "maintainer", "parser")
	work := t.TempDir()
	patch := filepath.Join(work, "patch.txt")
	if err := os.WriteFile(patch, []byte("+\tif len(s) < 6 { return errIncomplete }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		who  string
		args []string
	}{
		{"reviewer", []string{"promise", "hand back a reviewed schema", "--id", "desk/ship-91", "--to", "author", "--until", "2030-01-01T09:00:00Z"}},
		{"reviewer", []string{"promise", "ship the parser fix", "--id", "desk/ship-92", "--to", "author", "--until", "2030-01-03T12:00:00Z"}},
		{"author", []string{"promise", "send the test fixtures", "--id", "desk/fx-1", "--to", "reviewer", "--until", "2029-12-31T12:00:00Z"}},
		// Due long ago: the server's timekeeper records its lapse.
		{"reviewer", []string{"expect", "raise", "--id", "exp-fixtures", "--kind", "fixtures.delivery", "--subject", "repo:parser",
			"--fact-key", "fixtures.sent:parser", "--due", "2026-01-01T00:00:00Z", "--basis", "declared"}},
		{"maintainer", []string{"claim", "create", "C17", "--respondent", "parser", "--work", "reject incomplete Unicode escapes",
			"--check", "change/behavior:validator=command@1", "--check", "change/review:validator=review@1,evaluator=reviewer,phases=quality"}},
		{"maintainer", []string{"claim", "post", "C17"}},
		{"parser", []string{"receipt", "acquire", "C17"}},
		{"parser", []string{"artifact", "put", patch, "--claim", "C17", "--slot", "change", "--generation", "1", "--kind", "patch", "--id", "patch-a"}},
		{"parser", []string{"testament", "close", "C17", "--id", "T1", "--generation", "1", "--outcome", "complete", "--summary", "length check", "--bind", "change=patch-a"}},
		{"parser", []string{"testament", "post", "C17", "T1"}},
		{"maintainer", []string{"testament", "receive", "C17", "T1"}},
		{"maintainer", []string{"claim", "create", "C21", "--respondent", "reviewer", "--work", "review the schema migration",
			"--check", "report/read:validator=review@1,phases=quality", "--deadline", "2030-01-02T12:00:00Z"}},
		{"maintainer", []string{"claim", "post", "C21"}},
	}
	for _, st := range steps {
		if r := srv.as(t, st.who, st.args...); r.code != 0 {
			t.Fatalf("as %s: %v", st.who, r)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(srv.as(t, "reviewer", "lapses").out, "exp-fixtures") {
		if time.Now().After(deadline) {
			t.Fatal("the server's timekeeper recorded no lapse of exp-fixtures")
		}
		time.Sleep(100 * time.Millisecond)
	}

	const T = "2030-01-01T12:00:00Z"
	var full string
	for _, args := range [][]string{
		{"prime", "--now", T},
		{"prime", "--now", T, "--json"},
		{"prime", "--now", T, "--max-tokens", "200"},
		{"owed", "--format", "prime", "--now", T},
		{"prime", "--seat", "author", "--now", T},
		{"prime", "--seat", "nobody", "--now", T},
	} {
		r := srv.as(t, "reviewer", args...)
		// The seat from the environment, as the token's is: the commands
		// printed carry no --as either way.
		l := run(t, runOpts{env: []string{"TALLY_ACTOR=reviewer"}}, append([]string{"--dir", srv.dir}, args...)...)
		if r.code != 0 || l.code != 0 {
			t.Fatalf("%q: remote %v\nlocal %v", args, r, l)
		}
		if r.out != l.out {
			t.Errorf("%q: remote and local differ\nremote:\n%s\nlocal:\n%s", args, r.out, l.out)
		}
		if again := srv.as(t, "reviewer", args...); again.out != r.out {
			t.Errorf("%q: a second remote run differs:\n%s", args, again.out)
		}
		if len(args) == 3 {
			full = r.out
		}
	}
	for _, want := range []string{
		"- desk/ship-91 to author, overdue 3h (until 2030-01-01T09:00:00Z)",
		"- desk/fx-1 by author, overdue 1d (until 2029-12-31T12:00:00Z)",
		"- C21 as respondent (Posted, due in 1d): acquire the execution receipt",
		"  next: tally check begin review --claim C17 --artifact patch-a",
		"- exp-fixtures lapsed (overdue) 1461d12h ago, due 2026-01-01T00:00:00Z",
	} {
		if !strings.Contains(full, want) {
			t.Errorf("prime lacks %q:\n%s", want, full)
		}
	}
	if owed := srv.as(t, "reviewer", "owed", "--format", "prime", "--now", T); owed.out != full {
		t.Errorf("owed --format prime differs from prime:\n%s", owed.out)
	}

	for _, bad := range []string{"0", "-1"} {
		r := srv.as(t, "reviewer", "prime", "--max-tokens", bad)
		l := srv.local(t, "prime", "--max-tokens", bad, "--as", "reviewer")
		for _, x := range []result{r, l} {
			if x.code != 2 || x.out != "" || !strings.Contains(x.err, "max-tokens: must be a positive number of tokens (got "+bad+")") {
				t.Errorf("--max-tokens %s: %v", bad, x)
			}
		}
	}
}
