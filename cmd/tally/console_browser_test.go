package main

// The console in a real browser: the seeds' scenarios recorded through the
// CLI, `tally serve` on 127.0.0.1, and Debian's chromium driven by npm's
// playwright-core (testdata/console/browser.mjs) through every view at
// desktop and phone sizes.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/internal/proctest"
)

// playwright is the playwright-core the browser test drives chromium with:
// from TALLY_PLAYWRIGHT_DIR (a directory whose node_modules holds it) or
// installed with npm.
var playwright = proctest.NPM{Name: "playwright-core", Version: "1.65.1", DirEnv: "TALLY_PLAYWRIGHT_DIR", Install: 120 * time.Second, What: "the console in a browser"}

const chromiumPath = "/usr/bin/chromium"

// seedConsole records the seeds' scenarios in session default/main through
// the CLI: promise-ledger.txt's lifecycle of desk/ship-91 (imported with its
// own timestamps), an overdue, a conditional, a cancelled promise and one
// whose text is markup; proof-of-work-ledger.txt's C17 (review failed on
// patch A) and its successor C18 (satisfied on patch B), and two claims that
// depend on each other; expectations-extension.txt's shipment with a late
// departure, an overdue arrival and a skipped step, a withdrawn and a
// superseded expectation. Then 10,000 promises in default/bulk.
func seedConsole(t *testing.T, dir string) {
	t.Helper()
	now := time.Now().UTC()
	work := t.TempDir()
	cli := func(stdin string, args ...string) string {
		t.Helper()
		r := run(t, runOpts{stdin: stdin, cwd: work}, append([]string{"--dir", dir, "--session", "default/main"}, args...)...)
		if r.code != 0 {
			t.Fatalf("seed: %v", r)
		}
		return r.out
	}
	file := func(name, content string) string {
		p := filepath.Join(work, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const r, a = "https://example.org/agents/reviewer", "https://example.org/agents/author"
	pinki := file("pinki.jsonl", strings.Join([]string{
		`{"ts":"2026-08-20T10:00:00Z","type":"promise","id":"pnk_0c2b77","promise":"draft the schema","by":"` + a + `","to":"` + r + `","until":"2026-08-28T17:00:00Z"}`,
		`{"ts":"2026-08-28T20:00:00Z","type":"resolve","promise":"pnk_0c2b77","as":"satisfied","by":"` + a + `","evidence":["https://example.org/drafts/77"]}`,
		`{"ts":"2026-08-28T20:14:03Z","type":"promise","id":"desk/ship-91","promise":"hand back a reviewed schema","by":"` + r + `","to":"` + a + `","on":"pnk_0c2b77","until":"2026-09-01T17:00:00Z"}`,
		`{"ts":"2026-09-01T17:12:00Z","type":"amend","promise":"desk/ship-91","by":"` + r + `","until":"2026-09-01T18:00:00Z","reason":"nudge 1","meta":{"rung":1}}`,
		`{"ts":"2026-09-01T18:40:00Z","type":"assess","promise":"desk/ship-91","state":"violated","observer":"` + a + `","note":"deadline passed, nothing delivered","meta":{"seat":"desk"}}`,
		`{"ts":"2026-09-02T09:40:00Z","type":"resolve","promise":"desk/ship-91","as":"satisfied","by":"` + r + `","evidence":["https://example.org/reviews/91"],"meta":{"seat":"reviewer"}}`,
	}, "\n")+"\n")
	cli("", "import", pinki)
	cli("", "--as", r, "promise", "review 92", "--to", a, "--until", now.Add(-26*time.Hour).Format(time.RFC3339), "--id", "desk/ship-92")
	cli("", "--as", r, "promise", "review 93", "--to", a, "--until", "3d", "--on", "desk/ship-92", "--id", "desk/ship-93")
	cli("", "--as", a, "promise", "<img src=x onerror=alert(1)>", "--to", r, "--until", "5h", "--id", "xss-1")
	cli("", "--as", a, "promise", "cancel me", "--to", r, "--until", "5h", "--id", "c-1")
	cli("", "--as", a, "resolve", "c-1", "--cancelled", "--reason", "superseded by desk/ship-93")

	patchA := file("a/patch.txt", "--- a/parser.go\n+++ b/parser.go\n+\tif len(s) < 6 { return errIncomplete } // fixed escape\n")
	patchB := file("b/patch.txt", "--- a/parser.go\n+++ b/parser.go\n+\tif len(s) < i+6 { return errIncomplete } // fixed escape, bounds checked\n")
	reviewA := file("r/review-a.md", "patch A: unchecked read after the escape\n")
	reviewB := file("r/review-b.md", "patch B: bounds checked before every read\n")
	cli(c17, "claim", "create", "-", "--as", maintainer)
	cli("", "claim", "post", "C17", "--as", maintainer)
	cli("", "receipt", "acquire", "C17", "--as", parser)
	cli("", "progress", "C17", "--generation", "1", "--note", "found the faulty branch", "--as", parser)
	deliver := func(claimID, testament, artifactID, path string) {
		cli("", "artifact", "put", path, "--claim", claimID, "--slot", "change", "--generation", "1", "--kind", "patch", "--schema", "text/x-diff", "--id", artifactID, "--as", parser)
		cli("", "testament", "close", claimID, "--id", testament, "--generation", "1", "--outcome", "complete", "--summary", "length check before decoding the escape", "--confidence", "0.9", "--bind", "change="+artifactID, "--as", parser)
		cli("", "testament", "post", claimID, testament, "--as", parser)
		cli("", "testament", "receive", claimID, testament, "--as", maintainer)
	}
	deliver("C17", "T1", "patch-a", patchA)
	cli("", "check", "run", "behavior", "--claim", "C17", "--artifact", "patch-a", "--command", "grep -q 'fixed escape' "+patchA, "--as", maintainer)
	cli("", "check", "report", "review", "--claim", "C17", "--artifact", "patch-a", "--result", "fail", "--evidence-file", reviewA, "--note", "unchecked read after the escape", "--as", maintainer)
	cli("", "claim", "create", "C18", "--respondent", parser, "--work", "reject incomplete Unicode escapes (bounds checked)", "--predecessor", "C17",
		"--check", "change/behavior:validator=command@1,evaluator=maintainer,attempts=2", "--check", "change/review:validator=review@1,evaluator=maintainer,phases=quality", "--as", maintainer)
	cli("", "claim", "post", "C18", "--as", maintainer)
	cli("", "receipt", "acquire", "C18", "--as", parser)
	deliver("C18", "T1", "patch-b", patchB)
	cli("", "check", "run", "behavior", "--claim", "C18", "--command", "grep -q 'bounds checked' "+patchB, "--as", maintainer)
	cli("", "check", "report", "review", "--claim", "C18", "--artifact", "patch-b", "--result", "pass", "--evidence-file", reviewB, "--as", maintainer)
	cli("", "claim", "create", "M1", "--respondent", parser, "--work", "migrate the store", "--depends-on", "M2", "--check", "out/c:validator=review@1,evaluator=maintainer", "--as", maintainer)
	cli("", "claim", "create", "M2", "--respondent", parser, "--work", "compatibility report", "--depends-on", "M1", "--check", "out/c:validator=review@1,evaluator=maintainer", "--as", maintainer)

	cli("", "--as", agent, "expect", "raise", "--id", "exp-01J8Q0DEPART", "--kind", "shipment.departure", "--subject", "shipment:PA-2026-0901",
		"--fact-key", "shipment.departed:PA-2026-0901", "--due", "2026-09-11T03:15:00Z", "--grace", "2h", "--basis", "observed", "--task", "task-7")
	cli(`{"expectationId":"exp-01J8Q0ARRIVE","kind":"shipment.arrival","subject":{"type":"shipment","id":"PA-2026-0901"},
"expects":"an arrival event at DOH","satisfiedBy":{"factKey":"shipment.arrived:PA-2026-0901"},"dueAt":"2026-09-11T05:00:00Z",
"grace":"PT6H","anchor":{"expectationId":"exp-01J8Q0DEPART","offset":"PT1H45M"},"after":["exp-01J8Q0DEPART"],
"horizon":"2026-09-13T05:00:00Z","basis":"observed","origin":{"taskId":"task-7","contextId":"ctx-3"}}`, "--as", agent, "expect", "raise", "-")
	cli("", "--as", "carrier-feed", "fact", "shipment.departed:PA-2026-0901", "--subject", "shipment:PA-2026-0901", "--at", "2026-09-11T04:00:00Z")
	cli("", "--as", agent, "expect", "raise", "--id", "s2-depart", "--kind", "shipment.departure", "--subject", "shipment:S2", "--fact-key", "departed:S2", "--due", "2026-09-20T00:00:00Z", "--basis", "contract")
	cli("", "--as", agent, "expect", "raise", "--id", "s2-arrive", "--kind", "shipment.arrival", "--subject", "shipment:S2", "--fact-key", "arrived:S2", "--due", "2026-09-21T00:00:00Z", "--after", "s2-depart", "--basis", "contract")
	cli("", "--as", "carrier-feed", "fact", "arrived:S2", "--subject", "shipment:S2", "--at", "2026-09-15T10:00:00Z")
	cli("", "--as", agent, "expect", "raise", "--id", "w-1", "--kind", "doc.review", "--subject", "doc:D1", "--fact-key", "reviewed:D1", "--due", "5d", "--basis", "declared", "--task", "task-9")
	cli("", "--as", agent, "task", "outcome", "task-9", "--cancelled")
	cli("", "--as", agent, "expect", "raise", "--id", "x-old", "--kind", "doc.review", "--subject", "doc:D2", "--fact-key", "reviewed:D2", "--due", "2d", "--basis", "declared")
	cli("", "--as", agent, "expect", "supersede", "x-old", "--id", "x-new", "--due", "4d")
	cli("", "watch", "--once")

	var bulk strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&bulk, `{"ts":"2026-11-01T00:00:00Z","type":"promise","id":"b-%05d","promise":"bulk promise %d","by":"https://example.org/agents/r%d","to":"https://example.org/agents/a%d","until":"%s"}`+"\n",
			i, i, i%24, i%7, now.Add(time.Duration(i%48-8)*time.Hour).Format(time.RFC3339))
	}
	if r := run(t, runOpts{}, "--dir", dir, "--session", "default/bulk", "import", file("bulk.jsonl", bulk.String())); r.code != 0 {
		t.Fatalf("import bulk: %v", r)
	}
}

func TestConsoleBrowser(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		proctest.Skip(t, "the console in a browser: %s is not installed (apt-get install -y chromium)", chromiumPath)
	}
	node, pwDir := playwright.Find(t)
	srv := startServer(t, "console")
	seedConsole(t, srv.dir)

	shots := os.Getenv("TALLY_CONSOLE_SHOTS")
	if shots == "" {
		shots = filepath.Join(t.TempDir(), "screenshots")
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("browser screenshots under %s", shots)
	out := proctest.Script{Node: node, Dir: pwDir, Path: filepath.Join("testdata", "console", "browser.mjs"), Timeout: 6 * time.Minute,
		Env: append(baseEnv(), "BASE="+srv.url, "TOKEN="+srv.tokens["console"], "TENANT=default", "SESSION=main", "BULK=bulk",
			"OUT="+shots, "TALLY_BIN="+tallyBin, "TALLY_DIR="+srv.dir)}.Run(t)
	if !strings.Contains(string(out), "\nok\n") {
		t.Fatal("the browser script did not finish")
	}
	if n := strings.Count(string(out), "screenshot "); n < 20 {
		t.Fatalf("only %d screenshots", n)
	}
}
