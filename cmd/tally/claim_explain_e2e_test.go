package main

// Claims that explain themselves, through the real binary on a local ledger
// and through a real `tally serve` alike: the why of `claim show`, the
// slots of a claim that ended while a check was still running, and the
// same answer (exit code and --json error code) to the same refusal both
// ways, with nothing appended.

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// bothWays runs each command on a local ledger (--as WHO) and through a
// server (WHO's token), in working directories holding the same files.
type bothWays struct {
	t          *testing.T
	srv        *server
	loc        *led
	rdir, ldir string
}

func newBothWays(t *testing.T, participants ...string) *bothWays {
	t.Helper()
	return &bothWays{t: t, srv: startServer(t, participants...), loc: newLedger(t), rdir: claimWork(t), ldir: claimWork(t)}
}

func (b *bothWays) srvLog() string {
	return filepath.Join(b.srv.dir, "sessions", "default", "default", "log.jsonl")
}

// run runs one command both ways and returns the remote and local results.
func (b *bothWays) run(who, stdin string, args ...string) (remote, local result) {
	b.t.Helper()
	remote = run(b.t, runOpts{stdin: stdin, cwd: b.rdir, env: []string{"TALLY_URL=" + b.srv.url, "TALLY_TOKEN=" + b.srv.tokens[who]}}, args...)
	local = b.loc.runWith(runOpts{stdin: stdin, cwd: b.ldir}, append(args, "--as", who)...)
	return remote, local
}

// must runs a command both ways; both must exit 0.
func (b *bothWays) must(who string, args ...string) (remote, local result) {
	b.t.Helper()
	r, l := b.run(who, "", args...)
	if r.code != 0 || l.code != 0 {
		b.t.Fatalf("%q as %s: want exit 0 both ways\nremote: %v\nlocal: %v", args, who, r, l)
	}
	return r, l
}

// refused runs a command both ways with --json: the same exit code and the
// same error document's code both ways, nothing on stdout, and both logs'
// bytes unchanged. It returns the code.
func (b *bothWays) refused(who, stdin string, exit int, args ...string) string {
	b.t.Helper()
	rBefore, lBefore := readOrNil(b.t, b.srvLog()), b.loc.logBytes()
	r, l := b.run(who, stdin, append(args, "--json")...)
	if r.code != exit || l.code != exit || r.out != "" || l.out != "" {
		b.t.Fatalf("%q as %s: want exit %d and no stdout both ways\nremote: %v\nlocal: %v", args, who, exit, r, l)
	}
	rc, lc := decode(b.t, r.err)["code"], decode(b.t, l.err)["code"]
	if rc != lc || rc == nil {
		b.t.Errorf("%q as %s: error code %v over TALLY_URL, %v locally\nremote: %s\nlocal: %s", args, who, rc, lc, r.err, l.err)
	}
	sameBytes(b.t, "remote "+strings.Join(args, " "), b.srvLog(), rBefore)
	sameBytes(b.t, "local "+strings.Join(args, " "), b.loc.logPath(), lBefore)
	s, _ := lc.(string)
	return s
}

// show returns `claim show ID --json`'s claim both ways, which must agree
// on why.
func (b *bothWays) show(id string) map[string]any {
	b.t.Helper()
	r, l := b.must(maintainer, "claim", "show", id, "--json")
	rv, lv := decode(b.t, r.out)["claim"].(map[string]any), decode(b.t, l.out)["claim"].(map[string]any)
	if !reflect.DeepEqual(rv["why"], lv["why"]) {
		b.t.Fatalf("why of %s differs\nremote: %v\nlocal:  %v", id, rv["why"], lv["why"])
	}
	return lv
}

func whyTexts(v map[string]any) []string {
	out := []string{}
	for _, r := range v["why"].([]any) {
		out = append(out, r.(map[string]any)["text"].(string))
	}
	return out
}

// deliverBoth publishes file as artifact id for the change slot and has the
// claimant receive a testament binding it.
func (b *bothWays) deliverBoth(claimID, testament, id, file string) {
	b.t.Helper()
	b.must(parser, "artifact", "put", file, "--claim", claimID, "--slot", "change", "--generation", "1", "--kind", "patch", "--id", id)
	b.must(parser, "testament", "close", claimID, "--id", testament, "--generation", "1", "--summary", "s", "--bind", "change="+id)
	b.must(parser, "testament", "post", claimID, testament)
	b.must(maintainer, "testament", "receive", claimID, testament)
}

