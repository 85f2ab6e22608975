package main

// The CLI as a client: the real `tally serve` on 127.0.0.1, tokens made with
// `tally token create`, and the same promise lifecycle run with TALLY_URL
// and against a local ledger. Reads through the server print the same bytes
// as local reads of the server's own directory.

import (
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"tally/internal/proctest"
)

// server is one running `tally serve`.
type server struct {
	url    string
	dir    string
	tokens map[string]string
	proc   *exec.Cmd
	flags  []string // extra `tally serve` flags
}

// startServer inits a ledger, makes a token per participant (role agent
// unless given as "who=role") and starts `tally serve` on a free port; the
// server is killed when the test ends.
func startServer(t *testing.T, participants ...string) *server {
	t.Helper()
	return startServerWith(t, nil, participants...)
}

// startServerWith is startServer with extra `tally serve` flags.
func startServerWith(t *testing.T, flags []string, participants ...string) *server {
	t.Helper()
	s := &server{dir: filepath.Join(t.TempDir(), "srv"), tokens: map[string]string{}, flags: flags}
	if r := run(t, runOpts{}, "init", "--dir", s.dir); r.code != 0 {
		t.Fatalf("init: %v", r)
	}
	for _, p := range participants {
		who, role, ok := strings.Cut(p, "=")
		if !ok {
			role = "agent"
		}
		r := run(t, runOpts{}, "token", "create", "--dir", s.dir, "--tenant", "default", "--participant", who, "--role", role)
		if r.code != 0 {
			t.Fatalf("token create: %v", r)
		}
		s.tokens[who] = strings.TrimSpace(r.out)
	}
	s.start(t)
	return s
}

// start runs `tally serve` on s.dir on a free port and waits until it says
// where it listens; the process is killed when the test ends.
func (s *server) start(t *testing.T) {
	t.Helper()
	s.url, s.proc = serveOn(t, io.Discard, append([]string{"--dir", s.dir}, s.flags...)...)
}

// serveOn runs `tally serve --addr 127.0.0.1:0 args…`, its stderr to errw,
// and returns its URL once it says where it listens; the process is killed
// when the test ends.
func serveOn(t *testing.T, errw io.Writer, args ...string) (string, *exec.Cmd) {
	t.Helper()
	return proctest.Serve(t, tallyBin, baseEnv(), errw, args...)
}

// kill9 kills the server with SIGKILL and waits for it to be gone.
func (s *server) kill9(t *testing.T) {
	t.Helper()
	if err := s.proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	s.proc.Wait()
}

// as runs the CLI against the server with who's token.
func (s *server) as(t *testing.T, who string, args ...string) result {
	t.Helper()
	return run(t, runOpts{env: []string{"TALLY_URL=" + s.url, "TALLY_TOKEN=" + s.tokens[who]}}, args...)
}

// local runs the CLI on the server's own ledger directory.
func (s *server) local(t *testing.T, args ...string) result {
	t.Helper()
	return run(t, runOpts{}, append([]string{"--dir", s.dir}, args...)...)
}

