package main

// End-to-end tests: TestMain builds the real tally binary, tally-server
// beside it (which tally runs for serve, mcp, cluster, backup and restore)
// and the crash child once; every test runs them as separate processes
// against its own ledger in t.TempDir().

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

var torture = flag.Bool("torture", false, "run the crash test for 100 rounds instead of 20")

var (
	tallyBin string // the built tally binary
	crashBin string // the built crash child
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "tally-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: ", err)
		os.Exit(1)
	}
	tallyBin = filepath.Join(dir, "tally")
	crashBin = filepath.Join(dir, "crashchild")
	if err := goBuild(tallyBin, "tally/cmd/tally"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build tally:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	if err := goBuild(filepath.Join(dir, "tally-server"), "tally/cmd/tally-server"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build tally-server:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	if err := goBuild(crashBin, "tally/cmd/tally/internal/crashchild"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build crash child:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func goBuild(out, pkg string) error {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", out, pkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%v: %s", err, stderr.String())
	}
	return nil
}

// result is what one run of the binary did.
type result struct {
	args []string
	code int
	out  string
	err  string
}

func (r result) String() string {
	return fmt.Sprintf("tally %q: exit %d\nstdout: %s\nstderr: %s", r.args, r.code, r.out, r.err)
}

// runOpts are the extras of one run.
type runOpts struct {
	stdin string
	env   []string // added after a clean environment
	cwd   string
}

// baseEnv is the test process's environment without anything that would
// change which ledger or identity tally uses.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TALLY_") || strings.HasPrefix(kv, "NO_COLOR=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "NO_COLOR=1")
}

func run(t testing.TB, o runOpts, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, tallyBin, args...)
	cmd.Env = append(baseEnv(), o.env...)
	cmd.Dir = o.cwd
	if o.stdin != "" {
		cmd.Stdin = strings.NewReader(o.stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{args: args, out: stdout.String(), err: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		r.code = ee.ExitCode()
	default:
		t.Fatalf("tally %q did not run to an exit: %v (stderr %s)", args, err, stderr.String())
	}
	return r
}

// led is one ledger directory under test.
type led struct {
	t   testing.TB
	dir string
}

// newLedger makes and inits a fresh ledger directory.
func newLedger(t testing.TB) *led {
	t.Helper()
	l := &led{t: t, dir: filepath.Join(t.TempDir(), "ledger")}
	r := run(t, runOpts{}, "init", "--dir", l.dir)
	if r.code != 0 {
		t.Fatalf("init: %v", r)
	}
	return l
}

func (l *led) sessionDir() string { return filepath.Join(l.dir, "sessions", "default", "default") }
func (l *led) logPath() string    { return filepath.Join(l.sessionDir(), "log.jsonl") }
func (l *led) cpPath() string     { return filepath.Join(l.sessionDir(), "checkpoint") }

// run runs tally against this ledger.
func (l *led) run(args ...string) result {
	l.t.Helper()
	return run(l.t, runOpts{}, append([]string{"--dir", l.dir}, args...)...)
}

func (l *led) runWith(o runOpts, args ...string) result {
	l.t.Helper()
	return run(l.t, o, append([]string{"--dir", l.dir}, args...)...)
}

// must runs tally and fails the test unless it exits 0; it returns stdout.
func (l *led) must(args ...string) string {
	l.t.Helper()
	r := l.run(args...)
	if r.code != 0 {
		l.t.Fatalf("want exit 0: %v", r)
	}
	return r.out
}

// logBytes is the session log's content (nil when it does not exist yet).
func (l *led) logBytes() []byte {
	l.t.Helper()
	b, err := os.ReadFile(l.logPath())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		l.t.Fatal(err)
	}
	return b
}

func (l *led) writeLog(b []byte) {
	l.t.Helper()
	if err := os.WriteFile(l.logPath(), b, 0o644); err != nil {
		l.t.Fatal(err)
	}
}

// logLines splits the log into its lines, without newlines.
func (l *led) logLines() [][]byte {
	b := l.logBytes()
	if len(b) == 0 {
		return nil
	}
	return bytes.Split(bytes.TrimSuffix(b, []byte{'\n'}), []byte{'\n'})
}

// decode parses a JSON document, failing the test if it is not one.
func decode(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, s)
	}
	if dec.More() {
		t.Fatalf("more than one JSON document:\n%s", s)
	}
	return m
}

// promisesOf returns the "promises" list of an ls/export --json document by id.
func promisesOf(t testing.TB, doc string) (ids []string, byID map[string]map[string]any) {
	t.Helper()
	m := decode(t, doc)
	list, ok := m["promises"].([]any)
	if !ok {
		t.Fatalf("no promises list in %s", doc)
	}
	byID = map[string]map[string]any{}
	for _, e := range list {
		p := e.(map[string]any)
		id := p["id"].(string)
		ids = append(ids, id)
		byID[id] = p
	}
	return ids, byID
}

// lineRef matches "line N" exactly (not line N0).
func lineRef(n int) *regexp.Regexp { return regexp.MustCompile(fmt.Sprintf(`\bline %d\b`, n)) }

// envelopeSeq returns tally.seq of a log line.
func envelopeSeq(t testing.TB, line []byte) uint64 {
	t.Helper()
	var m struct {
		Tally struct {
			Seq uint64 `json:"seq"`
		} `json:"tally"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("log line is not JSON: %v: %s", err, line)
	}
	return m.Tally.Seq
}

// body strips tally's envelope from a log line, giving back the record as it
// was written by its author.
func body(t testing.TB, line []byte) []byte {
	t.Helper()
	i := bytes.LastIndex(line, []byte(`"tally":{"v":`))
	if i < 0 {
		t.Fatalf("no envelope in %s", line)
	}
	b := bytes.TrimRight(line[:i], ",")
	return append(append([]byte(nil), b...), '}')
}