func TestE2EClaimExplainsItself(t *testing.T) {
	b := newBothWays(t, maintainer, parser)
	c17 := []string{"--check", "change/behavior:validator=command@1", "--check", "change/review:validator=review@1,phases=quality"}
	b.must(maintainer, append([]string{"claim", "create", "C17", "--respondent", parser, "--work", "fix", "--depends-on", "C2"}, c17...)...)
	b.must(maintainer, "claim", "create", "C2", "--respondent", parser, "--work", "release", "--depends-on", "C17")
	b.must(maintainer, "claim", "post", "C17")
	b.must(parser, "receipt", "acquire", "C17")
	b.deliverBoth("C17", "T1", "patch-a", "patch-a.txt")
	b.deliverBoth("C17", "T2", "patch-b", "patch-b.txt")
	b.must(maintainer, "check", "report", "behavior", "--claim", "C17", "--artifact", "patch-a", "--result", "pass", "--evidence-file", "review.md")
	b.must(maintainer, "check", "report", "review", "--claim", "C17", "--artifact", "patch-b", "--result", "pass", "--evidence-file", "review.md")

	want := []string{"slot change: patch-a: behavior pass, review missing; patch-b: review pass, behavior missing",
		"waits on C2, which waits on this claim"}
	if got := whyTexts(b.show("C17")); !reflect.DeepEqual(got, want) {
		t.Fatalf("why of C17:\n got %q\nwant %q", got, want)
	}
	// claim show prints the same lines; the server's GET answers the view.
	r, l := b.must(maintainer, "claim", "show", "C17")
	for _, w := range want {
		if !strings.Contains(r.out, "\n  "+w+"\n") || !strings.Contains(l.out, "\n  "+w+"\n") {
			t.Errorf("claim show lacks %q\nremote:\n%s\nlocal:\n%s", w, r.out, l.out)
		}
	}
	req, _ := http.NewRequest("GET", b.srv.url+"/v1/tenants/default/sessions/default/claims/C17", nil)
	req.Header.Set("Authorization", "Bearer "+b.srv.tokens[maintainer])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Claim struct {
			Why []struct {
				Text string `json:"text"`
			} `json:"why"`
		} `json:"claim"`
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil || len(doc.Claim.Why) != 2 || doc.Claim.Why[0].Text != want[0] || doc.Claim.Why[1].Text != want[1] {
		t.Fatalf("GET claims/C17: %v %+v", err, doc)
	}
}

// A claim that ended while a check was running: the late verdict is kept for
// the audit, and the slot still reads as it did at the end.
func TestE2EClaimLatePassIsAuditOnly(t *testing.T) {
	b := newBothWays(t, maintainer, parser)
	b.must(maintainer, "claim", "create", "C17", "--respondent", parser, "--work", "fix",
		"--check", "change/behavior:validator=command@1", "--check", "change/review:validator=review@1,phases=quality")
	b.must(maintainer, "claim", "post", "C17")
	b.must(parser, "receipt", "acquire", "C17")
	b.deliverBoth("C17", "T1", "patch-a", "patch-a.txt")
	b.deliverBoth("C17", "T2", "patch-b", "patch-b.txt")
	b.must(maintainer, "check", "report", "behavior", "--claim", "C17", "--artifact", "patch-b", "--result", "pass", "--evidence-file", "review.md")
	b.must(maintainer, "check", "begin", "review", "--claim", "C17", "--artifact", "patch-b")
	b.must(maintainer, "check", "report", "review", "--claim", "C17", "--artifact", "patch-a", "--result", "fail", "--evidence-file", "review.md")
	b.must(maintainer, "check", "report", "review", "--claim", "C17", "--artifact", "patch-b", "--result", "pass", "--evidence-file", "review.md")
	v := b.show("C17")
	sl := slotOf(t, v, "change")
	if v["state"] != "ValidationFailed" || sl["status"] != "blocked" || sl["witness"] != nil {
		t.Fatalf("a late pass changed the ended claim's slot: state %v, slot %v", v["state"], sl)
	}
	if got := targetState(checkOf(t, sl, "review"), "patch-b"); got != "passed" {
		t.Fatalf("the late review of patch-b is not kept for the audit: %q", got)
	}
	want := []string{"ValidationFailed: check review failed on patch-a",
		"slot change: patch-a: behavior missing, review fail; patch-b: behavior pass, review running"}
	if got := whyTexts(v); !reflect.DeepEqual(got, want) {
		t.Fatalf("why:\n got %q\nwant %q", got, want)
	}
}

