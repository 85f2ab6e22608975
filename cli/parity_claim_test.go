package cli

import (
	"bytes"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/digest"
	"tally/server"
	"tally/store"
)

// claimParity runs the claims family's verbs twice, step by step: on a
// ledger directory of its own (Local) and through a server on another
// (the client), both at the same clock, so every answer must be the same
// byte for byte.
type claimParity struct {
	t     *testing.T
	work  string // the working directory both run in (the files they read)
	local string // the local ledger directory
	url   string // the server's, on a ledger directory of its own
	root  string // the server's ledger directory
	clock time.Time
}

func newClaimParity(t *testing.T) *claimParity {
	t.Helper()
	p := &claimParity{t: t, work: t.TempDir(), local: filepath.Join(t.TempDir(), "local"), root: filepath.Join(t.TempDir(), "server"),
		clock: time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)}
	for _, dir := range []string{p.local, p.root} {
		var out, errb bytes.Buffer
		s := testStreams(&out, &errb, nil)
		s.Now = func() time.Time { return p.clock }
		if code := Main([]string{"init", "--dir", dir}, s); code != ExitOK {
			t.Fatalf("init %s: %d %s", dir, code, errb.String())
		}
	}
	cfg := server.DefaultConfig()
	cfg.Root, cfg.Insecure, cfg.WatchEvery = p.root, true, 0
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Ledger.Now = func() time.Time { return p.clock }
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	p.url = hs.URL
	return p
}

