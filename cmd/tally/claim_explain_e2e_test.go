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
