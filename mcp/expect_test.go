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
// answer conforms to its output schema, each refusal names its rule and
// appends nothing.
func TestExpectations(t *testing.T) {
	f := newFixture(t)
	reviewer, stranger := f.client("reviewer"), f.client("stranger")
	ts := tools(t, reviewer)

	r := ok(t, reviewer, "tally_expect_raise", raiseShip("exp_ship"))
	conform(t, ts["tally_expect_raise"], r)
	if str(r, "expectation", "expectationId") != "exp_ship" || str(r, "expectation", "by") != "reviewer" {
		t.Fatalf("raised: %v", r)
	}
	s := ok(t, stranger, "tally_expect_show", map[string]any{"expectationId": "exp_ship"})
	conform(t, ts["tally_expect_show"], s)
	l := ok(t, stranger, "tally_expect_list", map[string]any{"state": "open", "subject": map[string]any{"type": "promise", "id": "desk/ship-91"}})
	conform(t, ts["tally_expect_list"], l)
	if xs, _ := l["expectations"].([]any); len(xs) != 1 {
		t.Fatalf("listed: %v", l)
	}
	fact := ok(t, stranger, "tally_expect_fact", map[string]any{"factKey": "schema.reviewed", "subject": map[string]any{"type": "promise", "id": "desk/ship-91"}})
	conform(t, ts["tally_expect_fact"], fact)
	if !strings.Contains(text2(fact), `"satisfied":["exp_ship"]`) {
		t.Fatalf("fact: %v", fact)
	}

	two := raiseShip("exp_two")
	two["satisfiedBy"] = map[string]any{"factKey": "schema.merged"}
	ok(t, reviewer, "tally_expect_raise", two)
	ext := raiseShip("exp_three")
	ext["satisfiedBy"] = map[string]any{"factKey": "schema.merged"}
	ext["supersedes"], ext["dueAt"] = "exp_two", "2026-09-02T17:00:00Z"
	delete(ext, "subject")
	sup := ok(t, reviewer, "tally_expect_supersede", ext)
	conform(t, ts["tally_expect_supersede"], sup)
	if str(sup, "expectation", "expectationId") != "exp_three" || str(sup, "expectation", "subject", "id") != "desk/ship-91" {
		t.Fatalf("superseded (the subject inherited): %v", sup)
	}

	size := f.logSize("default", "default")
	for _, c := range []struct {
		who        *sdk.ClientSession
		tool, code string
		args       map[string]any
		says       string
	}{
		{stranger, "tally_expect_withdraw", "forbidden", map[string]any{"expectationId": "exp_three", "reason": "not mine"}, "raiser"},
		{reviewer, "tally_expect_withdraw", "not_found", map[string]any{"expectationId": "exp_none"}, "expectationId"},
		{reviewer, "tally_expect_withdraw", "invalid", map[string]any{"reason": "which?"}, "expectationId: required"},
		{reviewer, "tally_expect_withdraw", "conflict", map[string]any{"expectationId": "exp_ship"}, "open"},
		{reviewer, "tally_expect_raise", "invalid", map[string]any{"subject": map[string]any{"type": "promise", "id": "x"}, "dueAt": "2026-09-01T17:00:00Z"}, "basis: required"},
		{reviewer, "tally_expect_raise", "invalid", map[string]any{"subject": map[string]any{"type": "promise", "id": "x"}, "dueAt": "tomorrow", "basis": "contract"}, "dueAt"},
		{reviewer, "tally_expect_raise", "forbidden", func() map[string]any { m := raiseShip("exp_four"); m["by"] = "author"; return m }(), "by"},
		{reviewer, "tally_expect_raise", "invalid", map[string]any{"subject": "promise:x", "dueAt": "2026-09-01T17:00:00Z", "basis": "contract"}, "subject"},
		{reviewer, "tally_expect_supersede", "invalid", map[string]any{"dueAt": "2026-09-03T17:00:00Z", "basis": "contract"}, "supersedes: required"},
		{stranger, "tally_expect_show", "not_found", map[string]any{"expectationId": "exp_none"}, ""},
		{stranger, "tally_expect_lapses", "invalid", map[string]any{"since": "last week"}, "since"},
	} {
		msg, code := refusal(t, c.who, c.tool, c.args)
		if code != c.code || !strings.Contains(msg, c.says) || !strings.Contains(msg, ": ") {
			t.Errorf("%s %v: %q (%s), want %s saying %q", c.tool, c.args, msg, code, c.code, c.says)
		}
		if f.logSize("default", "default") != size {
			t.Fatalf("%s %v: the log grew", c.tool, c.args)
		}
	}
	w := ok(t, reviewer, "tally_expect_withdraw", map[string]any{"expectationId": "exp_three", "reason": "the promise was renegotiated"})
	conform(t, ts["tally_expect_withdraw"], w)
	if str(w, "expectation", "state") != "withdrawn" {
		t.Fatalf("withdrawn: %v", w)
	}
	lapses := ok(t, stranger, "tally_expect_lapses", map[string]any{"since": "2026-08-01T00:00:00Z"})
	conform(t, ts["tally_expect_lapses"], lapses)
}