// file writes a file both runs read.
func (p *claimParity) file(name, content string) {
	p.t.Helper()
	if err := os.WriteFile(filepath.Join(p.work, name), []byte(content), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// run runs tally as who, locally (remote false) or through the server.
func (p *claimParity) run(remote bool, who, stdin string, args []string) (ExitCode, string, string) {
	var out, errb bytes.Buffer
	env := map[string]string{"TALLY_DIR": p.local, "TALLY_ACTOR": who}
	if remote {
		env = map[string]string{"TALLY_URL": p.url, "TALLY_ACTOR": who}
	}
	s := testStreams(&out, &errb, env)
	s.In, s.Cwd = strings.NewReader(stdin), p.work
	s.Now = func() time.Time { return p.clock }
	code := Main(args, s)
	return code, out.String(), errb.String()
}

// damage overwrites the stored copy of content in both ledgers.
func (p *claimParity) damage(content string) {
	p.t.Helper()
	cd := digest.HashContent([]byte(content))
	for _, root := range []string{p.local, p.root} {
		path := filepath.Join(store.ObjectsDir(root), cd.String()[:2], cd.String()[2:])
		if err := os.Chmod(path, 0o644); err != nil {
			p.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("tampered\n"), 0o644); err != nil {
			p.t.Fatal(err)
		}
	}
}

// claimStep is one row of the claims family's parity table: a command as
// who, with its stdin, and the exit code it must have on both.
type claimStep struct {
	who   string
	args  string // split on spaces; an argument with spaces has ~ for them
	stdin string
	code  ExitCode
	// before, when set, runs before the step (on both ledgers).
	before func(p *claimParity)
}

func (s claimStep) argv() []string {
	f := strings.Fields(s.args)
	for i := range f {
		f[i] = strings.ReplaceAll(f[i], "~", " ")
	}
	return f
}

// TestClaimParity: every claim verb and every refusal, on a local ledger
// and through a server, answers the same: exit code, stdout and stderr
// (--json documents and error documents included), byte for byte.
func TestClaimParity(t *testing.T) {
	p := newClaimParity(t)
	p.file("patch.txt", "fixed escape\n")
	p.file("patch2.txt", "bounds checked\n")
	p.file("review.md", "looks right\n")
	p.file("bad.json", `{"claim":"C9","respondent":"parser","work":"w","bogus":1}`)
	const m, parser, outsider = "maintainer", "parser", "outsider"
	create := "claim create C1 --respondent parser --work reject~incomplete~escapes --check change/behavior:validator=command@1 " +
		"--check change/review:validator=review@1,phases=quality --deadline 2026-09-03T00:00:00Z"
	steps := []claimStep{
		// create, and its refusals
		{who: m, args: create, code: ExitOK},
		{who: m, args: create + " --json", code: ExitError},                                            // the id is taken: conflict
		{who: m, args: "claim create C9 --respondent parser --work w --check x/y:validator=", code: 2}, // no validator
		{who: m, args: "claim create -", stdin: `{"claim":"C9","respondent":"parser","work":"w","bogus":1}`, code: 2},
		{who: m, args: "claim create - --json", stdin: `{"claim":"C9","respondent":"parser","work":"w","bogus":1}`, code: 2},
		{who: m, args: "claim create C9 --respondent parser --work w --deadline soon --json", code: 2},
		{who: m, args: "claim create C9 --respondent parser --work w --predecessor C99 --json", code: ExitError},
		// post, receipt, progress
		{who: parser, args: "claim post C1 --json", code: ExitError}, // only the claimant posts
		{who: m, args: "claim post C1", code: ExitOK},
		{who: m, args: "claim post C1 --json", code: ExitError}, // posted already
		{who: outsider, args: "receipt acquire C1 --json", code: ExitError},
		{who: parser, args: "receipt acquire C1", code: ExitOK},
		{who: parser, args: "progress C1 --generation 2 --note half --json", code: ExitError}, // a stale generation
		{who: parser, args: "progress C1 --generation 1 --note half~way", code: ExitOK},
		{who: parser, args: "progress C99 --generation 1 --note x --json", code: ExitError},
		// artifacts
		{who: parser, args: "artifact put patch.txt --claim C1 --slot change --generation 1 --kind patch --id pa", code: ExitOK},
		{who: parser, args: "artifact put patch2.txt --claim C1 --slot change --generation 1 --id pb --request-id put-b --json", code: ExitOK},
		{who: parser, args: "artifact put patch2.txt --claim C1 --slot change --generation 1 --id pb --request-id put-b --json", code: ExitOK},   // a retry
		{who: parser, args: "artifact put patch.txt --claim C1 --slot change --generation 1 --id pb --request-id put-b --json", code: ExitError}, // other bytes
		{who: parser, args: "artifact put missing.txt --claim C1 --id px", code: 2},
		{who: parser, args: "artifact put patch.txt --claim C1 --slot nope --generation 1 --id px --json", code: ExitError},
		{who: outsider, args: "artifact put patch.txt --claim C1 --slot change --generation 1 --id px --json", code: ExitError},
		{who: parser, args: "artifact put patch.txt --id px", code: 2}, // no claim
		// testaments
		{who: parser, args: "testament close C1 --id T1 --generation 1 --summary s --bind change=nope --json", code: ExitError},
		{who: parser, args: "testament close C1 --id T1 --generation 1 --outcome complete --summary length~check~added --confidence 0.9 --bind change=pa", code: ExitOK},
		{who: parser, args: "testament close C1 --id T2 --generation 1 --summary s --role x", code: 2},
		{who: m, args: "testament post C1 T1 --json", code: ExitError}, // only its author posts it
		{who: parser, args: "testament post C1 T1", code: ExitOK},
		{who: parser, args: "testament receive C1 T1 --json", code: ExitError}, // only the claimant receives
		{who: m, args: "testament receive C1 T1", code: ExitOK},
		{who: m, args: "testament post C1", code: 2},
		{who: m, args: "artifact receive C1 pa", code: ExitOK},
		{who: m, args: "artifact receive C1 nope --json", code: ExitError},
		{who: m, args: "artifact receive C1 pb --digest 0000 --json", code: 2},
		{who: m, args: "artifact receive C1 pb --digest " + strings.Repeat("0", 64) + " --json", code: ExitError},
		// reads
		{who: m, args: "claim show C1", code: ExitOK},
		{who: m, args: "claim show C1 --json", code: ExitOK},
		{who: m, args: "claim show C99 --json", code: ExitError},
		{who: m, args: "claim show C1 --now 2026-09-04T00:00:00Z", code: ExitOK}, // overdue
		{who: m, args: "claim ls", code: ExitOK},
		{who: m, args: "claim ls --open --json", code: ExitOK},
		{who: m, args: "claim ls --state Satisfied", code: ExitOK},
		{who: m, args: "claim ls --participant parser --json", code: ExitOK},
		{who: m, args: "claim graph", code: ExitOK},
		{who: m, args: "artifact ls", code: ExitOK},
		{who: m, args: "artifact ls --claim C1 --json", code: ExitOK},
		{who: m, args: "artifact ls --claim C99 --json", code: ExitError},
		{who: m, args: "artifact verify", code: ExitOK},
		{who: m, args: "artifact verify pa --claim C1 --json", code: ExitOK},
		{who: m, args: "artifact verify pa", code: 2},
		{who: m, args: "artifact get pa --claim C1", code: ExitOK},
		{who: m, args: "artifact get pa --claim C1 -o got.txt --json", code: ExitOK},
		{who: m, args: "artifact get " + digest.HashContent([]byte("fixed escape\n")).String(), code: ExitOK},
		{who: m, args: "artifact get " + digest.HashContent([]byte("never stored\n")).String() + " -o x.txt --json", code: ExitError},
		{who: m, args: "artifact get nope --claim C1 --json -o x.txt", code: ExitError},
		{who: m, args: "artifact get pa", code: 2},
		// checks, and their refusals
		{who: parser, args: "check begin behavior --claim C1 --artifact pa --json", code: ExitError}, // not the evaluator
		{who: m, args: "check begin nocheck --claim C1 --artifact pa --json", code: ExitError},
		{who: m, args: "check begin behavior --claim C1 --artifact nope --json", code: ExitError},
		{who: m, args: "check begin behavior --claim C1", code: 2}, // no artifact
		{who: parser, args: "check report review --claim C1 --artifact pa --result pass --evidence-file review.md --json", code: ExitError},
		{who: m, args: "check report review --claim C1 --artifact pa --result great --evidence-file review.md --json", code: 2},
		{who: m, args: "check report review --claim C1 --artifact pa --result pass --evidence-file missing.md", code: 2},
		{who: m, args: "check report review --claim C1 --artifact pa --result pass", code: 2}, // no evidence
		{who: m, args: "check report review --claim C99 --artifact pa --result pass --evidence e --json", code: ExitError},
		{who: m, args: "check report review --claim C1 --artifact pa --digest " + strings.Repeat("0", 64) + " --result pass --evidence-file review.md --json", code: ExitError}, // wrong digest
		{who: parser, args: "check run behavior --claim C1 --artifact pa --command true --json", code: ExitError},
		{who: m, args: "check run behavior --claim C1 --artifact pa", code: 2}, // the command validator needs --command
		{who: m, args: "check run review --claim C1 --artifact pa", code: 2},   // a validator this tally cannot run
		{who: m, args: "check run behavior --claim C1 --artifact pa --command grep~-q~fixed~patch.txt --request-id run-1", code: ExitOK},
		{who: m, args: "check run behavior --claim C1 --artifact pa --command grep~-q~fixed~patch.txt --request-id run-1", code: ExitOK}, // a retry
		{who: m, args: "check run behavior --claim C1 --artifact pa --command grep~-q~fixed~patch.txt --request-id run-1 --json", code: ExitOK},
		{who: m, args: "check run behavior --claim C1 --artifact pa --command true --request-id run-1 --json", code: ExitError}, // another run
		{who: m, args: "check begin review --claim C1 --artifact pa --request-id beg-1", code: ExitOK},
		{who: m, args: "check report review --claim C1 --artifact pa --result pass --evidence-file review.md --note fine --request-id rep-1", code: ExitOK},
		{who: m, args: "check report review --claim C1 --artifact pa --result pass --evidence-file review.md --note fine --request-id rep-1", code: ExitOK},
		{who: m, args: "check report review --claim C1 --artifact pa --result fail --evidence-file review.md --note fine --request-id rep-1 --json", code: ExitError},
		{who: m, args: "claim show C1", code: ExitOK},
		{who: m, args: "claim graph --format dot", code: ExitOK},
		// the ends of a claim: cancel, revoke, supersede, post failed, declined
		{who: m, args: "claim create C2 --respondent parser --work w --no-checks", code: ExitOK},
		{who: parser, args: "claim cancel C2 --reason r --json", code: ExitError}, // a stranger to the claimant's verb
		{who: m, args: "claim cancel C2 --reason not~needed", code: ExitOK},
		{who: m, args: "claim cancel C2 --reason again --json", code: ExitError},
		{who: m, args: "claim create C3 --respondent parser --work w --no-checks", code: ExitOK},
		{who: m, args: "claim post C3", code: ExitOK},
		{who: parser, args: "receipt acquire C3", code: ExitOK},
		{who: parser, args: "receipt adopt C3 --holder p2 --json", code: ExitError},
		{who: m, args: "receipt adopt C3 --holder p2 --reason parser~left", code: ExitOK},
		{who: parser, args: "progress C3 --generation 1 --note stale --json", code: ExitError}, // the old holder
		{who: m, args: "claim revoke C3 --reason slow", code: ExitOK},
		{who: m, args: "claim create C4 --respondent parser --work w --check out/behavior:validator=command@1", code: ExitOK},
		{who: m, args: "claim create C5 --predecessor C4 --respondent parser --work w2", code: ExitOK}, // inherits, says so
		{who: m, args: "claim supersede C4 --successor C3 --json", code: ExitError},
		{who: m, args: "claim supersede C4 --successor C5 --reason changed~terms", code: ExitOK},
		{who: m, args: "claim post C5 --failed --reason no~queue", code: ExitOK},
		{who: m, args: "claim create C6 --respondent parser --work w --no-checks --request-id c6", code: ExitOK},
		{who: m, args: "claim create C6 --respondent parser --work w --no-checks --request-id c6 --json", code: ExitOK},
		{who: m, args: "claim create C6 --respondent parser --work w2 --no-checks --request-id c6 --json", code: ExitError},
		{who: m, args: "claim post -", stdin: `{"claim":"C6"}`, code: ExitOK},
		{who: parser, args: "receipt acquire C6 --decline", code: 2}, // a decline needs a reason
		{who: parser, args: "receipt acquire - --json", stdin: `{"claim":"C6","decline":true,"reason":"busy"}`, code: ExitOK},
		{who: m, args: "testament close C1 --result --id R1 --summary behavior~passed --evidence " + evidenceID(m, "C1", "rep-1"), code: ExitOK},
		{who: m, args: "claim ls", code: ExitOK},
		{who: m, args: "claim graph --format json", code: ExitOK},
		// a damaged stored copy is refused, never served
		{who: m, args: "artifact verify --json", code: ExitError, before: func(p *claimParity) { p.damage("bounds checked\n") }},
		{who: m, args: "artifact get pb --claim C1 -o pb.txt --json", code: ExitError},
		{who: m, args: "check begin behavior --claim C1 --artifact pb --json", code: ExitError},
	}
	for i, s := range steps {
		if s.before != nil {
			s.before(p)
		}
		lc, lo, le := p.run(false, s.who, s.stdin, s.argv())
		rc, ro, re := p.run(true, s.who, s.stdin, s.argv())
		if lc != s.code || rc != s.code {
			t.Errorf("step %d %q as %q: want exit %d, got %d locally, %d through the server\nlocal:  %s%s\nserver: %s%s", i, s.args, s.who, s.code, lc, rc, lo, le, ro, re)
			continue
		}
		if lo != ro || le != re {
			t.Errorf("step %d %q as %q: the answers differ\nlocal stdout:  %q\nserver stdout: %q\nlocal stderr:  %q\nserver stderr: %q", i, s.args, s.who, lo, ro, le, re)
		}
	}
}
