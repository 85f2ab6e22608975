package mcp_test

import (
	"strings"
	"testing"
)

// The ledger's tools: verify says the log is whole; export answers the log
// as text in each format, and refuses one it does not know.
func TestLedgerVerifyExport(t *testing.T) {
	f := newFixture(t)
	reviewer := f.client("reviewer")
	ok(t, reviewer, "tally_promise/declare", declareShip)
	v := ok(t, reviewer, "tally_ledger/verify", map[string]any{})
	if v["whole"] != true {
		t.Fatalf("verify: %v", v)
	}
	for format, want := range map[string]string{"": `"type":"promise","id":"desk/ship-91"`, "jsonl": `"seq":1`, "pinki": `"type":"promise"`, "json": `"desk/ship-91"`} {
		args := map[string]any{"format": format}
		if format == "" {
			args = map[string]any{} // jsonl
		}
		res := call(t, reviewer, "tally_ledger/export", args)
		if res.IsError || res.StructuredContent != nil || !strings.Contains(text(res), want) {
			t.Errorf("export %q: %v %s", format, res.IsError, text(res))
		}
	}
	size := f.logSize("default", "default")
	if msg, code := refusal(t, reviewer, "tally_ledger/export", map[string]any{"format": "csv"}); code != "invalid" || !strings.Contains(msg, "format") {
		t.Errorf("export csv: %q %s", msg, code)
	}
	// A session with no log verifies as empty, and is not made by it.
	if e := ok(t, reviewer, "tally_ledger/verify", map[string]any{"session": "nothing-here"}); str(e, "lines") != "0" || f.logSize("default", "nothing-here") != 0 {
		t.Errorf("verify of no session: %v", e)
	}
	if f.logSize("default", "default") != size {
		t.Fatal("the log grew")
	}
}
