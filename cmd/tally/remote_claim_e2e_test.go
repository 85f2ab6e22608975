package main

// The artifact and check verbs, and claim graph, as a client of the real
// `tally serve` on 127.0.0.1: each step runs with TALLY_URL and against a
// separate local ledger (same exit codes, same stdout and stderr once the
// clocks' stamps, the hashes that chain them and minted evidence ids are set
// aside); reads through the server print byte for byte what local reads of
// the server's own directory print; refusals append nothing; and bytes that
// do not match their digest, on the server's disk or in transit, are never
// written.

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// claimWork is a working directory holding the files the agents publish.
func claimWork(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"patch-a.txt": "--- a/parser.go\n+++ b/parser.go\n+\tif len(s) < 6 { return errIncomplete } // fixed escape\n",
		"patch-b.txt": "--- a/parser.go\n+++ b/parser.go\n+\tif len(s) < i+6 { return errIncomplete }\n",
		"diag.log":    "reproduced with \\u12\n",
		"review.md":   "bounds checked before every read\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// sameBytes fails unless the file at path still holds before.
func sameBytes(t *testing.T, what, path string, before []byte) {
	t.Helper()
	after, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("%s: a refusal changed the log", what)
	}
}

func readOrNil(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return b
}

func TestRemoteArtifactAndCheckVerbsMatchLocal(t *testing.T) {
	srv := startServer(t, maintainer, parser, "outsider")
	loc := newLedger(t)
	rdir, ldir := claimWork(t), claimWork(t)
	srvLog := filepath.Join(srv.dir, "sessions", "default", "default", "log.jsonl")
	clock := clockStamps(time.Now().UTC())
	hashes := regexp.MustCompile(`"hash":"[0-9a-f]{64}"`)
	evidence := regexp.MustCompile(`\bev_[0-9a-f]{8}\b`)
	norm := func(s, dir string) string {
		s = strings.ReplaceAll(s, dir, "WORK")
		s = hashes.ReplaceAllString(clock(s), `"hash":"H"`)
		return evidence.ReplaceAllString(s, "ev_ID")
	}
	remote := func(who, stdin string, args ...string) result {
		return run(t, runOpts{stdin: stdin, cwd: rdir, env: []string{"TALLY_URL=" + srv.url, "TALLY_TOKEN=" + srv.tokens[who]}}, args...)
	}

	type step struct {
		who   string
		args  []string
		stdin string
		exit  int
	}
	steps := []step{
		{maintainer, []string{"claim", "create", "C17", "--respondent", parser, "--work", "reject incomplete escapes",
			"--check", "change/behavior:validator=command@1,evaluator=maintainer",
			"--check", "change/review:validator=review@1,evaluator=maintainer,phases=quality"}, "", 0},
		{maintainer, []string{"claim", "post", "C17"}, "", 0},
		{parser, []string{"receipt", "acquire", "C17"}, "", 0},
		{parser, []string{"artifact", "put", "patch-a.txt", "--claim", "C17", "--slot", "change", "--generation", "1", "--kind", "patch", "--schema", "text/x-diff", "--id", "patch-a"}, "", 0},
		{parser, []string{"artifact", "put", "patch-b.txt", "--claim", "C17", "--slot", "change", "--generation", "1", "--kind", "patch", "--id", "patch-b", "--json"}, "", 0},
		{parser, []string{"artifact", "put", "-"}, `{"file":"diag.log","claim":"C17","generation":1,"artifact":"diag-1"}`, 0},
		{parser, []string{"artifact", "put", "nope.txt", "--claim", "C17", "--id", "x"}, "", 2},                                             // no such file
		{parser, []string{"artifact", "put", "patch-a.txt", "--claim", "C17", "--slot", "change", "--generation", "2", "--id", "y"}, "", 1}, // not the generation held
		{"outsider", []string{"artifact", "put", "patch-a.txt", "--claim", "C17", "--slot", "change", "--generation", "1", "--id", "z", "--json"}, "", 1},
		{parser, []string{"artifact", "put", "patch-a.txt", "--claim", "C99", "--id", "w"}, "", 1}, // no such claim
		{parser, []string{"testament", "close", "C17", "--id", "T1", "--generation", "1", "--outcome", "complete", "--summary", "length check", "--bind", "change=patch-a"}, "", 0},
		{parser, []string{"testament", "post", "C17", "T1"}, "", 0},
		{maintainer, []string{"testament", "receive", "C17", "T1"}, "", 0},
		{parser, []string{"testament", "close", "C17", "--id", "T2", "--generation", "1", "--outcome", "complete", "--summary", "bounds checked", "--bind", "change=patch-b"}, "", 0},
		{parser, []string{"testament", "post", "C17", "T2"}, "", 0},
		{maintainer, []string{"testament", "receive", "C17", "T2"}, "", 0},
		{"outsider", []string{"check", "begin", "behavior", "--claim", "C17", "--artifact", "patch-a"}, "", 1}, // not the evaluator
		{maintainer, []string{"check", "begin", "behavior", "--claim", "C17", "--artifact", "nope"}, "", 1},    // no such artifact
		{maintainer, []string{"check", "begin", "behavior", "--claim", "C17", "--artifact", "patch-a"}, "", 0},
		{parser, []string{"check", "report", "review", "--claim", "C17", "--artifact", "patch-a", "--result", "pass", "--evidence-file", "review.md", "--json"}, "", 1}, // not the evaluator: no evidence stored either
		{maintainer, []string{"check", "report", "review", "--claim", "C17", "--artifact", "patch-a", "--result", "great", "--evidence-file", "review.md"}, "", 2},
		{maintainer, []string{"check", "report", "review", "--claim", "C17", "--artifact", "patch-a", "--result", "pass", "--evidence-file", "missing.md"}, "", 2},
		{maintainer, []string{"check", "report", "nocheck", "--claim", "C17", "--artifact", "patch-a", "--result", "pass", "--evidence-file", "review.md"}, "", 1},
		{maintainer, []string{"check", "report", "review", "--claim", "C99", "--artifact", "patch-a", "--result", "pass", "--evidence", "e"}, "", 1},
		{"outsider", []string{"check", "run", "behavior", "--claim", "C17", "--artifact", "patch-a", "--command", "true"}, "", 1},
		{maintainer, []string{"check", "run", "behavior", "--claim", "C17", "--artifact", "patch-a"}, "", 2}, // the command validator needs --command
		// The attempt began above: run records the log as evidence and the verdict.
		{maintainer, []string{"check", "run", "behavior", "--claim", "C17", "--artifact", "patch-a", "--command", "grep -q 'fixed escape' patch-a.txt && test -f \"$TALLY_ARTIFACT\""}, "", 0},
		// A run that begins its attempt on the latest received target (patch-b
		// of T2): begin, evidence and verdict in one document.
		{maintainer, []string{"check", "run", "behavior", "--claim", "C17", "--command", "test -s patch-b.txt", "--json"}, "", 0},
		{maintainer, []string{"check", "run", "behavior", "--claim", "C17", "--command", "true"}, "", 2}, // no received target left
		{maintainer, []string{"check", "report", "-", "--json"}, `{"check":"review","claim":"C17","artifact":"patch-a","result":"pass","evidence_file":"review.md","note":"bounds checked"}`, 0},
		{maintainer, []string{"claim", "create", "C18", "--respondent", parser, "--work", "w", "--depends-on", "C17", "--awaits", "C19", "--predecessor", "C17"}, "", 0},
	}
	for _, st := range steps {
		rBefore, lBefore := readOrNil(t, srvLog), loc.logBytes()
		r := remote(st.who, st.stdin, st.args...)
		l := loc.runWith(runOpts{stdin: st.stdin, cwd: ldir}, append(st.args, "--as", st.who)...)
		if r.code != st.exit || l.code != st.exit {
			t.Fatalf("%q as %s: want exit %d both ways\nremote: %v\nlocal: %v", st.args, st.who, st.exit, r, l)
		}
		if norm(r.out, rdir) != norm(l.out, ldir) {
			t.Errorf("%q as %s: stdout differs\nremote: %s\nlocal:  %s", st.args, st.who, r.out, l.out)
		}
		if norm(r.err, rdir) != norm(l.err, ldir) {
			t.Errorf("%q as %s: stderr differs\nremote: %s\nlocal:  %s", st.args, st.who, r.err, l.err)
		}
		if st.exit != 0 {
			sameBytes(t, "remote "+strings.Join(st.args, " "), srvLog, rBefore)
			sameBytes(t, "local "+strings.Join(st.args, " "), loc.logPath(), lBefore)
		}
	}
	if v := decode(t, srv.as(t, maintainer, "claim", "show", "C17", "--json").out)["claim"].(map[string]any); v["state"] != "Satisfied" {
		t.Errorf("C17 after both checks passed on patch-a: %v", v["state"])
	}

	// Reads through the server print what local reads of its directory print.
	content := artifactContent(t, srv.as(t, parser, "claim", "show", "C17", "--json").out, "patch-a")
	reads := [][]string{
		{"artifact", "ls"},
		{"artifact", "ls", "--claim", "C17", "--json"},
		{"artifact", "ls", "--claim", "C18"},
		{"artifact", "verify"},
		{"artifact", "verify", "--json"},
		{"artifact", "verify", "patch-a", "--claim", "C17"},
		{"artifact", "get", "patch-a", "--claim", "C17"},
		{"artifact", "get", content},
		{"artifact", "get", "-"},
		{"claim", "graph"},
		{"claim", "graph", "--format", "dot"},
		{"claim", "graph", "--json"},
	}
	for _, args := range reads {
		stdin := ""
		if args[len(args)-1] == "-" {
			stdin = `{"artifact":"diag-1","claim":"C17"}`
		}
		r := run(t, runOpts{stdin: stdin, env: []string{"TALLY_URL=" + srv.url, "TALLY_TOKEN=" + srv.tokens[parser]}}, args...)
		l := run(t, runOpts{stdin: stdin}, append([]string{"--dir", srv.dir}, args...)...)
		if r.code != 0 || l.code != 0 || r.out != l.out || r.err != l.err {
			t.Errorf("%q: remote and local read differ\nremote: %v\nlocal: %v", args, r, l)
		}
	}
	if out := srv.as(t, parser, "artifact", "get", "patch-a", "--claim", "C17").out; !strings.Contains(out, "fixed escape") {
		t.Errorf("get patch-a: %q", out)
	}
	if out := srv.as(t, parser, "claim", "graph").out; !regexp.MustCompile(`C18\s+depends_on\s+C17\s+Satisfied\s+yes`).MatchString(out) {
		t.Errorf("claim graph:\n%s", out)
	}
	// get -o writes the file and describes it; the same refusals both ways.
	outs := []struct {
		args []string
		exit int
	}{
		{[]string{"artifact", "get", "patch-b", "--claim", "C17", "-o", "got/patch-b.txt", "--json"}, 0},
		{[]string{"artifact", "get", content, "-o", "got/by-content.txt"}, 0},
		{[]string{"artifact", "get", "patch-a", "--claim", "C17", "--json"}, 2}, // --json needs -o
		{[]string{"artifact", "get", "nope", "--claim", "C17"}, 1},
		{[]string{"artifact", "get", "patch-a", "--claim", "C99", "--json", "-o", "x"}, 1},
		{[]string{"artifact", "get", "not-a-digest"}, 2},
		{[]string{"artifact", "get", strings.Repeat("0", 64)}, 1},
		{[]string{"artifact", "verify", "patch-a"}, 2}, // needs --claim
		{[]string{"artifact", "verify", "nope", "--claim", "C17", "--json"}, 1},
		{[]string{"artifact", "ls", "--claim", "C99"}, 1},
	}
	for _, o := range outs {
		os.MkdirAll(filepath.Join(rdir, "got"), 0o755)
		os.MkdirAll(filepath.Join(ldir, "got"), 0o755)
		r := remote(parser, "", o.args...)
		l := run(t, runOpts{cwd: ldir}, append([]string{"--dir", srv.dir}, o.args...)...)
		if r.code != o.exit || l.code != o.exit || norm(r.out, rdir) != norm(l.out, ldir) || r.err != l.err {
			t.Errorf("%q: want exit %d, same output\nremote: %v\nlocal: %v", o.args, o.exit, r, l)
		}
	}
	for _, name := range []string{"got/patch-b.txt", "got/by-content.txt"} {
		r, _ := os.ReadFile(filepath.Join(rdir, name))
		l, _ := os.ReadFile(filepath.Join(ldir, name))
		if len(r) == 0 || !bytes.Equal(r, l) {
			t.Errorf("%s: remote wrote %q, local %q", name, r, l)
		}
	}

	// The server's copy of patch-b is damaged on its disk: verify reports
	// it, get writes nothing, and a report on it stores no evidence.
	contentB := artifactContent(t, srv.as(t, parser, "claim", "show", "C17", "--json").out, "patch-b")
	objB := filepath.Join(srv.dir, "objects", contentB[:2], contentB[2:])
	b, err := os.ReadFile(objB)
	if err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x20
	if err := os.WriteFile(objB, b, 0o644); err != nil {
		t.Fatal(err)
	}
	damaged := []struct {
		args []string
		err  string // on stderr
	}{
		{[]string{"artifact", "verify"}, "1 artifact(s) missing or damaged"},
		{[]string{"artifact", "verify", "--json"}, ""},
		{[]string{"artifact", "get", "patch-b", "--claim", "C17", "-o", "damaged.txt"}, "the stored copy of artifact patch-b is damaged"},
		{[]string{"artifact", "get", "patch-b", "--claim", "C17", "--json", "-o", "damaged.txt"}, `"code":"damaged"`},
		{[]string{"artifact", "get", contentB}, "the stored copy of content " + contentB + " is damaged"},
		{[]string{"check", "begin", "behavior", "--claim", "C17", "--artifact", "patch-b", "--json"}, `"code":"damaged"`},
		{[]string{"check", "report", "review", "--claim", "C17", "--artifact", "patch-b", "--result", "fail", "--evidence-file", "review.md", "--json"}, `"code":"damaged"`},
		{[]string{"check", "run", "behavior", "--claim", "C17", "--artifact", "patch-b", "--command", "true"}, "the stored copy of artifact patch-b is damaged"},
	}
	for _, o := range damaged {
		before := readOrNil(t, srvLog)
		r := remote(maintainer, "", o.args...)
		sameBytes(t, "remote "+strings.Join(o.args, " "), srvLog, before)
		l := run(t, runOpts{cwd: ldir}, append([]string{"--dir", srv.dir, "--as", maintainer}, o.args...)...)
		sameBytes(t, "local "+strings.Join(o.args, " "), srvLog, before)
		if r.code != 1 || l.code != 1 || r.out != l.out || r.err != l.err || !strings.Contains(r.err, o.err) {
			t.Errorf("%q on a damaged copy: want exit 1, %q, the same output\nremote: %v\nlocal: %v", o.args, o.err, r, l)
		}
	}
	if _, err := os.Stat(filepath.Join(rdir, "damaged.txt")); !os.IsNotExist(err) {
		t.Errorf("get of a damaged copy wrote a file: %v", err)
	}
}

