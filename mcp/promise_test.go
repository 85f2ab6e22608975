package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// declareShip is the seed's declaration, as the reviewer's tool call.
var declareShip = map[string]any{
	"id": "desk/ship-91", "promise": "hand back a reviewed schema", "to": "author",
	"until": "2026-09-01T17:00:00Z", "meta": map[string]any{"rung": 0},
}

// The seed's promise lifecycle through tool calls: declared by the
// reviewer, amended, assessed violated by the author, satisfied with
// evidence; each answer is its document, conforming to its output schema.
func TestPromiseLifecycle(t *testing.T) {
	f := newFixture(t)
	reviewer, author := f.client("reviewer"), f.client("author")

	d := ok(t, reviewer, "tally_promise/declare", declareShip)
	if str(d, "promise", "id") != "desk/ship-91" || str(d, "promise", "by") != "reviewer" || str(d, "promise", "state") != "owed" || str(d, "seq") != "1" {
		t.Fatalf("declared: %v", d)
	}
	a := ok(t, reviewer, "tally_promise/amend", map[string]any{"id": "desk/ship-91", "until": "2026-09-01T18:00:00Z", "reason": "nudge 1", "meta": map[string]any{"rung": 1}})
	if str(a, "promise", "until") != "2026-09-01T18:00:00Z" {
		t.Fatalf("amended: %v", a)
	}
	as := ok(t, author, "tally_promise/assess", map[string]any{"id": "desk/ship-91", "note": "deadline passed, nothing delivered"})
	if !strings.Contains(text2(as), `"observer":"author","state":"violated"`) {
		t.Fatalf("assessed: %v", as)
	}
	list := ok(t, author, "tally_promise_read/list", map[string]any{"state": "overdue", "to": "author", "now": "2026-09-01T18:40:00Z"})
	if ps, _ := list["promises"].([]any); len(ps) != 1 {
		t.Fatalf("overdue to author: %v", list)
	}
	owed := ok(t, reviewer, "tally_promise_read/owed", map[string]any{"now": "2026-09-01T18:40:00Z"})
	if ps, _ := owed["promises"].([]any); len(ps) != 1 || !strings.Contains(text2(owed), `"overdue":true`) {
		t.Fatalf("owed by the reviewer: %v", owed)
	}
	if ps, _ := ok(t, author, "tally_promise_read/owed", map[string]any{})["promises"].([]any); len(ps) != 0 {
		t.Fatalf("owed by the author: %v", ps)
	}
	r := ok(t, reviewer, "tally_promise/resolve", map[string]any{"id": "desk/ship-91", "resolution": "satisfied", "evidence": []string{"https://example.org/reviews/91"}, "request_id": "resolve-91"})
	if str(r, "promise", "state") != "satisfied" {
		t.Fatalf("resolved: %v", r)
	}
	size := f.logSize("default", "default")
	// A retry with the same request id is the recorded answer, appending nothing.
	again := call(t, reviewer, "tally_promise/resolve", map[string]any{"id": "desk/ship-91", "resolution": "satisfied", "evidence": []string{"https://example.org/reviews/91"}, "request_id": "resolve-91"})
	if again.IsError || !jsonEqual(t, text(again), r) || again.Meta["tally/replayed"] != true || f.logSize("default", "default") != size {
		t.Fatalf("replay: %s %v", text(again), again.Meta)
	}
	g := ok(t, author, "tally_promise_read/graph", map[string]any{})
	if !strings.Contains(text2(g), `"state":"satisfied"`) {
		t.Fatalf("graph: %v", g)
	}
	show := ok(t, author, "tally_promise_read/show", map[string]any{"id": "desk/ship-91", "now": "2026-09-02T10:00:00Z"})
	if str(show, "now") != "2026-09-02T10:00:00Z" || str(show, "promise", "state") != "satisfied" || str(show, "promise", "resolved_by") != "reviewer" {
		t.Fatalf("shown: %v", show)
	}
}

// declare is a declaration's arguments with its action.
func declare(args map[string]any) map[string]any {
	_, with := withAction("tally_promise/declare", args)
	return with.(map[string]any)
}