// A successor without slots inherits its predecessor's slots and checks and
// says so; one with nothing to inherit needs --no-checks; a document on
// stdin defaults as the flags do. Both ways alike.
func TestE2EClaimSuccessorInheritsTerms(t *testing.T) {
	b := newBothWays(t, maintainer, parser)
	b.must(maintainer, "claim", "create", "C17", "--respondent", parser, "--work", "fix",
		"--check", "change/behavior:validator=command", "--check", "change/review:validator=review@2,phases=quality,evaluator=parser")
	r, l := b.must(maintainer, "claim", "create", "C18", "--predecessor", "C17", "--respondent", parser, "--work", "fix again")
	note := "note: C18 inherits the slots and checks of its predecessor C17: change (behavior, review)\n"
	if r.err != note || l.err != note {
		t.Fatalf("the inheritance is not said on stderr\nremote: %v\nlocal: %v", r, l)
	}
	c17, c18 := b.show("C17"), b.show("C18")
	if !reflect.DeepEqual(slotTerms(c17), slotTerms(c18)) || len(slotTerms(c18)) != 1 {
		t.Fatalf("C18's slots are not C17's:\n%v\n%v", slotTerms(c18), slotTerms(c17))
	}
	r, l = b.must(maintainer, "claim", "create", "C19", "--predecessor", "C17", "--respondent", parser, "--work", "w", "--json")
	for _, res := range []result{r, l} {
		if notes := decode(t, res.out)["notes"].([]any); len(notes) != 1 || !strings.Contains(notes[0].(string), "C19 inherits") {
			t.Fatalf("--json lacks the note: %v", res)
		}
	}
	// Slots given: those, and nothing said.
	r, l = b.must(maintainer, "claim", "create", "C20", "--predecessor", "C17", "--respondent", parser, "--work", "w", "--check", "docs/proofread:validator=spell")
	if r.err != "" || l.err != "" || len(slotTerms(b.show("C20"))) != 1 || slotTerms(b.show("C20"))[0]["name"] != "docs" {
		t.Fatalf("explicit slots: %v %v", r, l)
	}
	// Nothing to inherit: refused, unless --no-checks says it is meant.
	b.must(maintainer, "claim", "create", "C30", "--respondent", parser, "--work", "w")
	if got := b.refused(maintainer, "", 2, "claim", "create", "C31", "--predecessor", "C30", "--respondent", parser, "--work", "w"); got != "invalid" {
		t.Fatalf("code %s", got)
	}
	b.refused(maintainer, "", 2, "claim", "create", "C31", "--respondent", parser, "--work", "w", "--no-checks", "--check", "a/b:validator=x")
	b.refused(maintainer, `{"claim":"C31","respondent":"parser","work":"w","predecessor":"C30"}`, 2, "claim", "create", "-")
	b.must(maintainer, "claim", "create", "C31", "--predecessor", "C30", "--respondent", parser, "--work", "w", "--no-checks")

	// stdin: the defaults of the flags. The same terms as flags, both ways.
	doc := `{"claim":"C40","respondent":"parser","work":"fix","slots":[{"name":"change","checks":[
	 {"id":"behavior","validator":{"name":"command"}},
	 {"id":"review","validator":{"name":"review","version":"2"},"phases":["quality"],"evaluator":"parser"}]}]}`
	if r, l := b.run(maintainer, doc, "claim", "create", "-"); r.code != 0 || l.code != 0 {
		t.Fatalf("create - with defaults\nremote: %v\nlocal: %v", r, l)
	}
	if got := slotTerms(b.show("C40")); !reflect.DeepEqual(got, slotTerms(c17)) {
		t.Fatalf("stdin's defaults are not the flags':\n%v\n%v", got, slotTerms(c17))
	}
	if r, l := b.run(maintainer, `{"claim":"C41","respondent":"parser","work":"w","predecessor":"C17"}`, "claim", "create", "-"); r.code != 0 || l.code != 0 || r.err != l.err || !strings.Contains(l.err, "C41 inherits") {
		t.Fatalf("create - of a successor\nremote: %v\nlocal: %v", r, l)
	}
}