func TestRemoteCLIMatchesLocal(t *testing.T) {
	srv := startServer(t, "reviewer", "author", "maintainer", "parser")
	loc := newLedger(t)

	// step is one verb run by who: remotely, and locally with --as.
	type step struct {
		who  string
		args []string
		exit int
	}
	// bothWays runs each step remotely and locally: the same exit, the
	// same bytes.
	bothWays := func(steps []step) {
		t.Helper()
		for _, st := range steps {
			r := srv.as(t, st.who, st.args...)
			l := loc.run(append(st.args, "--as", st.who)...)
			if r.code != st.exit || l.code != st.exit {
				t.Fatalf("%q as %s: want exit %d both ways\nremote: %v\nlocal: %v", st.args, st.who, st.exit, r, l)
			}
			if r.out != l.out || r.err != l.err {
				t.Errorf("%q as %s: remote and local differ\nremote: %v\nlocal: %v", st.args, st.who, r, l)
			}
		}
	}
	steps := []step{
		{"reviewer", []string{"promise", "hand back a reviewed schema", "--id", "desk/ship-91", "--to", "author", "--until", "2030-01-01T00:00:00Z"}, 0},
		{"reviewer", []string{"promise", "then the changelog", "--id", "p2", "--to", "author", "--on", "desk/ship-91", "--until", "2030-01-02T00:00:00Z", "--meta", `{"lane":"docs"}`}, 0},
		{"reviewer", []string{"amend", "desk/ship-91", "--until", "2030-01-01T06:00:00Z", "--reason", "nudge 1"}, 0},
		{"author", []string{"assess", "desk/ship-91", "--violated", "--note", "nothing yet"}, 0},
		{"author", []string{"amend", "desk/ship-91", "--until", "2030-01-03T00:00:00Z"}, 1},                            // not the debtor: 403
		{"reviewer", []string{"resolve", "desk/ship-91", "--released"}, 1},                                             // only the creditor releases
		{"reviewer", []string{"resolve", "nope", "--cancelled", "--reason", "x"}, 1},                                   // unknown: 404
		{"reviewer", []string{"promise", "dup", "--id", "p2", "--to", "author", "--until", "2030-01-02T00:00:00Z"}, 1}, // taken id: 409
		{"reviewer", []string{"promise", "", "--to", "author", "--until", "2030-01-02T00:00:00Z"}, 2},                  // empty text: 400
		{"reviewer", []string{"resolve", "desk/ship-91", "--satisfied", "--evidence", "https://example.org/r/91"}, 0},
		{"reviewer", []string{"show", "nope"}, 1},
		{"author", []string{"show", "nope", "--json"}, 1},
	}
	bothWays(steps)

	// Reads through the server print exactly what a local read of the
	// server's directory prints.
	const T = "2030-01-01T12:00:00Z"
	reads := []struct {
		who  string
		args []string
	}{
		{"reviewer", []string{"show", "desk/ship-91", "--now", T}},
		{"reviewer", []string{"show", "p2", "--now", T}},
		{"author", []string{"show", "desk/ship-91", "--now", T, "--json"}},
		{"author", []string{"ls", "--json", "--now", T}},
		{"author", []string{"ls", "--all", "--json", "--now", T}},
		{"author", []string{"ls", "--all", "--now", T}},
		{"reviewer", []string{"owed", "--now", T}},
		{"reviewer", []string{"owed", "--json", "--now", T}},
		{"reviewer", []string{"graph", "--now", T}},
		{"reviewer", []string{"export", "--format", "json", "--now", T}},
	}
	for _, rd := range reads {
		r := srv.as(t, rd.who, rd.args...)
		// The identity from the environment, as the token's is: the
		// commands owed prints carry no --as either way.
		l := run(t, runOpts{env: []string{"TALLY_ACTOR=" + rd.who}}, append([]string{"--dir", srv.dir}, rd.args...)...)
		if r.code != 0 || l.code != 0 {
			t.Fatalf("%q: remote %v\nlocal %v", rd.args, r, l)
		}
		if r.out != l.out {
			t.Errorf("%q: stdout differs\nremote:\n%s\nlocal:\n%s", rd.args, r.out, l.out)
		}
	}
	// The human show of the same lifecycle on a separate local ledger
	// differs only in the times stamped by each clock.
	stamp := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	for _, id := range []string{"desk/ship-91", "p2"} {
		r := srv.as(t, "author", "show", id, "--now", T)
		l := loc.run("show", id, "--now", T)
		norm := func(s string) string {
			return stamp.ReplaceAllStringFunc(s, func(ts string) string {
				if strings.HasPrefix(ts, "2030-") {
					return ts
				}
				return "TS"
			})
		}
		if norm(r.out) != norm(l.out) {
			t.Errorf("show %s: remote and separate local ledger differ beyond clock stamps\nremote:\n%s\nlocal:\n%s", id, r.out, l.out)
		}
	}

	// Claims over the server: the write verbs print what they print locally.
	cl := []step{
		{"maintainer", []string{"claim", "create", "C17", "--respondent", "parser", "--work", "reject incomplete escapes", "--check", "change/behavior:validator=command@1"}, 0},
		{"parser", []string{"claim", "post", "C17"}, 1}, // only the claimant posts
		{"maintainer", []string{"claim", "post", "C17"}, 0},
		{"parser", []string{"receipt", "acquire", "C17"}, 0},
		{"parser", []string{"progress", "C17", "--generation", "1", "--note", "found it"}, 0},
	}
	bothWays(cl)
	for _, args := range [][]string{{"claim", "show", "C17", "--now", T}, {"claim", "show", "C17", "--now", T, "--json"}, {"claim", "ls", "--now", T, "--json"}, {"claim", "ls", "--now", T}} {
		r := srv.as(t, "maintainer", args...)
		l := srv.local(t, args...)
		if r.code != 0 || r.out != l.out {
			t.Errorf("%q: remote and local read differ\nremote: %v\nlocal: %v", args, r, l)
		}
	}
}