func text2(m map[string]any) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// Each refusal of the promise family is a tool error carrying the error
// document (the rule's field and words, its code), and appends nothing.
func TestPromiseRefusals(t *testing.T) {
	f := newFixture(t)
	reviewer, author, stranger := f.client("reviewer"), f.client("author"), f.client("stranger")
	ok(t, reviewer, "tally_promise/declare", declareShip)
	ok(t, reviewer, "tally_promise/declare", map[string]any{"id": "r2", "promise": "x", "to": "author", "until": "2h", "request_id": "k1"})
	for _, c := range []struct {
		who  *sdk.ClientSession
		tool string
		args map[string]any
		code string
		says string
	}{
		{stranger, "tally_promise/amend", map[string]any{"id": "desk/ship-91", "until": "3h"}, "forbidden", "debtor"},
		{author, "tally_promise/resolve", map[string]any{"id": "desk/ship-91", "resolution": "satisfied", "evidence": []string{"x"}}, "forbidden", ""},
		{stranger, "tally_promise/resolve", map[string]any{"id": "desk/ship-91", "resolution": "released"}, "forbidden", "creditor"},
		{reviewer, "tally_promise/resolve", map[string]any{"id": "desk/ship-91", "resolution": "satisfied"}, "invalid", "evidence"},
		{reviewer, "tally_promise/resolve", map[string]any{"id": "desk/ship-91", "resolution": "cancelled"}, "invalid", "reason"},
		{reviewer, "tally_promise/resolve", map[string]any{"id": "desk/ship-91", "resolution": "done"}, "invalid", "resolution"},
		{reviewer, "tally_promise/declare", declareShip, "conflict", "id"},
		{reviewer, "tally_promise/declare", map[string]any{"promise": "x", "to": "author", "until": "yesterday"}, "invalid", "until"},
		{reviewer, "tally_promise/declare", map[string]any{"promise": "x", "by": "author", "to": "reviewer", "until": "2h"}, "forbidden", "by"},
		{reviewer, "tally_promise/amend", map[string]any{"id": "nope", "until": "2h"}, "not_found", "nope"},
		{reviewer, "tally_promise/assess", map[string]any{"id": "nope"}, "not_found", ""},
		{author, "tally_promise_read/show", map[string]any{"id": "nope"}, "not_found", ""},
		{reviewer, "tally_promise/declare", map[string]any{"id": "r3", "promise": "y", "to": "author", "until": "2h", "request_id": "k1"}, "IdempotencyConflict", "request id"},
		{reviewer, "tally_promise_read/list", map[string]any{"session": "no-such"}, "NoSuchSession", "session"},
	} {
		f.wantRefused(t, c.who, c.tool, c.args, c.code, c.says)
	}
}

// The resources read a seat's open promises and a session's, and the
// prompt lists what the seat owes, overdue first, with the ids to act.
func TestResourcesAndPrompt(t *testing.T) {
	f := newFixture(t)
	reviewer := f.client("reviewer")
	ok(t, reviewer, "tally_promise/declare", declareShip)
	ok(t, reviewer, "tally_promise/declare", map[string]any{"id": "later", "promise": "write the notes", "to": "author", "until": "2026-12-01T00:00:00Z"})
	ok(t, f.client("author"), "tally_promise/declare", map[string]any{"id": "a1", "promise": "send the draft", "to": "reviewer", "until": "2026-08-30T00:00:00Z"})
	ctx := context.Background()
	for uri, want := range map[string][]string{
		"tally://owed/reviewer":                   {"desk/ship-91", "later"},
		"tally://sessions/default/owed/author":    {"a1"},
		"tally://sessions/default/open":           {"desk/ship-91", "later", "a1"},
		"tally://sessions/default%2Fdefault/open": {"desk/ship-91", "later", "a1"},
	} {
		res, err := reviewer.ReadResource(ctx, &sdk.ReadResourceParams{URI: uri})
		if err != nil {
			t.Fatalf("%s: %v", uri, err)
		}
		var doc struct {
			Promises []struct{ ID string } `json:"promises"`
		}
		if err := json.Unmarshal([]byte(res.Contents[0].Text), &doc); err != nil {
			t.Fatalf("%s: %v", uri, err)
		}
		var ids []string
		for _, p := range doc.Promises {
			ids = append(ids, p.ID)
		}
		if strings.Join(ids, " ") != strings.Join(want, " ") {
			t.Errorf("%s: %v, want %v", uri, ids, want)
		}
	}
	// A session's open obligations: a document a family.
	ok(t, reviewer, "tally_expect/raise", raiseShip("exp_ship"))
	open, err := reviewer.ReadResource(ctx, &sdk.ReadResourceParams{URI: "tally://sessions/default/open"})
	if err != nil || len(open.Contents) != 2 || !strings.Contains(open.Contents[0].Text, `"promises":[`) || !strings.Contains(open.Contents[1].Text, `"expectationId":"exp_ship"`) {
		t.Fatalf("open obligations: %v %+v", err, open)
	}
	if _, err := reviewer.ReadResource(ctx, &sdk.ReadResourceParams{URI: "tally://nothing/here"}); err == nil {
		t.Error("an unknown resource was read")
	}
	p, err := reviewer.GetPrompt(ctx, &sdk.GetPromptParams{Name: "resume_seat"})
	if err != nil {
		t.Fatal(err)
	}
	body := p.Messages[0].Content.(*sdk.TextContent).Text
	ship, later, late := strings.Index(body, "- desk/ship-91 to author, overdue"), strings.Index(body, "- later to author"), strings.Index(body, "- a1 by author, overdue")
	if ship < 0 || later < ship || late < later || !strings.Contains(body, "next: tally --as reviewer resolve desk/ship-91 --satisfied --evidence REF") {
		t.Fatalf("prompt:\n%s", body)
	}
	// The tool tally_prime answers the same text.
	res := call(t, reviewer, "tally_prime", map[string]any{})
	tool := text(res)
	if res.IsError || res.StructuredContent != nil {
		t.Fatalf("tally_prime: %v %s", res.IsError, tool)
	}
	if tool != body {
		t.Fatalf("tally_prime:\n%s\nresume_seat:\n%s", tool, body)
	}
}
