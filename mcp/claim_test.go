package mcp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tally/verb/verbtest"
)

// c17 is the seed's claim (verbtest.C17).
const c17 = verbtest.C17

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func args(doc string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		panic(err)
	}
	return m
}

// deliver publishes patch for the change slot of claimID and closes, posts
// and has the maintainer receive a testament binding it.
func deliver(t *testing.T, parser, maintainer *sdk.ClientSession, claimID, testament, artifact, patch string) {
	t.Helper()
	ok(t, parser, "tally_claim/artifact.publish", map[string]any{"claim": claimID, "artifact": artifact, "slot": "change", "generation": 1,
		"kind": "patch", "schema": "text/x-diff", "content_base64": b64(patch)})
	ok(t, parser, "tally_claim/testament.close", map[string]any{"claim": claimID, "testament": testament, "generation": 1, "outcome": "complete",
		"summary": "length check before decoding the escape", "confidence": 0.9, "bindings": []map[string]any{{"slot": "change", "artifact": artifact}}})
	ok(t, parser, "tally_claim/testament.post", map[string]any{"claim": claimID, "testament": testament})
	ok(t, maintainer, "tally_claim/testament.receive", map[string]any{"claim": claimID, "testament": testament})
}

// verdict begins and reports a check as the maintainer, with evidence.
func verdict(t *testing.T, maintainer *sdk.ClientSession, claimID, check, artifact, result, evidence string) map[string]any {
	t.Helper()
	ok(t, maintainer, "tally_claim/check.begin", map[string]any{"claim": claimID, "check": check, "artifact": artifact})
	return ok(t, maintainer, "tally_claim/check.report", map[string]any{"claim": claimID, "check": check, "artifact": artifact, "result": result,
		"evidence": claimID + "-" + check + "-" + artifact + "-log", "evidence_base64": b64(evidence)})
}