// artifactContent returns the content digest of an artifact in a claim
// show --json document.
func artifactContent(t *testing.T, doc, id string) string {
	t.Helper()
	for _, a := range decode(t, doc)["claim"].(map[string]any)["artifacts"].([]any) {
		if a := a.(map[string]any); a["artifact"] == id {
			return a["content"].(string)
		}
	}
	t.Fatalf("no artifact %s in %s", id, doc)
	return ""
}

// tamperingProxy forwards to the server but flips a byte of every artifact
// body it relays, as a faulty network or a dishonest middlebox would.
func tamperingProxy(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := httputil.NewSingleHostReverseProxy(u)
	p.ModifyResponse = func(resp *http.Response) error {
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/octet-stream" {
			return nil
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if len(b) > 0 {
			b[len(b)/2] ^= 0x01
		}
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
		return nil
	}
	ts := httptest.NewServer(p)
	t.Cleanup(ts.Close)
	return ts.URL
}

// The client checks what it downloads against the recorded content digest:
// bytes changed in transit are refused (exit 1), and nothing is written or
// appended.
func TestRemoteGetRefusesBytesThatDoNotMatchTheirDigest(t *testing.T) {
	srv := startServer(t, maintainer, parser)
	work := claimWork(t)
	srvLog := filepath.Join(srv.dir, "sessions", "default", "default", "log.jsonl")
	for _, st := range []struct {
		who  string
		args []string
	}{
		{maintainer, []string{"claim", "create", "C17", "--respondent", parser, "--work", "w", "--check", "change/behavior:validator=command@1"}},
		{maintainer, []string{"claim", "post", "C17"}},
		{parser, []string{"receipt", "acquire", "C17"}},
		{parser, []string{"artifact", "put", "patch-a.txt", "--claim", "C17", "--slot", "change", "--generation", "1", "--id", "patch-a"}},
	} {
		if r := run(t, runOpts{cwd: work, env: []string{"TALLY_URL=" + srv.url, "TALLY_TOKEN=" + srv.tokens[st.who]}}, st.args...); r.code != 0 {
			t.Fatal(r)
		}
	}
	content := artifactContent(t, srv.as(t, parser, "claim", "show", "C17", "--json").out, "patch-a")
	proxy := tamperingProxy(t, srv.url)
	via := func(args ...string) result {
		return run(t, runOpts{cwd: work, env: []string{"TALLY_URL=" + proxy, "TALLY_TOKEN=" + srv.tokens[maintainer]}}, args...)
	}
	before := readOrNil(t, srvLog)
	for _, args := range [][]string{
		{"artifact", "get", "patch-a", "--claim", "C17"},
		{"artifact", "get", "patch-a", "--claim", "C17", "-o", "tampered.txt"},
		{"artifact", "get", content, "-o", "tampered.txt", "--json"},
		{"check", "run", "behavior", "--claim", "C17", "--artifact", "patch-a", "--command", "true"},
	} {
		r := via(args...)
		if r.code != 1 || r.out != "" || !strings.Contains(r.err, "the server sent are not its content") {
			t.Errorf("%q through a tampering proxy: %v", args, r)
		}
		if strings.Contains(strings.Join(args, " "), "--json") && !strings.Contains(r.err, `"code":"damaged"`) {
			t.Errorf("%q: want the damaged error code: %s", args, r.err)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "tampered.txt")); !os.IsNotExist(err) {
		t.Errorf("tampered bytes were written: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(work, ".tampered.txt*")); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
	sameBytes(t, "check run on tampered bytes", srvLog, before)
	// Straight from the server the same bytes check out.
	if r := srv.as(t, maintainer, "artifact", "get", "patch-a", "--claim", "C17"); r.code != 0 || !strings.Contains(r.out, "fixed escape") {
		t.Errorf("get from the server: %v", r)
	}
}

// A check verb that makes several requests derives each one's key from
// --request-id: a retry replays every step, appending nothing, and prints
// what the first run printed; the same id with another verdict conflicts.
func TestRemoteCheckRetryReplays(t *testing.T) {
	srv := startServer(t, maintainer, parser)
	work := claimWork(t)
	srvLog := filepath.Join(srv.dir, "sessions", "default", "default", "log.jsonl")
	as := func(who string, args ...string) result {
		return run(t, runOpts{cwd: work, env: []string{"TALLY_URL=" + srv.url, "TALLY_TOKEN=" + srv.tokens[who]}}, args...)
	}
	for _, st := range []struct {
		who  string
		args []string
	}{
		{maintainer, []string{"claim", "create", "C17", "--respondent", parser, "--work", "w",
			"--check", "change/behavior:validator=command@1", "--check", "change/review:validator=review@1,phases=quality"}},
		{maintainer, []string{"claim", "post", "C17"}},
		{parser, []string{"receipt", "acquire", "C17"}},
		{parser, []string{"artifact", "put", "patch-a.txt", "--claim", "C17", "--slot", "change", "--generation", "1", "--id", "patch-a"}},
		{parser, []string{"testament", "close", "C17", "--id", "T1", "--generation", "1", "--summary", "s", "--bind", "change=patch-a"}},
		{parser, []string{"testament", "post", "C17", "T1"}},
		{maintainer, []string{"testament", "receive", "C17", "T1"}},
	} {
		if r := as(st.who, st.args...); r.code != 0 {
			t.Fatal(r)
		}
	}
	for _, args := range [][]string{
		{"check", "run", "behavior", "--claim", "C17", "--artifact", "patch-a", "--command", "true", "--request-id", "run-1", "--json"},
		{"check", "report", "review", "--claim", "C17", "--artifact", "patch-a", "--result", "pass", "--evidence-file", "review.md", "--request-id", "rep-1"},
	} {
		first := as(maintainer, args...)
		before := readOrNil(t, srvLog)
		again := as(maintainer, args...)
		if first.code != 0 || again.code != 0 || first.out != again.out {
			t.Errorf("%q retried:\n%v\n%v", args, first, again)
		}
		sameBytes(t, "retry of "+strings.Join(args, " "), srvLog, before)
	}
	r := as(maintainer, "check", "report", "review", "--claim", "C17", "--artifact", "patch-a", "--result", "fail", "--evidence-file", "review.md", "--request-id", "rep-1", "--json")
	if r.code != 1 || !strings.Contains(r.err, `"code":"IdempotencyConflict"`) {
		t.Errorf("the same request id for another verdict: %v", r)
	}
	// A verdict the ledger refuses (its target named with a wrong digest)
	// stores no evidence: the evidence is published in the verdict's write.
	before := readOrNil(t, srvLog)
	r = as(maintainer, "check", "report", "review", "--claim", "C17", "--artifact", "patch-a", "--digest", strings.Repeat("0", 64),
		"--result", "pass", "--evidence-file", "review.md", "--json")
	if r.code != 1 || !strings.Contains(r.err, `"code":"conflict"`) {
		t.Errorf("a verdict on a wrong digest: %v", r)
	}
	sameBytes(t, "a refused verdict with evidence", srvLog, before)
}
