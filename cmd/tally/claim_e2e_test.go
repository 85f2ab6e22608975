package main

// End-to-end tests of the claims family through the real binary: the seed's
// parser story, and refusals that must leave the log's bytes unchanged.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tally/verb/verbtest"
)

const (
	maintainer = "maintainer"
	parser     = "parser"
)

// claimLedger is a ledger plus a scratch directory for the files agents
// produce.
type claimLedger struct {
	*led
	work string
}

func newClaimLedger(t *testing.T) *claimLedger {
	t.Helper()
	return &claimLedger{led: newLedger(t), work: t.TempDir()}
}

// file writes content to name (under a directory of its own, so the
// artifact keeps the base name) and returns its path.
func (c *claimLedger) file(dir, name, content string) string {
	c.t.Helper()
	p := filepath.Join(c.work, dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		c.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// show returns `claim show ID --json`'s claim object.
func (c *claimLedger) show(id string) map[string]any {
	c.t.Helper()
	doc := decode(c.t, c.must("claim", "show", id, "--json"))
	if doc["schema_version"] == nil {
		c.t.Fatalf("no schema_version: %v", doc)
	}
	return doc["claim"].(map[string]any)
}

func (c *claimLedger) state(id string) string {
	c.t.Helper()
	return c.show(id)["state"].(string)
}

func (c *claimLedger) wantState(id, want string) {
	c.t.Helper()
	if got := c.state(id); got != want {
		c.t.Fatalf("claim %s is %s, want %s\n%s", id, got, want, c.must("claim", "show", id))
	}
}

// refused runs a command that must fail with exit code and the JSON error
// code, leaving the log's bytes as they were; it returns the error message.
func (c *claimLedger) refused(o runOpts, exit int, code string, args ...string) string {
	c.t.Helper()
	before := c.logBytes()
	r := c.runWith(o, append(args, "--json")...)
	if r.code != exit {
		c.t.Fatalf("want exit %d: %v", exit, r)
	}
	if r.out != "" {
		c.t.Fatalf("a refusal printed on stdout: %v", r)
	}
	e := decode(c.t, r.err)
	if e["code"] != code || e["schema_version"] == nil {
		c.t.Fatalf("want code %s: %v", code, r)
	}
	if !bytes.Equal(before, c.logBytes()) {
		c.t.Fatalf("a refusal changed the log: %v", r)
	}
	return e["error"].(string)
}

// slotOf returns the named slot of a claim view.
func slotOf(t *testing.T, v map[string]any, name string) map[string]any {
	t.Helper()
	for _, s := range v["slots"].([]any) {
		if s := s.(map[string]any); s["name"] == name {
			return s
		}
	}
	t.Fatalf("no slot %s in %v", name, v)
	return nil
}

// checkOf returns a check of a slot view.
func checkOf(t *testing.T, slot map[string]any, id string) map[string]any {
	t.Helper()
	for _, c := range slot["checks"].([]any) {
		if c := c.(map[string]any); c["id"] == id {
			return c
		}
	}
	t.Fatalf("no check %s in %v", id, slot)
	return nil
}

// targetState is a check's state on one artifact ("" if never evaluated).
func targetState(check map[string]any, art string) string {
	for _, tg := range check["targets"].([]any) {
		if tg := tg.(map[string]any); tg["artifact"] == art {
			return tg["state"].(string)
		}
	}
	return ""
}

// c17 is the claim document of the seed (verbtest.C17).
const c17 = verbtest.C17

// deliver publishes a patch for the change slot and closes, posts and has
// the claimant receive a testament binding it.
func (c *claimLedger) deliver(claimID, testament, artifactID, path string, gen string) {
	c.t.Helper()
	c.must("artifact", "put", path, "--claim", claimID, "--slot", "change", "--generation", gen, "--kind", "patch", "--schema", "text/x-diff", "--id", artifactID, "--as", parser)
	c.must("testament", "close", claimID, "--id", testament, "--generation", gen, "--outcome", "complete", "--summary", "length check before decoding the escape", "--confidence", "0.9", "--bind", "change="+artifactID, "--as", parser)
	c.must("testament", "post", claimID, testament, "--as", parser)
	c.must("testament", "receive", claimID, testament, "--as", maintainer)
}

// TestE2EClaimParserStory: tests pass on patch A and the review passes on
// patch B: not satisfied. A failing review of A: ValidationFailed. The
// successor C18 with patch B passing both: Satisfied, while C17 keeps its
// failure, its patch and its review.
func TestE2EClaimParserStory(t *testing.T) {
	c := newClaimLedger(t)
	patchA := c.file("a", "patch.txt", "--- a/parser.go\n+++ b/parser.go\n+\tif len(s) < 6 { return errIncomplete } // fixed escape\n")
	patchB := c.file("b", "patch.txt", "--- a/parser.go\n+++ b/parser.go\n+\tif len(s) < i+6 { return errIncomplete } // fixed escape, bounds checked\n")
	reviewOK := c.file("reviews", "review-b.md", "patch B: bounds checked before every read\n")
	reviewBad := c.file("reviews", "review-a.md", "patch A: unchecked read after the escape\n")

	// The claim travels: create (as one JSON document), post, receipt, progress.
	r := c.runWith(runOpts{stdin: c17}, "--dir", c.dir, "claim", "create", "-", "--as", maintainer, "--json")
	if r.code != 0 {
		t.Fatalf("create from stdin: %v", r)
	}
	if doc := decode(t, r.out); doc["claim"].(map[string]any)["state"] != "Generated" {
		t.Fatalf("create: %s", r.out)
	}
	c.must("claim", "post", "C17", "--as", maintainer)
	c.must("receipt", "acquire", "C17", "--as", parser)
	c.must("progress", "C17", "--generation", "1", "--note", "found the faulty branch", "--as", parser)
	c.wantState("C17", "Progressed")

	// Two work cycles: patch A, then patch B.
	c.deliver("C17", "T1", "patch-a", patchA, "1")
	c.wantState("C17", "TestamentAcknowledged")
	c.deliver("C17", "T2", "patch-b", patchB, "1")

	// Tests run on A (a real command on the materialised bytes); the review
	// passes on B.
	out := c.must("check", "run", "behavior", "--claim", "C17", "--artifact", "patch-a",
		"--command", `grep -q "fixed escape" patch.txt && test -f "$TALLY_ARTIFACT"`, "--timeout", "20s", "--as", maintainer)
	if !strings.Contains(out, "behavior on patch-a: pass") {
		t.Fatalf("check run: %s", out)
	}
	c.must("check", "report", "review", "--claim", "C17", "--artifact", "patch-b", "--result", "pass", "--evidence-file", reviewOK, "--as", maintainer)
	v := c.show("C17")
	change := slotOf(t, v, "change")
	if v["state"] != "Validating" || v["local_success"] != false || change["witness"] != nil || change["status"] != "evaluating" {
		t.Fatalf("tests on A and review on B made a witness: state %v, slot %v", v["state"], change)
	}
	if st := targetState(checkOf(t, change, "behavior"), "patch-a"); st != "passed" {
		t.Fatalf("behavior on patch-a: %s", st)
	}

	// The evidence of the behavior check is the validator's log, readable
	// and verified.
	var logID string
	for _, tg := range checkOf(t, change, "behavior")["targets"].([]any) {
		res := tg.(map[string]any)["results"].([]any)
		logID = res[len(res)-1].(map[string]any)["evidence"].(string)
	}
	if log := c.must("artifact", "get", logID, "--claim", "C17"); !strings.Contains(log, "verdict: pass") || !strings.Contains(log, "grep -q") {
		t.Fatalf("evidence log:\n%s", log)
	}

	// The review of A finds an unchecked read: ValidationFailed.
	c.must("check", "report", "review", "--claim", "C17", "--artifact", "patch-a", "--result", "fail", "--evidence-file", reviewBad,
		"--note", "unchecked read after the escape", "--as", maintainer)
	v = c.show("C17")
	term := v["terminal"].(map[string]any)
	if v["state"] != "ValidationFailed" || term["check"] != "review" || term["artifact"] != "patch-a" || term["slot"] != "change" {
		t.Fatalf("C17 after the failing review: %v %v", v["state"], term)
	}
	if human := c.must("claim", "show", "C17"); !strings.Contains(human, "ValidationFailed") || !strings.Contains(human, "check review failed on patch-a") {
		t.Fatalf("claim show:\n%s", human)
	}

	// The successor, created with flags, names C17.
	c.must("claim", "create", "C18", "--respondent", parser, "--work", "reject incomplete Unicode escapes (bounds checked)",
		"--predecessor", "C17", "--check", "change/behavior:validator=command@1,attempts=2",
		"--check", "change/review:validator=review@1,phases=quality", "--as", maintainer)
	c.must("claim", "post", "C18", "--as", maintainer)
	c.must("receipt", "acquire", "C18", "--as", parser)
	c.deliver("C18", "T1", "patch-b", patchB, "1")
	// Without --artifact, check run takes the received binding.
	if out := c.must("check", "run", "behavior", "--claim", "C18", "--command", "grep -q 'bounds checked' patch.txt", "--as", maintainer); !strings.Contains(out, "pass") {
		t.Fatalf("check run C18: %s", out)
	}
	c.wantState("C18", "Validating")
	c.must("check", "report", "review", "--claim", "C18", "--artifact", "patch-b", "--result", "pass", "--evidence-file", reviewOK, "--as", maintainer)
	c.wantState("C18", "Satisfied")
	w := slotOf(t, c.show("C18"), "change")["witness"].(map[string]any)
	if w["artifact"] != "patch-b" || len(w["results"].([]any)) != 2 {
		t.Fatalf("C18 witness %v", w)
	}
	// Offline, a claim is an A2A task too: its mapped state, its witness as an artifact.
	task := a2aTask(t, c.run("a2a", "task", "C18", "--json"))
	if st, _ := status(task); st != "TASK_STATE_COMPLETED" || task["id"] != "C18" || len(task["artifacts"].([]any)) == 0 {
		t.Fatalf("a2a task C18: %v", task)
	}
	if meta, _ := task["metadata"].(map[string]any); meta["urn:tally:ext:claim"] == nil {
		t.Fatalf("a2a task C18 carries no claim view: %v", task)
	}
	if st, _ := status(a2aTask(t, c.run("a2a", "task", "C17", "--json"))); st != "TASK_STATE_FAILED" {
		t.Fatalf("a2a task C17: %s", st)
	}

	// C17 keeps its failure, its patch and its review.
	v = c.show("C17")
	if v["state"] != "ValidationFailed" || len(v["successors"].([]any)) != 1 || v["successors"].([]any)[0] != "C18" {
		t.Fatalf("C17 after C18: %v successors %v", v["state"], v["successors"])
	}
	if st := targetState(checkOf(t, slotOf(t, v, "change"), "review"), "patch-a"); st != "failed" {
		t.Fatalf("C17 lost its review of patch-a: %s", st)
	}
	got := filepath.Join(c.work, "got.patch")
	c.must("artifact", "get", "patch-a", "--claim", "C17", "-o", got)
	if b, _ := os.ReadFile(got); string(b) != mustRead(t, patchA) {
		t.Fatalf("patch-a read back as %q", b)
	}

	// Listings.
	ls := decode(t, c.must("claim", "ls", "--json"))
	states := map[string]string{}
	for _, s := range ls["claims"].([]any) {
		s := s.(map[string]any)
		states[s["claim"].(string)] = s["state"].(string)
	}
	if states["C17"] != "ValidationFailed" || states["C18"] != "Satisfied" || len(states) != 2 {
		t.Fatalf("claim ls: %v", states)
	}
	if out := c.must("claim", "graph"); !strings.Contains(out, "predecessor") {
		t.Fatalf("claim graph:\n%s", out)
	}
	if out := c.must("artifact", "verify"); strings.Count(out, " ok") < 8 {
		t.Fatalf("artifact verify:\n%s", out)
	}
	// Nothing the fold ignored: every record the CLI wrote was valid.
	if r := c.run("verify"); r.code != 0 {
		t.Fatalf("verify: %v", r)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// openC17 takes C17 up to a received testament binding patch-a.
func openC17(t *testing.T) (*claimLedger, string) {
	c := newClaimLedger(t)
	patchA := c.file("a", "patch.txt", "fixed escape\n")
	if r := c.runWith(runOpts{stdin: c17}, "--dir", c.dir, "claim", "create", "-", "--as", maintainer); r.code != 0 {
		t.Fatalf("create: %v", r)
	}
	c.must("claim", "post", "C17", "--as", maintainer)
	c.must("receipt", "acquire", "C17", "--as", parser)
	c.deliver("C17", "T1", "patch-a", patchA, "1")
	return c, patchA
}

// TestE2EClaimRefusals: refusals exit with their code, print one JSON error
// in --json mode, and leave the log's bytes unchanged.
func TestE2EClaimRefusals(t *testing.T) {
	c, _ := openC17(t)
	evidence := c.file("e", "log.txt", "looked at it\n")

	t.Run("wrong evaluator", func(t *testing.T) {
		msg := c.refused(runOpts{}, 1, "forbidden", "check", "report", "behavior", "--claim", "C17", "--artifact", "patch-a",
			"--result", "pass", "--evidence-file", evidence, "--as", parser)
		if !strings.Contains(msg, "designated evaluator maintainer") {
			t.Fatal(msg)
		}
		c.refused(runOpts{}, 1, "forbidden", "check", "begin", "behavior", "--claim", "C17", "--artifact", "patch-a", "--as", parser)
		c.refused(runOpts{}, 1, "forbidden", "check", "run", "behavior", "--claim", "C17", "--command", "true", "--as", parser)
	})

	// Required members are the claim core's rule, so the CLI refuses them
	// with the core's words, and appends nothing.
	t.Run("required members", func(t *testing.T) {
		for _, tc := range []struct {
			field string
			args  []string
		}{
			{"reason", []string{"claim", "cancel", "C17", "--as", maintainer}},
			{"reason", []string{"claim", "post", "C17", "--failed", "--as", maintainer}},
			{"successor", []string{"claim", "supersede", "C17", "--as", maintainer}},
			{"holder", []string{"receipt", "adopt", "C17", "--as", maintainer}},
			{"note", []string{"progress", "C17", "--generation", "1", "--as", parser}},
			// Without --respondent a claim is posted to a pool; with both, refused.
			{"pool", []string{"claim", "create", "C50", "--work", "w", "--respondent", parser, "--pool", "worker-1", "--as", maintainer}},
			{"work", []string{"claim", "create", "C51", "--respondent", parser, "--as", maintainer}},
		} {
			if msg := c.refused(runOpts{}, 2, "invalid", tc.args...); !strings.HasPrefix(msg, tc.field+":") {
				t.Errorf("%v: the refusal does not name %s: %s", tc.args, tc.field, msg)
			}
		}
	})

	t.Run("unknown field on stdin", func(t *testing.T) {
		doc := strings.Replace(c17, `"claim":"C17"`, `"claim":"C99","colour":"red"`, 1)
		msg := c.refused(runOpts{stdin: doc}, 2, "invalid", "claim", "create", "-", "--as", maintainer)
		if !strings.Contains(msg, "colour") {
			t.Fatalf("the refusal does not name the field: %s", msg)
		}
		nested := strings.Replace(c17, `"attempts":2`, `"attempts":2,"retries":3`, 1)
		if msg := c.refused(runOpts{stdin: nested}, 2, "invalid", "claim", "create", "-", "--as", maintainer); !strings.Contains(msg, "retries") {
			t.Fatalf("nested: %s", msg)
		}
		if msg := c.refused(runOpts{stdin: `{"claim":"C17","note":"x","generation":1,"mood":"ok"}`}, 2, "invalid", "progress", "-", "--as", parser); !strings.Contains(msg, "mood") {
			t.Fatalf("progress: %s", msg)
		}
		if msg := c.refused(runOpts{stdin: `{"claim":"C17","generation":"one","note":"x"}`}, 2, "invalid", "progress", "-", "--as", parser); !strings.Contains(msg, "generation") {
			t.Fatalf("type: %s", msg)
		}
		// Text mode names it too, on stderr.
		r := c.runWith(runOpts{stdin: doc}, "--dir", c.dir, "claim", "create", "-", "--as", maintainer)
		if r.code != 2 || !strings.Contains(r.err, "colour") {
			t.Fatalf("text mode: %v", r)
		}
		// A well-formed document on stdin is accepted by the same verb.
		c.must("progress", "C17", "--generation", "1", "--note", "flags work", "--as", parser)
		if r := c.runWith(runOpts{stdin: `{"claim":"C17","generation":1,"note":"from stdin"}`}, "--dir", c.dir, "progress", "-", "--as", parser); r.code != 0 {
			t.Fatalf("progress from stdin: %v", r)
		}
	})

	t.Run("stale receipt generation after adopt", func(t *testing.T) {
		c.must("receipt", "adopt", "C17", "--holder", "parser-2", "--reason", "parser stopped answering", "--as", maintainer)
		if rc := c.show("C17")["receipt"].(map[string]any); rc["holder"] != "parser-2" || rc["generation"] != json.Number("2") {
			t.Fatalf("receipt after adopt: %v", rc)
		}
		msg := c.refused(runOpts{}, 1, "conflict", "progress", "C17", "--generation", "1", "--note", "still here", "--as", parser)
		if !strings.Contains(msg, "stale receipt generation 1") {
			t.Fatal(msg)
		}
		c.refused(runOpts{}, 1, "conflict", "progress", "C17", "--generation", "1", "--note", "old generation", "--as", "parser-2")
		c.refused(runOpts{}, 1, "conflict", "artifact", "put", evidence, "--claim", "C17", "--slot", "change", "--generation", "1", "--as", parser)
		c.must("progress", "C17", "--generation", "2", "--note", "picked up the work", "--as", "parser-2")
	})

	t.Run("damaged artifact copy", func(t *testing.T) {
		v := c.show("C17")
		var content string
		for _, a := range v["artifacts"].([]any) {
			if a := a.(map[string]any); a["artifact"] == "patch-a" {
				content = a["content"].(string)
			}
		}
		obj := filepath.Join(c.dir, "objects", content[:2], content[2:])
		b, err := os.ReadFile(obj)
		if err != nil {
			t.Fatalf("the object is not where the store keeps it: %v", err)
		}
		b[0] ^= 0x20
		if err := os.WriteFile(obj, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(c.work, "out.patch")
		msg := c.refused(runOpts{}, 1, "damaged", "artifact", "get", "patch-a", "--claim", "C17", "-o", out)
		if !strings.Contains(msg, "damaged") {
			t.Fatal(msg)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Fatalf("a damaged copy was written: %v", err)
		}
		if r := c.run("artifact", "get", "patch-a", "--claim", "C17"); r.code != 1 || r.out != "" {
			t.Fatalf("get to stdout served a damaged copy: %v", r)
		}
		c.refused(runOpts{}, 1, "damaged", "check", "begin", "behavior", "--claim", "C17", "--artifact", "patch-a", "--as", maintainer)
		c.refused(runOpts{}, 1, "damaged", "check", "run", "behavior", "--claim", "C17", "--artifact", "patch-a", "--command", "true", "--as", maintainer)
		c.refused(runOpts{}, 1, "damaged", "check", "report", "review", "--claim", "C17", "--artifact", "patch-a", "--result", "pass", "--evidence-file", evidence, "--as", maintainer)
		if r := c.run("artifact", "verify", "--claim", "C17"); r.code != 1 || !strings.Contains(r.out, "damaged") {
			t.Fatalf("verify: %v", r)
		}
		// A missing copy is refused as well.
		if err := os.Remove(obj); err != nil {
			t.Fatal(err)
		}
		c.refused(runOpts{}, 1, "not_found", "check", "begin", "behavior", "--claim", "C17", "--artifact", "patch-a", "--as", maintainer)
	})
}

// TestE2EClaimOverdueAndHuman: an open claim past its deadline shows as
// overdue until the timekeeper commits the fact; human output is aligned text
// without colour when stdout is not a terminal.
func TestE2EClaimOverdueAndHuman(t *testing.T) {
	c := newClaimLedger(t)
	c.must("claim", "create", "C1", "--respondent", parser, "--work", "w", "--deadline", "2h", "--check", "out/tests:validator=test-report", "--as", maintainer)
	ls := c.must("claim", "ls", "--now", "2999-01-01T00:00:00Z")
	if !strings.Contains(ls, "Generated (overdue)") || strings.Contains(ls, "\x1b[") {
		t.Fatalf("claim ls:\n%q", ls)
	}
	doc := decode(t, c.must("claim", "ls", "--overdue", "--json", "--now", "2999-01-01T00:00:00Z"))
	if list := doc["claims"].([]any); len(list) != 1 || list[0].(map[string]any)["overdue"] != true {
		t.Fatalf("ls --overdue: %v", doc)
	}
	if doc := decode(t, c.must("claim", "ls", "--overdue", "--json")); len(doc["claims"].([]any)) != 0 {
		t.Fatalf("overdue now: %v", doc)
	}
	if out := c.must("claim", "show", "C1", "--now", "2999-01-01T00:00:00Z"); !strings.Contains(out, "overdue") {
		t.Fatalf("show:\n%s", out)
	}
}

// TestE2EClaimTestReport: check run with the test-report validator reads a
// go test -json report published as the artifact; a failed test fails the
// check.
func TestE2EClaimTestReport(t *testing.T) {
	c := newClaimLedger(t)
	c.must("claim", "create", "C1", "--respondent", parser, "--work", "w", "--check", "report/tests:validator=test-report", "--as", maintainer)
	c.must("claim", "post", "C1", "--as", maintainer)
	c.must("receipt", "acquire", "C1", "--as", parser)
	rep := c.file("r", "report.json", `{"Action":"pass","Package":"p","Test":"TestA"}`+"\n"+`{"Action":"fail","Package":"p","Test":"TestB"}`+"\n")
	c.must("artifact", "put", rep, "--claim", "C1", "--slot", "report", "--generation", "1", "--kind", "test-report", "--schema", "go-test-json", "--id", "r1", "--as", parser)
	c.must("testament", "close", "C1", "--id", "T1", "--generation", "1", "--summary", "ran the tests", "--bind", "report=r1", "--as", parser)
	c.must("testament", "post", "C1", "T1", "--as", parser)
	c.must("testament", "receive", "C1", "T1", "--as", maintainer)
	out := c.must("check", "run", "tests", "--claim", "C1", "--as", maintainer)
	if !strings.Contains(out, "tests on r1: fail") || !strings.Contains(out, "1 passed, 1 failed") {
		t.Fatalf("check run:\n%s", out)
	}
	c.wantState("C1", "ValidationFailed")
}

// A verdict the core refuses (here: its target named with a digest that is
// not the artifact's) leaves no evidence behind: the evidence is published
// in the verdict's own write. And on a claim that has ended, no new attempt
// begins, with or without evidence.
func TestE2EClaimRefusedVerdictLeavesNoEvidence(t *testing.T) {
	c, _ := openC17(t)
	evidence := c.file("e", "log.txt", "looked at it\n")
	c.refused(runOpts{}, 1, "conflict", "check", "report", "behavior", "--claim", "C17", "--artifact", "patch-a",
		"--digest", strings.Repeat("0", 64), "--result", "pass", "--evidence-file", evidence, "--as", maintainer)
	if arts := c.must("artifact", "ls", "--claim", "C17"); strings.Contains(arts, "ev_") {
		t.Fatalf("evidence recorded for a refused verdict:\n%s", arts)
	}
	c.must("claim", "cancel", "C17", "--reason", "no longer needed", "--as", maintainer)
	c.refused(runOpts{}, 1, "conflict", "check", "report", "behavior", "--claim", "C17", "--artifact", "patch-a",
		"--result", "pass", "--evidence-file", evidence, "--as", maintainer)
	c.refused(runOpts{}, 1, "conflict", "check", "run", "behavior", "--claim", "C17", "--command", "true", "--as", maintainer)
}
