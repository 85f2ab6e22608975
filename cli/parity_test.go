package cli

// The parity harness: one scenario run by cli.Main, in process, against a
// local ledger directory and through `tally serve`'s handler (an httptest
// server from the server package, on 127.0.0.1), step by step, comparing
// stdout, stderr and the exit code byte for byte (a --json error document
// is on stderr). Each family adds its scenarios in its own file
// (parity_promise_test.go, parity_claim_test.go, …) and runs them with
// runParity.

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/auth"
	"tally/server"
	"tally/sessionname"
	"tally/store"
)

// parityClock is the instant every scenario starts at, on both sides.
var parityClock = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)

// sideClock is a side's clock, its CLI's and its server's ledger's; a
// step's at moves both sides' together.
type sideClock struct {
	mu sync.Mutex
	t  time.Time
}

func newSideClock() *sideClock { return &sideClock{t: parityClock} }

func (c *sideClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *sideClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// parityStep is one command line of a scenario.
type parityStep struct {
	// as is the acting identity: TALLY_ACTOR on both sides and, over a
	// server with tokens, the token of that identity too ("" for none).
	as    string
	args  []string
	stdin string
	// exit is the exit code both sides must give.
	exit ExitCode
	// do, when set, runs on each side instead of a command line: a write
	// no verb makes (a lapse the timekeeper commits).
	do func(t *testing.T, side *paritySide)
	// at, when set, moves the clock of both sides to it for this step and
	// those after.
	at time.Time
}

// parityScenario is a sequence of steps on one fresh ledger each side.
type parityScenario struct {
	name string
	// tokens are the identities the server knows with their roles; nil
	// runs the server with --insecure-dev (each request names its identity).
	tokens map[string]string
	// files are written to the working directory of both sides first.
	files map[string]string
	steps []parityStep
}

// step is a parityStep as who running args, expecting exit.
func step(who string, exit ExitCode, args ...string) parityStep {
	return parityStep{as: who, args: args, exit: exit}
}

// paritySide is one side of a scenario: how each step's process is set up.
type paritySide struct {
	name   string
	root   string // its ledger directory
	env    map[string]string
	tokens map[string]string // identity → secret, over a server with tokens
	work   string
	clock  *sideClock
}

func (p *paritySide) run(s parityStep) (ExitCode, string, string) {
	env := map[string]string{}
	for k, v := range p.env {
		env[k] = v
	}
	if s.as != "" {
		env["TALLY_ACTOR"] = s.as
		if tok, ok := p.tokens[s.as]; ok {
			env["TALLY_TOKEN"] = tok
		}
	}
	var out, errb bytes.Buffer
	st := testStreams(&out, &errb, env)
	st.In = strings.NewReader(s.stdin)
	st.Cwd = p.work
	st.Now = p.clock.now
	code := Main(s.args, st)
	return code, out.String(), errb.String()
}

// runParity runs each scenario on a local ledger and through a server and
// fails on the first step whose output or exit code differs, or whose
// exit code is not the step's.
func runParity(t *testing.T, scenarios []parityScenario) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			work := parityWork(t, sc) // one for both sides: messages name its files
			local, remote := localSide(t, work), remoteSide(t, sc, work)
			for i, s := range sc.steps {
				if !s.at.IsZero() {
					local.clock.set(s.at)
					remote.clock.set(s.at)
				}
				if s.do != nil {
					s.do(t, local)
					s.do(t, remote)
					continue
				}
				lbefore, rbefore := sessionLogs(t, local.root), sessionLogs(t, remote.root)
				lc, lout, lerr := local.run(s)
				rc, rout, rerr := remote.run(s)
				where := func() string {
					return strings.Join(s.args, " ") + " (step " + strconv.Itoa(i+1) + ", as " + s.as + ")"
				}
				if lc != s.exit || rc != s.exit {
					t.Fatalf("%s: exit %d locally, %d through the server, want %d\nlocal stdout: %s\nlocal stderr: %s\nserver stdout: %s\nserver stderr: %s", where(), lc, rc, s.exit, lout, lerr, rout, rerr)
				}
				if lout != rout {
					t.Fatalf("%s: stdout differs\nlocal:\n%s\nthrough the server:\n%s", where(), lout, rout)
				}
				if lerr != rerr {
					t.Fatalf("%s: stderr differs\nlocal:\n%s\nthrough the server:\n%s", where(), lerr, rerr)
				}
				// A refusal appends nothing, on either side.
				if s.exit != ExitOK {
					if after := sessionLogs(t, local.root); after != lbefore {
						t.Fatalf("%s: refused, but the local logs changed", where())
					}
					if after := sessionLogs(t, remote.root); after != rbefore {
						t.Fatalf("%s: refused, but the server's logs changed", where())
					}
				}
			}
		})
	}
}

// sessionLogs is every session log under root that holds a line, path and
// bytes, in path order: what a refusal must leave as it was. (An empty log
// counts as none: the CLI opens a session's log before it decides.)
func sessionLogs(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "log.jsonl" { // store's log file
			return err
		}
		data, err := os.ReadFile(path)
		if len(data) > 0 {
			fmt.Fprintf(&b, "%s %d\n%s", path, len(data), data)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// localSide is a fresh ledger directory, named by TALLY_DIR.
func localSide(t *testing.T, work string) *paritySide {
	t.Helper()
	root := filepath.Join(t.TempDir(), "ledger")
	if err := store.Init(root); err != nil {
		t.Fatal(err)
	}
	return &paritySide{name: "local", root: root, env: map[string]string{"TALLY_DIR": root}, work: work, clock: newSideClock()}
}

// remoteSide is a fresh server over its own ledger directory, named by
// TALLY_URL: with the scenario's tokens, or --insecure-dev without.
func remoteSide(t *testing.T, sc parityScenario, work string) *paritySide {
	t.Helper()
	root := filepath.Join(t.TempDir(), "served")
	if err := store.Init(root); err != nil {
		t.Fatal(err)
	}
	p := &paritySide{name: "server", root: root, tokens: map[string]string{}, work: work, clock: newSideClock()}
	tokens := auth.Open(root)
	for who, role := range sc.tokens {
		tok, _, err := tokens.Create(sessionname.DefaultTenant, who, role, parityClock)
		if err != nil {
			t.Fatal(err)
		}
		p.tokens[who] = tok
	}
	cfg := server.DefaultConfig()
	cfg.Root = root
	cfg.Insecure = sc.tokens == nil
	cfg.WatchEvery = 0
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Ledger.Logger = cfg.Logger
	cfg.Ledger.Now = p.clock.now
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler()) // 127.0.0.1
	t.Cleanup(func() { ts.Close(); s.Close() })
	p.env = map[string]string{"TALLY_URL": ts.URL}
	return p
}

// parityWork is a working directory holding the scenario's files.
func parityWork(t *testing.T, sc parityScenario) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range sc.files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
