package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestE2ERequestIDEveryWriteVerb: --request-id on a local ledger means what
// Idempotency-Key means on the server, for every write verb of the three
// families: an exact retry prints the first answer byte for byte (in either
// output mode) and appends nothing; the same id with another command exits
// 1 with IdempotencyConflict and appends nothing. (The same id used to
// append the write again each time.)
func TestE2ERequestIDEveryWriteVerb(t *testing.T) {
	l := newLedger(t)
	work := t.TempDir()
	for name, body := range map[string]string{"patch.txt": "fixed\n", "review.md": "looks right\n"} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const past = "2026-01-01T00:00:00Z"
	runs := filepath.Join(work, "runs") // a line per run of the validator
	steps := []struct {
		name      string
		args, alt []string // alt: the same request id with another command
		stdin     string
	}{
		{name: "promise", args: []string{"promise", "ship it", "--as", "a", "--to", "b", "--until", "2h", "--id", "p1"}, alt: []string{"promise", "ship it", "--as", "a", "--to", "b", "--until", "3h", "--id", "p1"}},
		{name: "promise stdin", args: []string{"promise", "--as", "a"}, stdin: `{"promise":"p","to":"b","until":"2h","id":"p2"}`, alt: []string{"promise", "--as", "a"}},
		{name: "amend", args: []string{"amend", "p1", "--until", "4h", "--as", "a"}, alt: []string{"amend", "p1", "--until", "5h", "--as", "a"}},
		{name: "resolve", args: []string{"resolve", "p1", "--satisfied", "--evidence", "https://e/1", "--as", "a"}, alt: []string{"resolve", "p1", "--satisfied", "--evidence", "https://e/2", "--as", "a"}},
		{name: "assess", args: []string{"assess", "p2", "--violated", "--observer", "c", "--as", "c"}, alt: []string{"assess", "p2", "--violated", "--observer", "c", "--as", "c", "--note", "n"}},

		{name: "claim create", args: []string{"claim", "create", "C1", "--respondent", "p", "--work", "w", "--check", "out/behavior:validator=command@1,evaluator=ci",
			"--check", "out/review:validator=review@1,evaluator=m,phases=quality", "--as", "m"}, alt: []string{"claim", "create", "C1", "--respondent", "p", "--work", "w2", "--as", "m"}},
		{name: "claim post", args: []string{"claim", "post", "C1", "--as", "m"}, alt: []string{"claim", "post", "C9", "--as", "m"}},
		{name: "receipt acquire", args: []string{"receipt", "acquire", "C1", "--as", "p"}, alt: []string{"receipt", "acquire", "C9", "--as", "p"}},
		{name: "progress", args: []string{"progress", "C1", "--generation", "1", "--note", "half", "--as", "p"}, alt: []string{"progress", "C1", "--generation", "1", "--note", "more", "--as", "p"}},
		{name: "artifact put", args: []string{"artifact", "put", filepath.Join(work, "patch.txt"), "--claim", "C1", "--slot", "out", "--generation", "1", "--id", "pa", "--as", "p"},
			alt: []string{"artifact", "put", filepath.Join(work, "review.md"), "--claim", "C1", "--slot", "out", "--generation", "1", "--id", "pa", "--as", "p"}},
		{name: "testament close", args: []string{"testament", "close", "C1", "--id", "T1", "--generation", "1", "--outcome", "complete", "--summary", "s", "--confidence", "0.9", "--bind", "out=pa", "--as", "p"},
			alt: []string{"testament", "close", "C1", "--id", "T1", "--generation", "1", "--outcome", "complete", "--summary", "other", "--bind", "out=pa", "--as", "p"}},
		{name: "testament post", args: []string{"testament", "post", "C1", "T1", "--as", "p"}, alt: []string{"testament", "post", "C1", "T2", "--as", "p"}},
		{name: "testament receive", args: []string{"testament", "receive", "C1", "T1", "--as", "m"}, alt: []string{"testament", "receive", "C1", "T2", "--as", "m"}},
		{name: "artifact receive", args: []string{"artifact", "receive", "C1", "pa", "--as", "m"}, alt: []string{"artifact", "receive", "C1", "pb", "--as", "m"}},
		{name: "check run", args: []string{"check", "run", "behavior", "--claim", "C1", "--artifact", "pa", "--command", "echo run >> " + runs + " && grep -q fixed patch.txt", "--as", "ci"},
			alt: []string{"check", "run", "behavior", "--claim", "C1", "--artifact", "pa", "--command", "true", "--as", "ci"}},
		{name: "check begin", args: []string{"check", "begin", "review", "--claim", "C1", "--artifact", "pa", "--as", "m"}, alt: []string{"check", "begin", "review", "--claim", "C1", "--artifact", "pb", "--as", "m"}},
		{name: "check report", args: []string{"check", "report", "review", "--claim", "C1", "--artifact", "pa", "--result", "pass", "--evidence-file", filepath.Join(work, "review.md"), "--as", "m"},
			alt: []string{"check", "report", "review", "--claim", "C1", "--artifact", "pa", "--result", "fail", "--evidence-file", filepath.Join(work, "review.md"), "--as", "m"}},
		{name: "claim create C2", args: []string{"claim", "create", "C2", "--respondent", "p", "--work", "w", "--check", "out/behavior:validator=command@1,evaluator=ci", "--as", "m"},
			alt: []string{"claim", "create", "C2", "--respondent", "q", "--work", "w", "--as", "m"}},
		{name: "claim post C2", args: []string{"claim", "post", "C2", "--as", "m"}, alt: []string{"claim", "post", "C2", "--as", "m", "--failed", "--reason", "r"}},
		{name: "receipt acquire C2", args: []string{"receipt", "acquire", "C2", "--as", "p"}, alt: []string{"receipt", "acquire", "C2", "--as", "p", "--decline", "--reason", "r"}},
		{name: "receipt adopt", args: []string{"receipt", "adopt", "C2", "--holder", "p2", "--as", "m"}, alt: []string{"receipt", "adopt", "C2", "--holder", "p3", "--as", "m"}},
		{name: "claim revoke", args: []string{"claim", "revoke", "C2", "--reason", "slow", "--as", "m"}, alt: []string{"claim", "revoke", "C2", "--reason", "other", "--as", "m"}},
		{name: "claim create C3", args: []string{"claim", "create", "C3", "--respondent", "p", "--work", "w", "--check", "out/behavior:validator=command@1,evaluator=ci", "--as", "m"},
			alt: []string{"claim", "create", "C3", "--respondent", "q", "--work", "w", "--as", "m"}},
		{name: "claim cancel", args: []string{"claim", "cancel", "C3", "--reason", "not needed", "--as", "m"}, alt: []string{"claim", "cancel", "C3", "--reason", "other", "--as", "m"}},
		{name: "claim create C4", args: []string{"claim", "create", "C4", "--respondent", "p", "--work", "w", "--check", "out/behavior:validator=command@1,evaluator=ci", "--as", "m"},
			alt: []string{"claim", "create", "C4", "--respondent", "q", "--work", "w", "--as", "m"}},
		{name: "claim create C5", args: []string{"claim", "create", "C5", "--predecessor", "C4", "--respondent", "p", "--work", "w", "--check", "out/behavior:validator=command@1,evaluator=ci", "--as", "m"},
			alt: []string{"claim", "create", "C5", "--predecessor", "C4", "--respondent", "q", "--work", "w", "--as", "m"}},
		{name: "claim supersede", args: []string{"claim", "supersede", "C4", "--successor", "C5", "--as", "m"}, alt: []string{"claim", "supersede", "C4", "--successor", "C5", "--reason", "r", "--as", "m"}},

		{name: "expect raise", args: []string{"expect", "raise", "--id", "e1", "--kind", "k", "--subject", "s:1", "--fact-key", "f:1", "--due", "2h", "--basis", "observed", "--task", "t1", "--as", "agent"},
			alt: []string{"expect", "raise", "--id", "e1", "--kind", "k", "--subject", "s:1", "--fact-key", "f:1", "--due", "3h", "--basis", "observed", "--as", "agent"}},
		{name: "expect supersede", args: []string{"expect", "supersede", "e1", "--id", "e2", "--due", "5h", "--as", "agent"}, alt: []string{"expect", "supersede", "e1", "--id", "e2", "--due", "6h", "--as", "agent"}},
		{name: "expect raise e3", args: []string{"expect", "raise", "--id", "e3", "--kind", "k", "--subject", "s:2", "--fact-key", "f:3", "--due", past, "--basis", "observed", "--as", "agent"},
			alt: []string{"expect", "raise", "--id", "e3", "--kind", "k", "--subject", "s:2", "--fact-key", "f:4", "--due", past, "--basis", "observed", "--as", "agent"}},
		{name: "fact", args: []string{"fact", "f:3", "--subject", "s:2", "--as", "feed"}, alt: []string{"fact", "f:3", "--subject", "s:9", "--as", "feed"}},
		{name: "expect raise e4", args: []string{"expect", "raise", "--id", "e4", "--kind", "k", "--subject", "s:3", "--fact-key", "f:5", "--due", "2h", "--basis", "observed", "--as", "agent"},
			alt: []string{"expect", "raise", "--id", "e4", "--kind", "k", "--subject", "s:3", "--fact-key", "f:6", "--due", "2h", "--basis", "observed", "--as", "agent"}},
		{name: "expect withdraw", args: []string{"expect", "withdraw", "e4", "--reason", "r", "--as", "agent"}, alt: []string{"expect", "withdraw", "e4", "--reason", "other", "--as", "agent"}},
		{name: "task outcome", args: []string{"task", "outcome", "t1", "--cancelled", "--as", "agent"}, alt: []string{"task", "outcome", "t1", "--failed", "--as", "agent"}},
	}
	for i, s := range steps {
		rid := []string{"--request-id", "req-" + strings.ReplaceAll(s.name, " ", "-")}
		o := runOpts{stdin: s.stdin, cwd: work}
		first := l.runWith(o, append(s.args, rid...)...)
		if first.code != 0 {
			t.Fatalf("step %d %s: %v", i, s.name, first)
		}
		log := l.logBytes()
		for _, retry := range [][]string{append(s.args, rid...), append(slices.Clone(rid), s.args...)} {
			if r := l.runWith(o, retry...); r.code != 0 || r.out != first.out || r.err != first.err {
				t.Fatalf("%s: a retry printed another answer\nfirst: %v\nretry: %v", s.name, first, r)
			}
		}
		if r := l.runWith(o, append(s.args, append(rid, "--json")...)...); r.code != 0 || decode(t, r.out)["schema_version"] == nil {
			t.Fatalf("%s: a retry with --json: %v", s.name, r)
		}
		if !bytes.Equal(log, l.logBytes()) {
			t.Fatalf("%s: a retry appended", s.name)
		}
		alt := runOpts{stdin: strings.Replace(s.stdin, `"p"`, `"q"`, 1), cwd: work}
		r := l.runWith(alt, append(s.alt, append(rid, "--json")...)...)
		if r.code != 1 || decode(t, r.err)["code"] != "IdempotencyConflict" || !bytes.Equal(log, l.logBytes()) {
			t.Fatalf("%s: the id with another command: want exit 1 IdempotencyConflict and nothing appended: %v", s.name, r)
		}
	}
	// A retried check run printed its answer without running the validator again.
	if b, err := os.ReadFile(runs); err != nil || string(b) != "run\n" {
		t.Fatalf("the validator ran %q times", b)
	}
	// A retry's answer is the first one, not the state now: p1 is
	// satisfied, its declaration's retry still prints the first answer.
	if r := l.run("promise", "ship it", "--as", "a", "--to", "b", "--until", "2h", "--id", "p1", "--request-id", "req-promise", "--json"); !strings.Contains(r.out, `"state":"owed"`) {
		t.Fatalf("replayed answer: %v", r)
	}
}