// slotTerms is a claim view's declared slots and checks, without their
// evaluation.
func slotTerms(v map[string]any) []map[string]any {
	var out []map[string]any
	for _, s := range v["slots"].([]any) {
		s := s.(map[string]any)
		var checks []map[string]any
		for _, c := range s["checks"].([]any) {
			c := c.(map[string]any)
			checks = append(checks, map[string]any{"id": c["id"], "mode": c["mode"], "evaluator": c["evaluator"], "validator": c["validator"],
				"phases": c["phases"], "attempts": c["attempts"], "fallbacks": c["fallbacks"]})
		}
		out = append(out, map[string]any{"name": s["name"], "mode": s["mode"], "checks": checks})
	}
	return out
}

// The artifact receipt has a verb: the claimant records that it observed an
// artifact; anyone else, a second receipt or an unknown artifact is refused.
func TestE2EArtifactReceive(t *testing.T) {
	b := newBothWays(t, maintainer, parser)
	b.must(maintainer, "claim", "create", "C17", "--respondent", parser, "--work", "fix", "--check", "change/behavior:validator=command")
	b.must(maintainer, "claim", "post", "C17")
	b.must(parser, "receipt", "acquire", "C17")
	b.must(parser, "artifact", "put", "diag.log", "--claim", "C17", "--generation", "1", "--id", "diag-1")
	if got := b.refused(parser, "", 1, "artifact", "receive", "C17", "diag-1"); got != "forbidden" {
		t.Fatalf("code %s", got)
	}
	b.refused(maintainer, "", 1, "artifact", "receive", "C17", "nope") // not found
	b.refused(maintainer, "", 1, "artifact", "receive", "C17", "diag-1", "--digest", strings.Repeat("0", 64))
	b.refused(maintainer, "", 2, "artifact", "receive", "C17")
	r, l := b.must(maintainer, "artifact", "receive", "C17", "diag-1")
	if r.out != l.out || !strings.Contains(l.out, "C17: artifact diag-1 received (digest ") {
		t.Fatalf("receive\nremote: %v\nlocal: %v", r, l)
	}
	for _, v := range []map[string]any{decode(t, b.srv.as(t, maintainer, "claim", "show", "C17", "--json").out)["claim"].(map[string]any), b.show("C17")} {
		for _, a := range v["artifacts"].([]any) {
			if a := a.(map[string]any); a["artifact"] == "diag-1" && a["state"] != "Received" {
				t.Fatalf("diag-1 is %v", a["state"])
			}
		}
	}
	b.refused(maintainer, `{"claim":"C17","artifact":"diag-1"}`, 1, "artifact", "receive", "-")
}

