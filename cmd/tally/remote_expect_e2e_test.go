package main

// The expectation verbs as a client of the real `tally serve` on 127.0.0.1:
// the shipment flow run with TALLY_URL and against a separate local ledger
// (same output, same exit codes), reads through the server compared byte for
// byte with local reads of the server's own directory, the person role
// taken from the token, and lapses committed by the timekeeper token.

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"tally/instant"
)

// asIn runs the CLI against the server with who's token and stdin.
func (s *server) asIn(t *testing.T, who, stdin string, args ...string) result {
	t.Helper()
	return run(t, runOpts{stdin: stdin, env: []string{"TALLY_URL=" + s.url, "TALLY_TOKEN=" + s.tokens[who]}}, args...)
}

// post sends one JSON body to a session path of the server with who's token
// and returns the status and body.
func (s *server) post(t *testing.T, who, path, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/tenants/default/sessions/default"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.tokens[who])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// clockStamps replaces the times stamped by a clock during the test (within
// ten minutes of start) so that two ledgers' outputs can be compared.
func clockStamps(start time.Time) func(string) string {
	stamp := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	return func(s string) string {
		return stamp.ReplaceAllStringFunc(s, func(ts string) string {
			t, err := time.Parse(time.RFC3339Nano, ts)
			if err == nil && t.Sub(start).Abs() < 10*time.Minute {
				return "TS"
			}
			return ts
		})
	}
}

func TestRemoteExpectMatchesLocal(t *testing.T) {
	srv := startServer(t, "booking", "carrier-feed", "ops-lead=person")
	loc := newLedger(t)
	start := time.Now().UTC()
	norm := clockStamps(start)
	// Due times far ahead, so the server's built-in timekeeper records no
	// lapse while the test runs; the departure is observed an hour ago.
	factAt := instant.Format(start.Add(-time.Hour).Truncate(time.Second))
	const sub = "shipment:PA-2030-0901"
	doc := `{"expectationId":"exp-doc","kind":"shipment.customs","subject":{"type":"shipment","id":"PA-2030-0901"},
"satisfiedBy":{"factKey":"shipment.cleared:PA-2030-0901"},"dueAt":"2030-09-12T00:00:00Z","grace":"PT1H","basis":"contract"}`

	type step struct {
		who   string
		args  []string
		stdin string
		exit  int
		json  bool // --json: compared with the clock's stamps replaced
	}
	steps := []step{
		{"booking", []string{"expect", "raise", "--id", "exp-depart", "--kind", "shipment.departure", "--subject", sub,
			"--fact-key", "shipment.departed:PA-2030-0901", "--due", "2030-09-11T03:15:00Z", "--grace", "2h", "--basis", "observed", "--task", "task-7"}, "", 0, false},
		{"booking", []string{"expect", "raise", "--id", "exp-arrive", "--kind", "shipment.arrival", "--subject", sub, "--expects", "an arrival event at DOH",
			"--fact-key", "shipment.arrived:PA-2030-0901", "--due", "2030-09-11T05:00:00Z", "--grace", "PT6H", "--anchor", "exp-depart:1h45m",
			"--after", "exp-depart", "--horizon", "2030-09-13T05:00:00Z", "--basis", "observed", "--task", "task-7", "--context", "ctx-3"}, "", 0, true},
		{"booking", []string{"expect", "raise", "-", "--json"}, doc, 0, true},
		{"booking", []string{"expect", "raise", "--id", "exp-customs", "--kind", "shipment.customs", "--subject", sub,
			"--fact-key", "shipment.inspected:PA-2030-0901", "--due", "2030-09-12T00:00:00Z", "--basis", "declared", "--task", "task-7"}, "", 0, false},
		{"booking", []string{"expect", "raise", "--id", "no-due", "--kind", "k", "--subject", sub, "--basis", "declared"}, "", 2, false},                                                         // usage
		{"booking", []string{"expect", "raise", "-"}, `{"expectationId":"x","colour":"red"}`, 2, false},                                                                                          // unknown field
		{"booking", []string{"expect", "raise", "--id", "exp-depart", "--kind", "k", "--subject", sub, "--fact-key", "f", "--due", "2030-01-01T00:00:00Z", "--basis", "declared"}, "", 1, false}, // taken id
		{"carrier-feed", []string{"fact", "shipment.departed:PA-2030-0901", "--subject", sub, "--at", factAt}, "", 0, false},
		{"carrier-feed", []string{"fact", "shipment.departed:PA-2030-0901", "--subject", sub, "--at", "2031-01-01T00:00:00Z"}, "", 2, false}, // future
		{"carrier-feed", []string{"fact", "shipment.weighed:PA-2030-0901", "--subject", sub, "--at", factAt, "--json"}, "", 0, true},
		{"booking", []string{"expect", "supersede", "exp-arrive", "--id", "exp-arrive-2", "--due", "2030-09-12T05:00:00Z"}, "", 0, false},
		{"booking", []string{"expect", "supersede", "exp-arrive", "--id", "exp-arrive-3", "--due", "2030-09-12T06:00:00Z"}, "", 1, false}, // not open
		{"carrier-feed", []string{"expect", "withdraw", "exp-arrive-2"}, "", 1, false},                                                    // not the raiser
		{"booking", []string{"expect", "withdraw", "nope"}, "", 1, false},
		// Lineage: x1 → x2 → x3 is within the bound (3); x4 needs a person.
		{"booking", []string{"expect", "raise", "--id", "x1", "--kind", "k", "--subject", "doc:x", "--fact-key", "done:x", "--due", "2030-12-01T00:00:00Z", "--basis", "declared"}, "", 0, false},
		{"booking", []string{"expect", "supersede", "x1", "--id", "x2", "--due", "2030-12-02T00:00:00Z"}, "", 0, false},
		{"booking", []string{"expect", "supersede", "x2", "--id", "x3", "--json"}, "", 1, true}, // identical to its ancestor
		{"booking", []string{"expect", "supersede", "x2", "--id", "x3", "--due", "2030-12-03T00:00:00Z", "--json"}, "", 0, true},
		{"booking", []string{"expect", "supersede", "x3", "--id", "x4", "--due", "2030-12-04T00:00:00Z"}, "", 1, false}, // past the bound
		{"booking", []string{"expect", "supersede", "x3", "--id", "x4", "--due", "2030-12-04T00:00:00Z", "--json"}, "", 1, true},
		{"ops-lead", []string{"expect", "supersede", "x3", "--id", "x4", "--due", "2030-12-04T00:00:00Z", "--human", "--json"}, "", 0, true},
		{"ops-lead", []string{"expect", "withdraw", "exp-doc", "--reason", "customs waived", "--human"}, "", 0, false}, // a person withdraws others'
		{"booking", []string{"expect", "withdraw", "exp-doc"}, "", 1, false},                                           // not open any more
		{"booking", []string{"task", "outcome", "task-7"}, "", 2, false},
		{"booking", []string{"task", "outcome", "task-7", "--cancelled"}, "", 0, false},
		{"booking", []string{"task", "outcome", "task-8", "--completed", "--json"}, "", 0, true},
		{"booking", []string{"expect", "show", "nope"}, "", 1, false},
		{"booking", []string{"expect", "show", "nope", "--json"}, "", 1, false},
		{"booking", []string{"expect", "ls", "--state", "lost"}, "", 2, false},
		{"booking", []string{"expect", "ls", "--subject", "nocolon"}, "", 2, false},
	}
	for _, st := range steps {
		r := srv.asIn(t, st.who, st.stdin, st.args...)
		l := loc.runWith(runOpts{stdin: st.stdin}, append(st.args, "--as", st.who)...)
		if r.code != st.exit || l.code != st.exit {
			t.Fatalf("%q as %s: want exit %d both ways\nremote: %v\nlocal: %v", st.args, st.who, st.exit, r, l)
		}
		ro, lo := r.out, l.out
		if st.json {
			ro, lo = norm(ro), norm(lo)
		}
		if ro != lo {
			t.Errorf("%q as %s: stdout differs\nremote: %s\nlocal:  %s", st.args, st.who, r.out, l.out)
		}
		// A refusal prints the same message (its error document with --json).
		if r.err != l.err {
			t.Errorf("%q as %s: stderr differs\nremote: %s\nlocal:  %s", st.args, st.who, r.err, l.err)
		}
	}

	// Reads through the server print exactly what local reads of the
	// server's own directory print; the separate local ledger differs only
	// in the clock's stamps.
	reads := [][]string{
		{"expect", "show", "exp-arrive"},
		{"expect", "show", "exp-arrive", "--json"},
		{"expect", "show", "exp-arrive-2"},
		{"expect", "show", "exp-depart", "--json"},
		{"expect", "show", "exp-doc"},
		{"expect", "show", "exp-customs"},
		{"expect", "show", "x4"},
		{"expect", "show", "x4", "--json"},
		{"expect", "ls"},
		{"expect", "ls", "--json"},
		{"expect", "ls", "--state", "open"},
		{"expect", "ls", "--state", "withdrawn", "--json"},
		{"expect", "ls", "--subject", sub, "--kind", "shipment.arrival"},
		{"expect", "ls", "--task", "task-7", "--json"},
		{"expect", "ls", "--context", "ctx-3"},
		{"lapses"},
		{"lapses", "--json"},
	}
	for _, args := range reads {
		r := srv.as(t, "carrier-feed", args...)
		l := srv.local(t, args...)
		o := loc.run(args...)
		if r.code != 0 || l.code != 0 || o.code != 0 {
			t.Fatalf("%q: remote %v\nlocal %v\nseparate %v", args, r, l, o)
		}
		if r.out != l.out {
			t.Errorf("%q: stdout differs\nremote:\n%s\nlocal:\n%s", args, r.out, l.out)
		}
		if norm(r.out) != norm(o.out) {
			t.Errorf("%q: remote and separate local ledger differ beyond clock stamps\nremote:\n%s\nlocal:\n%s", args, r.out, o.out)
		}
	}
	// What the flow did, read through the server.
	for id, want := range map[string]string{
		"exp-depart": "exp-depart  satisfied", "exp-arrive": "exp-arrive  superseded", "exp-arrive-2": "exp-arrive-2  withdrawn", // the origin is inherited
		"exp-customs": "exp-customs  withdrawn", "exp-doc": "exp-doc  withdrawn", "x4": "lineage:    x1 → x2 → x3 → x4",
	} {
		if out := srv.as(t, "booking", "expect", "show", id).out; !strings.Contains(out, want) {
			t.Errorf("show %s: want %q in\n%s", id, want, out)
		}
	}
	if out := srv.as(t, "booking", "lapses", "--json").out; out != "{\"schema_version\":1,\"lapses\":[]}\n" {
		t.Errorf("lapses: %s", out)
	}
}

func TestRemoteExpectRolesAndLapses(t *testing.T) {
	srv := startServer(t, "booking", "ops-lead=person", "tk=timekeeper")
	env := []string{"TALLY_URL=" + srv.url, "TALLY_TOKEN=" + srv.tokens["booking"]}
	due := instant.Format(time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Second))
	if r := srv.as(t, "booking", "expect", "raise", "--id", "late", "--kind", "k", "--subject", "doc:late", "--fact-key", "done:late", "--due", due, "--basis", "declared"); r.code != 0 {
		t.Fatal(r)
	}
	if r := srv.as(t, "booking", "expect", "raise", "--id", "soon", "--kind", "k", "--subject", "doc:soon", "--fact-key", "done:soon", "--due", "2h", "--basis", "declared"); r.code != 0 {
		t.Fatal(r)
	}

	// --human: the person role is the token's; an agent token is refused
	// before anything is sent, a person token is accepted.
	r := srv.as(t, "booking", "expect", "withdraw", "soon", "--human")
	if r.code != 2 || !strings.Contains(r.err, "role person") || r.out != "" {
		t.Errorf("--human with an agent token: %v", r)
	}
	if v := srv.as(t, "booking", "expect", "show", "soon").out; !strings.Contains(v, "soon  open") {
		t.Errorf("refused --human withdrew: %s", v)
	}
	// Other verbs stay local only; --dir and TALLY_URL together are refused.
	for _, c := range []struct {
		args []string
		err  string
	}{
		{[]string{"watch", "--once"}, "local ledger directory only"},
		{[]string{"expect", "ls", "--dir", srv.dir}, "--dir"},
		{[]string{"fact", "k", "--subject", "doc:x", "--as", "someone-else"}, "not the token's identity"},
	} {
		if r := run(t, runOpts{env: env}, c.args...); r.code != 2 || !strings.Contains(r.err, c.err) {
			t.Errorf("%q: want exit 2 and %q: %v", c.args, c.err, r)
		}
	}

	// Only the timekeeper commits lapses; committing one twice is a no-op.
	lapse := `{"expectationId":"late","lapse":"overdue"}`
	if code, b := srv.post(t, "booking", "/lapses", lapse); code != http.StatusForbidden {
		t.Errorf("lapse by an agent: %d %s", code, b)
	}
	for range 2 {
		if code, b := srv.post(t, "tk", "/lapses", lapse); code != http.StatusCreated {
			t.Fatalf("lapse by the timekeeper: %d %s", code, b)
		}
	}
	if r := run(t, runOpts{env: append(env, "TALLY_TOKEN="+srv.tokens["tk"])}, "expect", "withdraw", "soon", "--human"); r.code != 2 {
		t.Errorf("--human with the timekeeper token: %v", r)
	}
	reads := [][]string{
		{"lapses"},
		{"lapses", "--json"},
		{"lapses", "--expectation", "late", "--json"},
		{"lapses", "--expectation", "soon"},
		{"lapses", "--since", "2000-01-01T00:00:00Z"},
		{"lapses", "--since", "1h", "--json"},
		{"expect", "show", "late"},
		{"expect", "show", "late", "--json"},
		{"expect", "ls", "--json"},
	}
	for _, args := range reads {
		r := srv.as(t, "booking", args...)
		l := srv.local(t, args...)
		if r.code != 0 || l.code != 0 || r.out != l.out {
			t.Errorf("%q: remote and local read differ\nremote: %v\nlocal: %v", args, r, l)
		}
	}
	if out := srv.as(t, "booking", "lapses").out; !strings.Contains(out, "late") || !strings.Contains(out, "overdue") || strings.Count(out, "\n") != 1 {
		t.Errorf("one overdue lapse of late: %q", out)
	}
	if out := srv.as(t, "booking", "lapses", "--since", "1h").out; !strings.Contains(out, "late") {
		t.Errorf("the lapse was noticed in the last hour: %q", out)
	}
	if out := srv.as(t, "booking", "lapses", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)).out; out != "" {
		t.Errorf("no lapse noticed an hour from now: %q", out)
	}

	// A person-role token extends and withdraws as a person.
	if r := srv.as(t, "ops-lead", "expect", "withdraw", "soon", "--human", "--reason", "not needed"); r.code != 0 || r.out != "soon: withdrawn\n" {
		t.Errorf("--human with a person token: %v", r)
	}
	// An idempotent retry of an expectation write answers the recorded
	// response.
	args := []string{"expect", "raise", "--id", "once", "--kind", "k", "--subject", "doc:once", "--fact-key", "f", "--due", "2030-01-01T00:00:00Z", "--basis", "declared", "--request-id", "r-1", "--json"}
	r1 := srv.as(t, "booking", args...)
	r2 := srv.as(t, "booking", args...)
	if r1.code != 0 || r2.code != 0 || r1.out != r2.out {
		t.Errorf("retry with the same request id:\n%v\n%v", r1, r2)
	}
}