func TestRemoteCLIRefusals(t *testing.T) {
	srv := startServer(t, "reviewer")
	env := []string{"TALLY_URL=" + srv.url, "TALLY_TOKEN=" + srv.tokens["reviewer"]}
	// A session exists from its first write; a read of one that does not is
	// refused (NoSuchSession).
	if r := run(t, runOpts{env: env}, "ls"); r.code != 1 || !strings.Contains(r.err, "no session") {
		t.Errorf("ls of a session not yet written: %v", r)
	}
	if r := run(t, runOpts{env: env}, "promise", "first", "--to", "a", "--until", "2030-01-01T00:00:00Z"); r.code != 0 {
		t.Fatalf("first write: %v", r)
	}
	cases := []struct {
		env  []string
		args []string
		exit int
		err  string
	}{
		{env, []string{"init", "--dir", t.TempDir()}, 2, "local ledger directory only"},
		{env, []string{"watch", "--once"}, 2, "local ledger directory only"},
		{env, []string{"export", "--format", "csv"}, 2, "format"},
		{env, []string{"ls", "--dir", srv.dir}, 2, "--dir"},
		{env, []string{"ls", "--as", "someone-else"}, 0, ""}, // reads do not act
		{env, []string{"owed", "--as", "someone-else"}, 2, "not the token's identity"},
		{[]string{"TALLY_URL=" + srv.url, "TALLY_TOKEN=tally_bogus"}, []string{"ls"}, 1, "valid bearer token"},
		{[]string{"TALLY_URL=" + srv.url}, []string{"promise", "x", "--to", "a", "--until", "2h"}, 1, "valid bearer token"},
		{[]string{"TALLY_URL=http://127.0.0.1:1"}, []string{"ls"}, 1, "server http://127.0.0.1:1"},
		{append(env, "TALLY_TOKEN="+srv.tokens["reviewer"]), []string{"ls", "--session", "other/default"}, 1, "not found"},
	}
	for _, c := range cases {
		r := run(t, runOpts{env: c.env}, c.args...)
		if r.code != c.exit || !strings.Contains(r.err, c.err) {
			t.Errorf("want exit %d and %q on stderr: %v", c.exit, c.err, r)
		}
	}
	// In --json mode the server's error document is printed as is.
	r := run(t, runOpts{env: env}, "show", "nope", "--json")
	if r.code != 1 || !strings.HasPrefix(r.err, `{"schema_version":1,"error":`) || !strings.Contains(r.err, `"code":"not_found"`) {
		t.Errorf("show --json of an unknown id: %v", r)
	}
	// An idempotent retry answers the recorded response.
	args := []string{"promise", "once", "--id", "once", "--to", "a", "--until", "2030-01-01T00:00:00Z", "--request-id", "r-1", "--json"}
	r1 := run(t, runOpts{env: env}, args...)
	r2 := run(t, runOpts{env: env}, args...)
	if r1.code != 0 || r2.code != 0 || r1.out != r2.out {
		t.Errorf("retry with the same request id:\n%v\n%v", r1, r2)
	}
}