// The same refused command answers the same exit code and --json error code
// locally and through the server, and appends nothing either way.
func TestE2EClaimRefusalCodesMatchRemote(t *testing.T) {
	b := newBothWays(t, maintainer, parser, "outsider")
	b.must(maintainer, "claim", "create", "C17", "--respondent", parser, "--work", "fix", "--check", "change/behavior:validator=command")
	b.must(maintainer, "claim", "post", "C17")
	b.must(parser, "receipt", "acquire", "C17")
	b.must(parser, "artifact", "put", "patch-a.txt", "--claim", "C17", "--slot", "change", "--generation", "1", "--id", "patch-a")
	cases := []struct {
		who, stdin string
		exit       int
		code       string
		args       []string
	}{
		{parser, "", 2, "invalid", []string{"progress", "C17", "--note", "n"}},
		{parser, `{"claim":"C17","note":"n"}`, 2, "invalid", []string{"progress", "-"}},
		{parser, "", 2, "invalid", []string{"testament", "close", "C17", "--id", "T1", "--summary", "s", "--bind", "change=patch-a"}},
		{parser, `{"claim":"C17","testament":"T1","summary":"s"}`, 2, "invalid", []string{"testament", "close", "-"}},
		{parser, "", 2, "invalid", []string{"artifact", "put", "patch-b.txt", "--claim", "C17", "--slot", "change", "--id", "patch-b"}},
		{parser, `{"claim":"C17","testament":"T1","generation":1,"summary":"s","role":"bogus"}`, 2, "invalid", []string{"testament", "close", "-"}},
		{parser, "", 1, "conflict", []string{"progress", "C17", "--generation", "2", "--note", "n"}},
		{"outsider", "", 1, "forbidden", []string{"progress", "C17", "--generation", "1", "--note", "n"}},
		{maintainer, "", 1, "not_found", []string{"claim", "post", "C99"}},
		{maintainer, "", 1, "conflict", []string{"claim", "post", "C17"}},
		{maintainer, "", 2, "invalid", []string{"claim", "cancel", "C17"}},
		{maintainer, "", 2, "invalid", []string{"receipt", "adopt", "C17"}},
		{maintainer, "", 1, "not_found", []string{"claim", "supersede", "C17", "--successor", "C99"}},
		{maintainer, "", 2, "invalid", []string{"claim", "create", "C18", "--work", "w", "--respondent", parser, "--pool", "worker-1"}}, // a respondent or a pool
		{maintainer, "", 2, "invalid", []string{"claim", "create", "C18", "--respondent", parser, "--work", "w", "--max-responses", "999"}},
		{maintainer, "", 2, "invalid", []string{"claim", "create", "C18", "--respondent", parser, "--work", "w", "--deadline", "someday"}},
		{maintainer, "", 2, "invalid", []string{"claim", "create", "C18", "--respondent", parser, "--work", "w", "--check", "s/c:validator=v,mode=sometimes"}},
		{maintainer, "", 1, "conflict", []string{"claim", "create", "C17", "--respondent", parser, "--work", "w"}},
		{maintainer, `{"claim":"C18","respondent":"parser","work":"w","bogus":1}`, 2, "invalid", []string{"claim", "create", "-"}},
		{maintainer, "", 1, "not_found", []string{"claim", "show", "C99"}},
		{maintainer, "", 1, "not_found", []string{"artifact", "receive", "C99", "patch-a"}},
		{maintainer, "", 2, "usage", []string{"testament", "receive", "C17"}},
		{maintainer, "", 2, "invalid", []string{"check", "report", "behavior", "--claim", "C17", "--artifact", "patch-a", "--result", "great", "--evidence-file", "review.md"}},
		{maintainer, "", 1, "not_found", []string{"check", "begin", "nocheck", "--claim", "C17", "--artifact", "patch-a"}},
		// An artifact the claim does not record is named, not a digest to mend.
		{maintainer, "", 1, "not_found", []string{"check", "begin", "behavior", "--claim", "C17", "--artifact", "nope"}},
		{parser, "", 1, "not_found", []string{"testament", "close", "C17", "--id", "T1", "--generation", "1", "--summary", "s", "--bind", "change=nope"}},
		{maintainer, "", 1, "not_found", []string{"artifact", "receive", "C17", "nope"}},
	}
	for _, c := range cases {
		if got := b.refused(c.who, c.stdin, c.exit, c.args...); got != c.code {
			t.Errorf("%q: code %s, want %s", c.args, got, c.code)
		}
	}
	// And the HTTP JSON API itself answers those documents with the code the
	// CLI gives, both ways.
	for _, c := range []struct{ path, body, code string }{
		{"/claims/C17/progress", `{"note":"n"}`, "invalid"},
		{"/claims/C17/testaments", `{"testament":"T1","summary":"s"}`, "invalid"},
		{"/claims/C17/testaments", `{"testament":"T1","generation":1,"summary":"s","role":"bogus"}`, "invalid"},
		{"/claims/C17/checks/behavior/report", `{"artifact":"patch-a","result":"great","evidence":"e"}`, "invalid"},
		{"/claims/C99/artifacts/patch-a/receive", `{}`, "not_found"},
		{"/claims/C17/checks/behavior/begin", `{"artifact":"nope"}`, "not_found"},
	} {
		before := readOrNil(t, b.srvLog())
		req, _ := http.NewRequest("POST", b.srv.url+"/v1/tenants/default/sessions/default"+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+b.srv.tokens[parser])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct{ Code string }
		json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if doc.Code != c.code {
			t.Errorf("POST %s %s: code %q, want %q", c.path, c.body, doc.Code, c.code)
		}
		sameBytes(t, "POST "+c.path, b.srvLog(), before)
	}
}