// The seed's C17 and C18 through tool calls: C17's patch fails review
// (ValidationFailed, with why); its successor C18, inheriting the slots,
// passes both checks on one patch (Satisfied). Refusals on the way are tool
// errors naming the rule, and append nothing.
func TestClaimsC17C18(t *testing.T) {
	f := newFixture(t)
	maintainer, parser, stranger := f.client("maintainer"), f.client("parser"), f.client("stranger")

	d := ok(t, maintainer, "tally_claim/create", args(c17))
	if str(d, "claim", "state") != "Generated" {
		t.Fatalf("created: %v", d)
	}
	size := f.logSize("default", "default")
	for _, c := range []struct {
		who        *sdk.ClientSession
		tool, code string
		args       map[string]any
	}{
		{parser, "tally_claim/post", "forbidden", map[string]any{"claim": "C17"}},
		{stranger, "tally_claim/cancel", "forbidden", map[string]any{"claim": "C17", "reason": "mine now"}},
		{parser, "tally_claim/receipt.acquire", "", map[string]any{"claim": "C17"}}, // not posted yet
		{maintainer, "tally_claim/create", "conflict", args(c17)},
		{maintainer, "tally_claim_read/show", "not_found", map[string]any{"claim": "C99"}},
	} {
		f.wantRefused(t, c.who, c.tool, c.args, c.code, "")
	}
	ok(t, maintainer, "tally_claim/post", map[string]any{"claim": "C17"})
	ok(t, parser, "tally_claim/receipt.acquire", map[string]any{"claim": "C17"})
	p := ok(t, parser, "tally_claim/progress", map[string]any{"claim": "C17", "generation": 1, "note": "found the faulty branch"})
	if str(p, "claim", "state") != "Progressed" {
		t.Fatalf("progress: %v", p)
	}
	// Bytes are refused before anything is stored: none, both, not base64.
	size = f.logSize("default", "default")
	for _, c := range []struct {
		args map[string]any
		says string
	}{
		{map[string]any{"claim": "C17", "artifact": "patch-x", "slot": "change"}, "content_base64: required"},
		{map[string]any{"claim": "C17", "artifact": "patch-x", "slot": "change", "content_base64": "not base64!"}, "content_base64: must be base64"},
		{map[string]any{"claim": "C17", "artifact": "patch-x", "slot": "change", "content_path": "/etc/hostname"}, "content_path: is not a field"},
	} {
		if msg, code := refusal(t, parser, "tally_claim/artifact.publish", c.args); code != "invalid" || !strings.Contains(msg, c.says) {
			t.Errorf("publish %v: %q %s", c.args, msg, code)
		}
	}
	if msg, code := refusal(t, maintainer, "tally_claim/artifact.publish", map[string]any{"claim": "C17", "artifact": "patch-m", "slot": "change", "generation": 1, "content_base64": b64("x")}); code != "forbidden" {
		t.Errorf("the claimant publishing work: %q %s", msg, code)
	}
	if f.logSize("default", "default") != size {
		t.Fatal("a refused publish appended")
	}

	deliver(t, parser, maintainer, "C17", "T1", "patch-a", "--- a/parser.go\n+++ b/parser.go\n+\tif len(s) < 6 { return errIncomplete }\n")
	// A verdict by a non-evaluator: refused, nothing recorded.
	size = f.logSize("default", "default")
	if msg, code := refusal(t, parser, "tally_claim/check.report", map[string]any{"claim": "C17", "check": "review", "artifact": "patch-a", "result": "pass",
		"evidence": "forged-log", "evidence_base64": b64("looks fine\n")}); code != "forbidden" || !strings.Contains(msg, "evaluator") {
		t.Errorf("a verdict by the respondent: %q %s", msg, code)
	}
	if f.logSize("default", "default") != size {
		t.Fatal("a refused verdict appended")
	}
	v := verdict(t, maintainer, "C17", "behavior", "patch-a", "pass", "go test ./parser: ok\n")
	v = verdict(t, maintainer, "C17", "review", "patch-a", "fail", "patch A: unchecked read after the escape\n")
	if str(v, "claim", "state") != "ValidationFailed" {
		t.Fatalf("after the failing review: %v", v)
	}
	show := ok(t, stranger, "tally_claim_read/show", map[string]any{"claim": "C17"})
	if !strings.Contains(text2(show), "review") || show["claim"].(map[string]any)["why"] == nil {
		t.Fatalf("show C17 has no why: %v", show)
	}

	// The successor, naming C17, inherits its slots.
	ok(t, maintainer, "tally_claim/create", map[string]any{"claim": "C18", "respondent": "parser", "work": "reject incomplete Unicode escapes (bounds checked)", "predecessor": "C17"})
	ok(t, maintainer, "tally_claim/post", map[string]any{"claim": "C18"})
	// The respondent resuming its seat is told of C18 and how to act.
	pr, err := parser.GetPrompt(context.Background(), &sdk.GetPromptParams{Name: "resume_seat"})
	if err != nil {
		t.Fatal(err)
	}
	if body := pr.Messages[0].Content.(*sdk.TextContent).Text; !strings.Contains(body, "- C18 as respondent (Posted): acquire the execution receipt; work: reject incomplete Unicode escapes (bounds checked)") || strings.Contains(body, "C17") {
		t.Fatalf("prompt of parser:\n%s", body)
	}
	ok(t, parser, "tally_claim/receipt.acquire", map[string]any{"claim": "C18"})
	deliver(t, parser, maintainer, "C18", "T2", "patch-b", "--- a/parser.go\n+++ b/parser.go\n+\tif len(s) < i+6 { return errIncomplete }\n")
	verdict(t, maintainer, "C18", "behavior", "patch-b", "pass", "go test ./parser: ok\n")
	v = verdict(t, maintainer, "C18", "review", "patch-b", "pass", "patch B: bounds checked before every read\n")
	if str(v, "claim", "state") != "Satisfied" {
		t.Fatalf("C18: %v", v)
	}
	list := ok(t, stranger, "tally_claim_read/list", map[string]any{"participant": "parser"})
	if cs, _ := list["claims"].([]any); len(cs) != 2 {
		t.Fatalf("claims of parser: %v", list)
	}
	g := ok(t, stranger, "tally_claim_read/graph", map[string]any{})
	if !strings.Contains(text2(g), `"C18"`) {
		t.Fatalf("graph: %v", g)
	}
}

