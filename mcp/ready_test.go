package mcp_test

import (
	"testing"
)

// tally_ready answers the seat's ready list, the document REST answers:
// a pool claim once posted, with the command that takes it, and not once
// another seat took it.
func TestReadyTool(t *testing.T) {
	f := newFixture(t)
	maintainer, w1, w2 := f.client("maintainer"), f.client("worker-1"), f.client("worker-2")
	ok(t, maintainer, "tally_claim/create", map[string]any{"claim": "C1", "work": "triage the parser bugs", "no_checks": true, "pool": []string{"worker-1", "worker-2"}, "priority": 1})
	empty := ok(t, w1, "tally_ready", map[string]any{})
	if items, _ := empty["items"].([]any); len(items) != 0 || empty["seat"] != "worker-1" {
		t.Fatalf("before the post: %v", empty)
	}
	ok(t, maintainer, "tally_claim/post", map[string]any{"claim": "C1"})
	got := ok(t, w1, "tally_ready", map[string]any{})
	items, _ := got["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("ready: %v", got)
	}
	it := items[0].(map[string]any)
	if it["id"] != "C1" || it["priority"] != float64(1) || it["command"] != "tally receipt acquire C1 --as worker-1" {
		t.Fatalf("item %v", it)
	}
	ok(t, w2, "tally_claim/receipt.acquire", map[string]any{"claim": "C1"})
	if msg, code := refusal(t, w1, "tally_claim/receipt.acquire", map[string]any{"claim": "C1"}); code != "conflict" || msg != "claim: receipt already acquired by worker-2 (generation 1)" {
		t.Fatalf("the second seat: %q %s", msg, code)
	}
	if items, _ := ok(t, w1, "tally_ready", map[string]any{"seat": "worker-1"})["items"].([]any); len(items) != 0 {
		t.Fatalf("after worker-2 took it: %v", items)
	}
}
