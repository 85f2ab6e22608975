package mcp_test

import (
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// raiseShip is an expectation the reviewer raises: the schema reviewed by
// the promise's deadline.
func raiseShip(id string) map[string]any {
	return map[string]any{"expectationId": id, "kind": "delivery", "subject": map[string]any{"type": "promise", "id": "desk/ship-91"},
		"expects": "a reviewed schema", "satisfiedBy": map[string]any{"factKey": "schema.reviewed"},
		"dueAt": "2026-09-01T17:00:00Z", "basis": "contract"}
}

// The expectation family through tool calls: raised, shown, listed,
// satisfied by a fact, extended, withdrawn, and its lapses read; each
// answer is its document, each refusal names its rule and
// appends nothing.
func TestExpectations(t *testing.T) {
	f := newFixture(t)
	reviewer, stranger := f.client("reviewer"), f.client("stranger")

	r := ok(t, reviewer, "tally_expect/raise", raiseShip("exp_ship"))
	if str(r, "expectation", "expectationId") != "exp_ship" || str(r, "expectation", "by") != "reviewer" {
		t.Fatalf("raised: %v", r)
	}
	if s := ok(t, stranger, "tally_expect_read/show", map[string]any{"expectationId": "exp_ship"}); str(s, "expectation", "currentDue") != "2026-09-01T17:00:00Z" {
		t.Fatalf("shown: %v", s)
	}
	l := ok(t, stranger, "tally_expect_read/list", map[string]any{"state": "open", "subject": map[string]any{"type": "promise", "id": "desk/ship-91"}})
	if xs, _ := l["expectations"].([]any); len(xs) != 1 {
		t.Fatalf("listed: %v", l)
	}
	fact := ok(t, stranger, "tally_expect/fact", map[string]any{"factKey": "schema.reviewed", "subject": map[string]any{"type": "promise", "id": "desk/ship-91"}})
	if !strings.Contains(text2(fact), `"satisfied":["exp_ship"]`) {
		t.Fatalf("fact: %v", fact)
	}

	two := raiseShip("exp_two")
	two["satisfiedBy"] = map[string]any{"factKey": "schema.merged"}
	ok(t, reviewer, "tally_expect/raise", two)
	ext := raiseShip("exp_three")
	ext["satisfiedBy"] = map[string]any{"factKey": "schema.merged"}
	ext["supersedes"], ext["dueAt"] = "exp_two", "2026-09-02T17:00:00Z"
	delete(ext, "subject")
	sup := ok(t, reviewer, "tally_expect/supersede", ext)
	if str(sup, "expectation", "expectationId") != "exp_three" || str(sup, "expectation", "subject", "id") != "desk/ship-91" {
		t.Fatalf("superseded (the subject inherited): %v", sup)
	}

	for _, c := range []struct {
		who        *sdk.ClientSession
		tool, code string
		args       map[string]any
		says       string
	}{
		{stranger, "tally_expect/withdraw", "forbidden", map[string]any{"expectationId": "exp_three", "reason": "not mine"}, "raiser"},
		{reviewer, "tally_expect/withdraw", "not_found", map[string]any{"expectationId": "exp_none"}, "expectationId"},
		{reviewer, "tally_expect/withdraw", "invalid", map[string]any{"reason": "which?"}, "expectationId: required"},
		{reviewer, "tally_expect/withdraw", "conflict", map[string]any{"expectationId": "exp_ship"}, "open"},
		{reviewer, "tally_expect/raise", "invalid", map[string]any{"kind": "k", "satisfiedBy": map[string]any{"factKey": "f"}, "subject": map[string]any{"type": "promise", "id": "x"}, "dueAt": "2026-09-01T17:00:00Z"}, "basis: required"},
		{reviewer, "tally_expect/raise", "invalid", map[string]any{"kind": "k", "satisfiedBy": map[string]any{"factKey": "f"}, "subject": map[string]any{"type": "promise", "id": "x"}, "dueAt": "tomorrow", "basis": "contract"}, "dueAt"},
		{reviewer, "tally_expect/raise", "forbidden", func() map[string]any { m := raiseShip("exp_four"); m["by"] = "author"; return m }(), "by"},
		{reviewer, "tally_expect/raise", "invalid", map[string]any{"kind": "k", "satisfiedBy": map[string]any{"factKey": "f"}, "subject": "promise:x", "dueAt": "2026-09-01T17:00:00Z", "basis": "contract"}, "subject"},
		{reviewer, "tally_expect/supersede", "invalid", map[string]any{"dueAt": "2026-09-03T17:00:00Z", "basis": "contract"}, "supersedes: required"},
		{stranger, "tally_expect_read/show", "not_found", map[string]any{"expectationId": "exp_none"}, ""},
		{stranger, "tally_expect_read/lapses", "invalid", map[string]any{"since": "last week"}, "since"},
	} {
		f.wantRefused(t, c.who, c.tool, c.args, c.code, c.says)
	}
	w := ok(t, reviewer, "tally_expect/withdraw", map[string]any{"expectationId": "exp_three", "reason": "the promise was renegotiated"})
	if str(w, "expectation", "state") != "withdrawn" {
		t.Fatalf("withdrawn: %v", w)
	}
	// since is an instant, or a duration back from now.
	for _, since := range []string{"2026-08-01T00:00:00Z", "30d"} {
		ok(t, stranger, "tally_expect_read/lapses", map[string]any{"since": since})
	}
}