// Over stdio a publish may name a file the server reads; the bytes are
// the file's.
func TestClaimPublishFromPath(t *testing.T) {
	f := newFixture(t)
	f.readPaths = true
	maintainer, parser := f.client("maintainer"), f.client("parser")
	ok(t, maintainer, "tally_claim/create", args(c17))
	ok(t, maintainer, "tally_claim/post", map[string]any{"claim": "C17"})
	ok(t, parser, "tally_claim/receipt.acquire", map[string]any{"claim": "C17"})
	patch := filepath.Join(t.TempDir(), "patch.diff")
	if err := os.WriteFile(patch, []byte("+\tif len(s) < 6 { return errIncomplete }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	size := f.logSize("default", "default")
	for _, c := range []struct {
		args map[string]any
		says string
	}{
		{map[string]any{"claim": "C17", "artifact": "patch-a", "slot": "change", "content_path": patch, "content_base64": b64("x")}, "give the bytes once"},
		{map[string]any{"claim": "C17", "artifact": "patch-a", "slot": "change", "content_path": patch + ".missing"}, "content_path: cannot be read"},
	} {
		if msg, code := refusal(t, parser, "tally_claim/artifact.publish", c.args); code != "invalid" || !strings.Contains(msg, c.says) {
			t.Errorf("%v: %q %s", c.args, msg, code)
		}
	}
	if f.logSize("default", "default") != size {
		t.Fatal("a refused publish appended")
	}
	d := ok(t, parser, "tally_claim/artifact.publish", map[string]any{"claim": "C17", "artifact": "patch-a", "slot": "change", "generation": 1, "content_path": patch})
	if !strings.Contains(text2(d), "patch-a") {
		t.Fatalf("published: %v", d)
	}
}

// The claim verbs the seed's story does not reach: the receipt adopted,
// progress by a former holder, an artifact received, a claim revoked and
// one superseded; each refused first for a stranger, appending nothing.
func TestClaimReceiptRevokeSupersede(t *testing.T) {
	f := newFixture(t)
	maintainer, parser, stranger := f.client("maintainer"), f.client("parser"), f.client("stranger")
	one := func(id string) map[string]any {
		return map[string]any{"claim": id, "respondent": "parser", "work": "w " + id, "slots": []map[string]any{{"name": "change", "mode": "required",
			"checks": []map[string]any{{"id": "review", "validator": map[string]any{"name": "review", "version": "1"}, "evaluator": "maintainer", "mode": "required", "phases": []string{"quality"}, "attempts": 1}}}}}
	}
	refuse := func(who *sdk.ClientSession, tool string, a map[string]any, code string) {
		t.Helper()
		size := f.logSize("default", "default")
		if msg, got := refusal(t, who, tool, a); got != code || !strings.Contains(msg, ": ") {
			t.Errorf("%s %v: %q %s, want %s", tool, a, msg, got, code)
		}
		if f.logSize("default", "default") != size {
			t.Fatalf("%s: the log grew", tool)
		}
	}
	for _, id := range []string{"C30", "C31"} {
		ok(t, maintainer, "tally_claim/create", one(id))
		ok(t, maintainer, "tally_claim/post", map[string]any{"claim": id})
	}
	ok(t, parser, "tally_claim/receipt.acquire", map[string]any{"claim": "C30"})
	ok(t, parser, "tally_claim/artifact.publish", map[string]any{"claim": "C30", "artifact": "draft", "slot": "change", "generation": 1, "content_base64": b64("draft\n")})
	refuse(stranger, "tally_claim/artifact.receive", map[string]any{"claim": "C30", "artifact": "draft"}, "forbidden")
	ok(t, maintainer, "tally_claim/artifact.receive", map[string]any{"claim": "C30", "artifact": "draft"})

	refuse(stranger, "tally_claim/receipt.adopt", map[string]any{"claim": "C30", "holder": "stranger"}, "forbidden")
	a := ok(t, maintainer, "tally_claim/receipt.adopt", map[string]any{"claim": "C30", "holder": "parser2", "reason": "parser is gone"})
	if !strings.Contains(text2(a), `"parser2"`) {
		t.Fatalf("adopted: %v", a)
	}
	refuse(parser, "tally_claim/progress", map[string]any{"claim": "C30", "generation": 1, "note": "still mine?"}, "conflict")
	refuse(parser, "tally_claim/progress", map[string]any{"claim": "C30", "generation": 2, "note": "still mine?"}, "forbidden")
	ok(t, f.client("parser2"), "tally_claim/progress", map[string]any{"claim": "C30", "generation": 2, "note": "picked up"})

	refuse(stranger, "tally_claim/revoke", map[string]any{"claim": "C30", "reason": "x"}, "forbidden")
	r := ok(t, maintainer, "tally_claim/revoke", map[string]any{"claim": "C30", "reason": "the work moved elsewhere"})
	if str(r, "claim", "state") != "Revoked" {
		t.Fatalf("revoked: %v", r)
	}
	refuse(maintainer, "tally_claim/revoke", map[string]any{"claim": "C30", "reason": "again"}, "conflict")

	ok(t, maintainer, "tally_claim/create", map[string]any{"claim": "C32", "respondent": "parser", "work": "w C32", "predecessor": "C31"})
	refuse(stranger, "tally_claim/supersede", map[string]any{"claim": "C31", "successor": "C32"}, "forbidden")
	s := ok(t, maintainer, "tally_claim/supersede", map[string]any{"claim": "C31", "successor": "C32", "reason": "narrower scope"})
	if str(s, "claim", "state") != "Superseded" {
		t.Fatalf("superseded: %v", s)
	}
	ok(t, maintainer, "tally_claim/create", one("C33"))
	c := ok(t, maintainer, "tally_claim/cancel", map[string]any{"claim": "C33", "reason": "not needed"})
	if str(c, "claim", "state") != "Cancelled" {
		t.Fatalf("cancelled: %v", c)
	}
}
