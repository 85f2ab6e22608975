package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2EUnknownVerbIsUsageError: a typo of a verb under a command group
// exits 2 naming the closest verb, prints nothing on stdout and appends nothing.
func TestE2EUnknownVerbIsUsageError(t *testing.T) {
	l := newLedger(t)
	l.must("promise", "one", "--as", "a", "--to", "b", "--until", "2h")
	before := l.logBytes()
	for _, c := range []struct{ args, want []string }{
		{[]string{"check", "reprot"}, []string{`unknown command "reprot" for "tally check"`, `did you mean "report"?`}},
		{[]string{"claim", "craete", "C1"}, []string{`unknown command "craete" for "tally claim"`, `did you mean "create"?`}},
		{[]string{"expect", "rasie"}, []string{`unknown command "rasie" for "tally expect"`, `"raise"`}},
	} {
		r := l.run(c.args...)
		if r.code != 2 || r.out != "" {
			t.Fatalf("want exit 2 and no stdout: %v", r)
		}
		for _, w := range c.want {
			if !strings.Contains(r.err, w) {
				t.Fatalf("stderr lacks %q: %v", w, r)
			}
		}
		if r := l.run(append(c.args, "--json")...); r.code != 2 || decode(t, r.err)["code"] != "usage" {
			t.Fatalf("--json: %v", r)
		}
	}
	if !bytes.Equal(l.logBytes(), before) {
		t.Fatal("a refused verb changed the log")
	}
}

// TestE2EVerifyEverySession: verify without --session checks every session
// of the ledger, one line each, and exits 0 only when all are whole; with
// --session it checks that one. (It used to check default/default alone and
// call a ledger whose sessions are elsewhere "ok: 0 line(s)".)
func TestE2EVerifyEverySession(t *testing.T) {
	l := newLedger(t)
	for _, s := range []string{"acme/main", "acme/side", "zed/one"} {
		l.must("--session", s, "promise", "p in "+s, "--as", "a", "--to", "b", "--until", "2h")
	}
	l.must("--session", "acme/main", "promise", "second", "--as", "a", "--to", "b", "--until", "2h")
	r := l.run("verify")
	want := "acme/main: ok: 2 line(s), chain whole\nacme/side: ok: 1 line(s), chain whole\nzed/one: ok: 1 line(s), chain whole\n"
	if r.code != 0 || r.out != want {
		t.Fatalf("verify of every session: want\n%s%v", want, r)
	}
	if r := l.run("verify", "--json"); r.code != 0 || decode(t, r.out)["whole"] != true || len(decode(t, r.out)["sessions"].([]any)) != 3 {
		t.Fatalf("verify --json: %v", r)
	}
	if r := l.run("--session", "zed/one", "verify"); r.code != 0 || r.out != "ok: 1 line(s), chain whole\n" {
		t.Fatalf("verify --session: %v", r)
	}
	// Damage one session: its line names the bad line, the others stay ok,
	// and the exit is 1.
	p := filepath.Join(l.dir, "sessions", "acme", "side", "log.jsonl")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[bytes.Index(b, []byte("p in"))] ^= 1
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r = l.run("verify")
	if r.code != 1 || !strings.Contains(r.out, "acme/main: ok: 2 line(s)") || !strings.Contains(r.out, "zed/one: ok: 1 line(s)") ||
		!strings.Contains(r.out, "acme/side: sessions/acme/side/log.jsonl: line 1: ") || !strings.Contains(r.err, "1 of 3 session(s) not whole") {
		t.Fatalf("verify with one damaged session: %v", r)
	}
	if r := l.run("verify", "--json"); r.code != 1 || decode(t, r.out)["whole"] != false {
		t.Fatalf("verify --json with one damaged session: %v", r)
	}
	if r := l.run("--session", "zed/one", "verify"); r.code != 0 {
		t.Fatalf("verify --session of a whole session: %v", r)
	}
}

