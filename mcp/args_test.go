package mcp_test

import (
	"os"
	"strings"
	"testing"

	"tally/store"
)

// Every deadline-like member takes a duration from now as until does:
// a promise's until, a claim's deadline, an expectation's dueAt and
// horizon; a lapse's since counts back, and a grace is 1h as the CLI
// takes it. A promise's and a claim's count
// from the ledger's clock (t0 here), an expectation's from this server's
// (t0+4d here), as a CLI client's would.
func TestDurationsWhereTimesAre(t *testing.T) {
	f := newFixture(t)
	reviewer, maintainer := f.client("reviewer"), f.client("maintainer")
	p := ok(t, reviewer, "tally_promise/declare", map[string]any{"id": "p30", "promise": "x", "to": "author", "until": "30m"})
	if got := str(p, "promise", "until"); got != "2026-08-28T20:44:03Z" {
		t.Errorf("until 30m: %s", got)
	}
	if a := ok(t, reviewer, "tally_promise/amend", map[string]any{"id": "p30", "until": "2h"}); str(a, "promise", "until") != "2026-08-28T22:14:03Z" {
		t.Errorf("amend until 2h: %v", a)
	}
	c := ok(t, maintainer, "tally_claim/create", map[string]any{"claim": "C1", "respondent": "parser", "work": "w", "deadline": "2h", "no_checks": true})
	if got := str(c, "claim", "deadline"); got != "2026-08-28T22:14:03Z" {
		t.Errorf("deadline 2h: %s", got)
	}
	x := raiseShip("exp_30")
	x["dueAt"], x["horizon"], x["grace"] = "30m", "2h", "1h"
	r := ok(t, reviewer, "tally_expect/raise", x)
	if str(r, "expectation", "currentDue") != "2026-09-01T20:44:03Z" || str(r, "expectation", "horizon") != "2026-09-01T22:14:03Z" || str(r, "expectation", "grace") != "PT1H" {
		t.Errorf("dueAt 30m, horizon 2h, grace 1h: %v", r)
	}
	// A retry under the same request id asks the same, and is the
	// recorded answer.
	x = raiseShip("exp_retry")
	x["dueAt"], x["request_id"] = "1h", "raise-1h"
	first := ok(t, reviewer, "tally_expect/raise", x)
	size := f.logSize("default", "default")
	if again := ok(t, reviewer, "tally_expect/raise", x); str(again, "seq") != str(first, "seq") || f.logSize("default", "default") != size {
		t.Errorf("retry: %v, first %v", again, first)
	}
	for _, bad := range []struct{ member, value string }{{"dueAt", "-30m"}, {"dueAt", "soon"}, {"horizon", "0s"}} {
		x := raiseShip("exp_bad")
		x[bad.member] = bad.value
		if msg, code := refusal(t, reviewer, "tally_expect/raise", x); code != "invalid" || !strings.HasPrefix(msg, bad.member+": ") {
			t.Errorf("%s %q: %q %s", bad.member, bad.value, msg, code)
		}
	}
	if f.logSize("default", "default") != size {
		t.Fatal("a refused raise appended")
	}
}