// TestE2ERequestHistoryExpires: an id older than the ledger's
// request_history is refused with RequestHistoryExpired and never run
// again; over TALLY_URL `serve --request-history` is that window and the
// server answers 410.
func TestE2ERequestHistoryExpires(t *testing.T) {
	l := newLedger(t)
	if err := os.WriteFile(filepath.Join(l.dir, "tally.json"), []byte(`{"format":1,"request_history":"50ms"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"promise", "x", "--as", "a", "--to", "b", "--until", "2h", "--request-id", "old"}
	l.must(args...)
	log := l.logBytes()
	// Request records keep the second, so the id expires within about one:
	// until then a retry is a replay, which appends nothing.
	r := l.run(append(args, "--json")...)
	for deadline := time.Now().Add(5 * time.Second); r.code == 0 && time.Now().Before(deadline); r = l.run(append(args, "--json")...) {
		if !bytes.Equal(log, l.logBytes()) {
			t.Fatalf("a retry before the id expired appended: %v", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r.code != 1 || decode(t, r.err)["code"] != "RequestHistoryExpired" || !bytes.Equal(log, l.logBytes()) {
		t.Fatalf("an expired request id: %v", r)
	}
	if r := l.run(args...); r.code != 1 || !strings.Contains(r.err, "older than the retained request history") {
		t.Fatalf("an expired request id, text: %v", r)
	}

	srv := startServerWith(t, []string{"--request-history", "50ms"}, "reviewer")
	body := `{"promise":"x","to":"b","until":"2h"}`
	post := func() int {
		req, _ := http.NewRequest("POST", srv.url+"/v1/tenants/default/sessions/main/promises", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+srv.tokens["reviewer"])
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := post(); c != 201 && c != 200 {
		t.Fatalf("first post: %d", c)
	}
	if r := srv.as(t, "reviewer", "--session", "default/other", "promise", "y", "--to", "b", "--until", "2h", "--request-id", "k2"); r.code != 0 {
		t.Fatal(r)
	}
	c := post()
	for deadline := time.Now().Add(5 * time.Second); (c == http.StatusOK || c == http.StatusCreated) && time.Now().Before(deadline); c = post() {
		time.Sleep(10 * time.Millisecond) // a replay until the id expires
	}
	if c != http.StatusGone {
		t.Fatalf("a retry past --request-history: %d, want 410", c)
	}
	r = srv.as(t, "reviewer", "--session", "default/other", "--json", "promise", "y", "--to", "b", "--until", "2h", "--request-id", "k2")
	for deadline := time.Now().Add(5 * time.Second); r.code == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // recorded after k1, it may expire a second later
		r = srv.as(t, "reviewer", "--session", "default/other", "--json", "promise", "y", "--to", "b", "--until", "2h", "--request-id", "k2")
	}
	if r.code != 1 || decode(t, r.err)["code"] != "RequestHistoryExpired" {
		t.Fatalf("remote retry past --request-history: %v", r)
	}
}