// TestRemoteVerifyEverySession: over TALLY_URL, verify without --session
// checks every session of the token's tenant through the server and prints
// what the local verb prints on the server's directory.
func TestRemoteVerifyEverySession(t *testing.T) {
	srv := startServer(t, "reviewer")
	for _, s := range []string{"default/main", "default/side"} {
		if r := srv.as(t, "reviewer", "--session", s, "promise", "p in "+s, "--to", "b", "--until", "2h"); r.code != 0 {
			t.Fatal(r)
		}
	}
	for _, args := range [][]string{{"verify"}, {"verify", "--json"}} {
		r, l := srv.as(t, "reviewer", args...), srv.local(t, args...)
		same(t, strings.Join(args, " "), r, l)
		if r.code != 0 || !strings.Contains(r.out, "default/side") {
			t.Fatalf("%q: %v", args, r)
		}
	}
	if r := srv.as(t, "reviewer", "verify"); r.out != "default/main: ok: 1 line(s), chain whole\ndefault/side: ok: 1 line(s), chain whole\n" {
		t.Fatalf("remote verify: %v", r)
	}
}

// TestE2ELapsesSinceCountsBack: `lapses --since 1h` is the last hour, from
// the clock or from --now (it used to mean an hour ahead, and was always
// empty); the expectation read verbs take --now.
func TestE2ELapsesSinceCountsBack(t *testing.T) {
	l := newLedger(t)
	l.mustAs(agent, "expect", "raise", "--id", "e1", "--kind", "k", "--subject", "s:1", "--fact-key", "f:1", "--due", "2026-09-11T00:00:00Z", "--basis", "observed")
	l.watchOnce("2026-09-11T03:00:00Z")
	// A second expectation lapses by the real clock: due 3h ago, swept now.
	l.mustAs(agent, "expect", "raise", "--id", "e2", "--kind", "k", "--subject", "s:2", "--fact-key", "f:2", "--due", time.Now().Add(-3*time.Hour).UTC().Format(time.RFC3339), "--basis", "observed")
	if r := l.run("watch", "--once"); r.code != 0 {
		t.Fatal(r)
	}
	ids := func(r result) []string {
		t.Helper()
		if r.code != 0 {
			t.Fatal(r)
		}
		var out []string
		for _, x := range decode(t, r.out)["lapses"].([]any) {
			out = append(out, x.(map[string]any)["expectationId"].(string))
		}
		return out
	}
	if got := ids(l.run("lapses", "--since", "1h", "--json")); len(got) != 1 || got[0] != "e2" {
		t.Fatalf("lapses --since 1h by the clock: %v", got)
	}
	if got := ids(l.run("lapses", "--since", "1h", "--now", "2026-09-11T03:30:00Z", "--json")); len(got) < 1 || got[0] != "e1" {
		t.Fatalf("lapses --since 1h --now: %v", got)
	}
	if got := ids(l.run("lapses", "--since", "PT20M", "--now", "2026-09-11T03:30:00Z", "--json", "--expectation", "e1")); len(got) != 0 {
		t.Fatalf("lapses --since 20m before --now, noticed 30m before: %v", got)
	}
	if r := l.run("lapses", "--since", "yesterday"); r.code != 2 || !strings.Contains(r.err, "since") {
		t.Fatalf("bad --since: %v", r)
	}
	for _, args := range [][]string{{"expect", "show", "e1"}, {"expect", "ls"}, {"lapses"}} {
		if r := l.run(append(args, "--now", "2026-09-11T03:30:00Z")...); r.code != 0 {
			t.Fatalf("%q --now: %v", args, r)
		}
		if r := l.run(append(args, "--now", "soon")...); r.code != 2 || !strings.Contains(r.err, "now") {
			t.Fatalf("%q --now soon: %v", args, r)
		}
	}
}