// replyTo is the object it is ({url, extension, push: {url, token,
// authentication: {scheme, credentials}}}), or an agent's URL; what is
// neither is refused naming it, and nothing is recorded.
func TestReplyTo(t *testing.T) {
	f := newFixture(t)
	reviewer := f.client("reviewer")
	x := raiseShip("exp_push")
	x["replyTo"] = map[string]any{"url": "https://agent.example.org/a2a", "extension": "https://tally.example.org/ext/lapses",
		"push": map[string]any{"url": "https://agent.example.org/hook", "token": "tok", "authentication": map[string]any{"scheme": "Bearer", "credentials": "secret"}}}
	ok(t, reviewer, "tally_expect/raise", x)
	y := raiseShip("exp_url")
	y["replyTo"] = "https://agent.example.org/a2a"
	ok(t, reviewer, "tally_expect/raise", y)
	dir, err := store.SessionDir(f.sessions.root, "default", "default")
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(store.LogPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `"replyTo":{"url":"https://agent.example.org/a2a","extension":"https://tally.example.org/ext/lapses","push":{"url":"https://agent.example.org/hook","token":"tok","authentication":{"scheme":"Bearer","credentials":"secret"}}}`) ||
		!strings.Contains(string(log), `"replyTo":{"url":"https://agent.example.org/a2a"}`) {
		t.Fatalf("the log does not hold the replyTo given:\n%s", log)
	}
	size := f.logSize("default", "default")
	for _, c := range []struct {
		replyTo any
		says    string
	}{
		{map[string]any{"url": "https://a.example.org", "bogus": 1}, "bogus: is not a field"},
		{map[string]any{"url": 5}, "replyTo.url: must be a string, not number"},
		{map[string]any{"push": map[string]any{"url": "https://h.example.org", "authentication": map[string]any{"scheme": true}}}, "replyTo.push.authentication.scheme: must be a string, not boolean"},
		{[]int{104, 116}, "replyTo: must be a string or an object, not array"},
	} {
		z := raiseShip("exp_bad")
		z["replyTo"] = c.replyTo
		if msg, code := refusal(t, reviewer, "tally_expect/raise", z); code != "invalid" || !strings.Contains(msg, c.says) {
			t.Errorf("replyTo %v: %q %s", c.replyTo, msg, code)
		}
	}
	if f.logSize("default", "default") != size {
		t.Fatal("a refused raise appended")
	}
}

// The names a model reads: the resolution is resolution (as was the
// document's name, and --as is the CLI's identity); a value outside its
// set, a missing or unknown action and a member an action requires are
// refused naming the argument, and nothing is recorded.
func TestArgumentRefusals(t *testing.T) {
	f := newFixture(t)
	reviewer := f.client("reviewer")
	ok(t, reviewer, "tally_promise/declare", declareShip)
	for _, c := range []struct {
		tool string
		args map[string]any
		says string
	}{
		{"tally_promise/resolve", map[string]any{"id": "desk/ship-91", "as": "satisfied", "evidence": []string{"x"}}, "as: is not a field of this command (evidence, id, meta, reason, resolution)"},
		{"tally_promise/resolve", map[string]any{"id": "desk/ship-91", "evidence": []string{"x"}}, "resolution: required"},
		{"tally_promise/resolve", map[string]any{"id": "desk/ship-91", "resolution": "done"}, `resolution: "done" is not satisfied, cancelled or released`},
		{"tally_promise/assess", map[string]any{"id": "desk/ship-91", "state": "kept"}, `state: "kept" is not violated`},
		{"tally_promise", map[string]any{"id": "desk/ship-91"}, "action: required"},
		{"tally_promise", map[string]any{"id": "desk/ship-91", "action": 3}, "action: must be a string"},
		{"tally_promise/forge", map[string]any{"id": "desk/ship-91"}, "action: must be declare, amend, assess or resolve"},
		{"tally_promise/amend", map[string]any{"id": "desk/ship-91"}, "until: required"},
		{"tally_promise/declare", map[string]any{"promise": "x", "to": "a", "until": "2h", "observer": "me"}, "observer: is not a field of this command"},
		{"tally_claim/create", map[string]any{"claim": "C9", "respondent": "parser", "work": "w", "slots": []map[string]any{{"name": "s", "mode": "sometimes"}}}, `slots[0].mode: "sometimes" is not required or observe`},
		{"tally_claim/create", map[string]any{"claim": "C9", "respondent": "parser"}, "work: required"},
		{"tally_claim/check.report", map[string]any{"claim": "C9", "check": "c", "artifact": "a", "result": "ok"}, `result: "ok" is not pass, fail, incomplete or error`},
		{"tally_claim_read/list", map[string]any{"state": []string{"Done"}}, `state[0]: "Done" is not Generated`},
		{"tally_expect_read/list", map[string]any{"state": "late"}, `state: "late" is not open, satisfied, withdrawn or superseded`},
		{"tally_ledger/export", map[string]any{"format": "csv"}, `format: "csv" is not jsonl, json or pinki`},
	} {
		f.wantRefused(t, reviewer, c.tool, c.args, "invalid", c.says)
	}
}
