// Package proctest runs the external programs tests drive: scripts under
// node beside an npm package (an independent client, a browser driver) and
// a `tally serve` binary on a loopback port.
package proctest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// NPM names an npm package a test runs scripts against.
type NPM struct {
	Name    string // the package, e.g. "@a2a-js/sdk"
	Version string // the version installed when DirEnv is unset
	// DirEnv names the variable holding a directory whose node_modules
	// already has the package (CI installs it there).
	DirEnv string
	// Install bounds `npm install` when DirEnv is unset.
	Install time.Duration
	// What prefixes every skip or failure, e.g. "interop with @a2a-js/sdk".
	What string
}

// Skip skips the test with the reason, except under CI, where a missing
// tool is a failure: CI installs them, so the test must run there.
func Skip(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" && !testing.Short() {
		t.Fatalf(format+" (CI must run this test, not skip it)", args...)
	}
	t.Skipf(format, args...)
}

// Find returns node and a directory whose node_modules holds the package:
// the one p.DirEnv names, or a temporary one npm installs it into. Without
// node, npm or the network it skips (see Skip); in -short mode it skips.
func (p NPM) Find(t testing.TB) (node, dir string) {
	t.Helper()
	if testing.Short() {
		t.Skip(p.What + ": skipped in -short mode")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		Skip(t, "%s: node is not installed", p.What)
	}
	dir = os.Getenv(p.DirEnv)
	if dir == "" {
		npm, err := exec.LookPath("npm")
		if err != nil {
			Skip(t, "%s: npm is not installed, and %s is not set", p.What, p.DirEnv)
		}
		dir = t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), p.Install)
		defer cancel()
		spec := p.Name + "@" + p.Version
		if out, err := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", dir, spec).CombinedOutput(); err != nil {
			Skip(t, "%s: npm install %s failed (no network?): %v\n%s", p.What, spec, err, out)
		}
	}
	manifest := filepath.Join(append([]string{dir, "node_modules"}, append(strings.Split(p.Name, "/"), "package.json")...)...)
	if _, err := os.Stat(manifest); err != nil {
		Skip(t, "%s: %s is not installed in %s", p.What, p.Name, dir)
	}
	return node, dir
}

// Script is one run of a script under node.
type Script struct {
	Node, Dir string        // from NPM.Find
	Path      string        // the script, e.g. testdata/a2a-js/interop.mjs
	Env       []string      // the whole environment the script gets
	Timeout   time.Duration // after which node is killed
	// Lib names the modules of the script's own that it imports by a
	// relative path (e.g. ./page.mjs), copied beside it.
	Lib []string
}

// Run copies the script (and its Lib) into a directory of its own under
// dir, so that its package imports resolve in dir's node_modules, runs it
// under node in dir, logs its output and returns it; it fails the test
// when the script does.
func (s Script) Run(t testing.TB) []byte {
	t.Helper()
	name := filepath.Base(s.Path)
	// The pid keeps runs sharing one directory from overwriting each other.
	at, err := os.MkdirTemp(s.Dir, fmt.Sprintf("tally-%d-", os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(at) })
	for _, p := range append([]string{s.Path}, s.Lib...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(at, filepath.Base(p)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := filepath.Join(at, name)
	ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Node, run)
	cmd.Dir = s.Dir
	cmd.Env = s.Env
	out, err := cmd.CombinedOutput()
	t.Logf("node %s:\n%s", name, out)
	if err != nil {
		t.Fatalf("%s failed: %v", name, err)
	}
	return out
}