// TestE2ESupersedeAndLineageSetting: `expect supersede --due` gives the new
// expectation that due even when the old one was anchored; an inherited
// horizon that has passed is refused naming --horizon, appending nothing;
// the lineage bound is the ledger's lineage_max setting.
func TestE2ESupersedeAndLineageSetting(t *testing.T) {
	l := newLedger(t)
	marker := filepath.Join(l.dir, "tally.json")
	if err := os.WriteFile(marker, []byte(`{"format":1,"lineage_max":2}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.mustAs(agent, "expect", "raise", "--id", "dep", "--kind", "k", "--subject", "s:1", "--fact-key", "dep:1", "--due", "1h", "--basis", "observed")
	l.mustAs(agent, "expect", "raise", "--id", "arr", "--kind", "k", "--subject", "s:1", "--fact-key", "arr:1", "--due", "3h", "--basis", "observed",
		"--anchor", "dep:1h45m", "--horizon", "2030-01-01T00:00:00Z")
	l.mustAs("feed", "fact", "dep:1", "--subject", "s:1") // re-anchors arr to now + 1h45m
	l.mustAs(agent, "expect", "supersede", "arr", "--id", "arr-2", "--due", "2029-01-01T00:00:00Z")
	v := l.expectation("arr-2")
	if v["currentDue"] != "2029-01-01T00:00:00Z" || v["anchor"] != nil || v["horizon"] != "2030-01-01T00:00:00Z" {
		t.Fatalf("supersede --due on an anchored expectation: %v", v)
	}
	// The bound (2 here) is reached: an agent is refused, exit 1, nothing appended.
	before := l.logBytes()
	r := l.as(agent, "expect", "supersede", "arr-2", "--id", "arr-3", "--due", "2029-06-01T00:00:00Z")
	if r.code != 1 || !strings.Contains(r.err, "lineage bound 2") || !bytes.Equal(before, l.logBytes()) {
		t.Fatalf("past lineage_max 2: %v", r)
	}
	l.mustAs("ops", "expect", "supersede", "arr-2", "--id", "arr-3", "--due", "2029-06-01T00:00:00Z", "--human")

	// An inherited horizon that has passed: refused, naming --horizon.
	l.mustAs(agent, "expect", "raise", "--id", "old", "--kind", "k", "--subject", "s:2", "--fact-key", "old:1", "--due", "2026-01-01T00:00:00Z",
		"--horizon", "2026-01-02T00:00:00Z", "--basis", "observed")
	before = l.logBytes()
	r = l.as(agent, "expect", "supersede", "old", "--id", "old-2", "--due", "2d")
	if r.code == 0 || !strings.Contains(r.err, "horizon") || !strings.Contains(r.err, "--horizon") || !bytes.Equal(before, l.logBytes()) {
		t.Fatalf("inherited passed horizon: %v", r)
	}
	l.mustAs(agent, "expect", "supersede", "old", "--id", "old-2", "--due", "2d", "--horizon", "3d")

	// A setting of the wrong type is refused by name.
	if err := os.WriteFile(marker, []byte(`{"format":1,"lineage_max":"two"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := l.run("expect", "ls"); r.code != 1 || !strings.Contains(r.err, "lineage_max") {
		t.Fatalf("bad setting: %v", r)
	}
}

// TestRemoteLineageMaxFlag: `tally serve --lineage-max` is the bound the
// server's expect core applies.
func TestRemoteLineageMaxFlag(t *testing.T) {
	srv := startServerWith(t, []string{"--lineage-max", "1"}, "booking")
	if r := srv.as(t, "booking", "expect", "raise", "--id", "e1", "--kind", "k", "--subject", "s:1", "--fact-key", "f:1", "--due", "1h", "--basis", "observed"); r.code != 0 {
		t.Fatal(r)
	}
	r := srv.as(t, "booking", "expect", "supersede", "e1", "--id", "e2", "--due", "2h")
	if r.code != 1 || !strings.Contains(r.err, "lineage bound 1") {
		t.Fatalf("past --lineage-max 1: %v", r)
	}
	if r := run(t, runOpts{}, "serve", "--dir", srv.dir, "--lineage-max", "0"); r.code != 2 || !strings.Contains(r.err, "lineage-max") {
		t.Fatalf("--lineage-max 0: %v", r)
	}
}
