package mcp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tally/mcp"
)

// Malformed arguments are refused by the schema before anything runs, as
// tool errors naming the member, and append nothing.
func TestBadInput(t *testing.T) {
	f := newFixture(t)
	reviewer := f.client("reviewer")
	ok(t, reviewer, "tally_promise/declare", declareShip)
	size := f.logSize("default", "default")
	for _, c := range []struct {
		tool string
		args any
		says string
	}{
		{"tally_promise/declare", map[string]any{"promise": "x", "to": "author", "until": 5}, "until: must be a string"},
		{"tally_promise/declare", map[string]any{"promise": "x", "to": []string{"a"}, "until": "2h"}, "to: must be a string"},
		{"tally_promise/declare", map[string]any{"promise": "x", "until": "2h"}, "to: required"},
		{"tally_promise/declare", map[string]any{}, "promise: required"},
		{"tally_promise/declare", map[string]any{"promise": "x", "to": "a", "until": "2h", "bogus": 1}, "bogus: is not a field"},
		{"tally_promise/declare", map[string]any{"promise": "x", "to": "a", "until": "2h", "meta": "not an object"}, "meta: must be a JSON object"},
		{"tally_promise/declare", map[string]any{"promise": "x", "to": "a", "until": "2h", "session": 7}, "session: must be a string"},
		{"tally_promise/declare", map[string]any{"promise": "x", "to": "a", "until": "2h", "session": "../etc"}, "session: must be"},
		{"tally_promise/declare", map[string]any{"promise": "x", "to": "a", "until": "2h", "request_id": strings.Repeat("k", 257)}, "request_id: at most 256 bytes"},
		{"tally_promise/declare", map[string]any{"promise": strings.Repeat("x", 1<<20), "to": "a", "until": "2h"}, "arguments: at most 1048576 bytes"},
		{"tally_promise/resolve", map[string]any{"id": "desk/ship-91", "resolution": "satisfied", "evidence": "one"}, "evidence: must be an array"},
		{"tally_promise/amend", map[string]any{"until": "2h"}, "id: required"},
		{"tally_promise_read/show", map[string]any{"id": "desk/ship-91", "now": "soon"}, "now: "},
		{"tally_promise_read/list", map[string]any{"now": 3}, "now: must be a string"},
		{"tally_promise_read/list", []string{"not", "an", "object"}, "arguments: must be one JSON object"},
	} {
		f.wantRefused(t, reviewer, c.tool, c.args, "invalid", c.says)
	}
	// A member given twice is refused by the strict decoder, which the
	// schema (reading the last) cannot see.
	raw := json.RawMessage(`{"action":"declare","promise":"x","to":"a","to":"b","until":"2h"}`)
	if msg, code := refusal(t, reviewer, "tally_promise/declare", raw); code != "invalid" || msg != "to: appears twice" {
		t.Errorf("twice: %q %s", msg, code)
	}
	// An unknown tool is the protocol's error, not a tool's.
	if _, err := reviewer.CallTool(context.Background(), &sdk.CallToolParams{Name: "tally_promise_forge", Arguments: map[string]any{}}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("unknown tool: %v", err)
	}
	if got := f.logSize("default", "default"); got != size {
		t.Fatal("the log grew")
	}
}

// A caller bound to a tenant sees nothing of another's: naming a session
// of another tenant is NotFound, whatever is there.
func TestForeignTenant(t *testing.T) {
	f := newFixture(t)
	ok(t, f.client("reviewer"), "tally_promise/declare", map[string]any{"id": "p1", "promise": "x", "to": "author", "until": "2h", "session": "acme/work"})
	other := f.connect(f.server(mcp.Who{Tenant: "globex", Actor: "mallory"}), nil)
	size := f.logSize("acme", "work")
	for _, args := range []map[string]any{
		{"id": "p1", "session": "acme/work"},
		{"id": "p1", "session": "acme/nothing"},
	} {
		if msg, code := refusal(t, other, "tally_promise_read/show", args); code != "not_found" || msg != "session: not found" {
			t.Errorf("%v: %q %s", args, msg, code)
		}
	}
	if msg, code := refusal(t, other, "tally_promise/amend", map[string]any{"id": "p1", "until": "9h", "session": "acme/work"}); code != "not_found" || msg != "session: not found" {
		t.Errorf("amend: %q %s", msg, code)
	}
	// Its own tenant's session of the same name is its own.
	if _, code := refusal(t, other, "tally_promise_read/show", map[string]any{"id": "p1", "session": "work"}); code != "NoSuchSession" {
		t.Errorf("own session: %s", code)
	}
	if f.logSize("acme", "work") != size || f.logSize("globex", "work") != 0 {
		t.Fatal("a log changed")
	}
}

// Stdin closed in the middle of a call's line: the server stops, nothing
// is appended and nothing hangs.
func TestStdinClosedMidCall(t *testing.T) {
	f := newFixture(t)
	s := f.server(mcp.Who{Actor: "reviewer"})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.Run(context.Background(), &sdk.IOTransport{Reader: inR, Writer: outW}) }()
	out := bufio.NewScanner(outR)
	send := func(line string) {
		if _, err := io.WriteString(inW, line); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}` + "\n")
	if !out.Scan() || !strings.Contains(out.Text(), `"id":1`) {
		t.Fatalf("initialize: %q", out.Text())
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	go io.Copy(io.Discard, outR)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tally_promise","arguments":{"action":"declare","promise":"half`)
	inW.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop when its input closed")
	}
	if f.logSize("default", "default") != 0 {
		t.Fatal("a half-read call appended")
	}
}
