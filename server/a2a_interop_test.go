package server

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// a2aJS finds node and @a2a-js/sdk@1.3.0: installed with npm into a
// temporary directory, or taken from TALLY_A2A_JS_DIR (a directory whose
// node_modules holds it). It skips the test, with the reason, when node,
// npm or the network is missing, except under CI.
func a2aJS(t *testing.T) (node, dir string) {
	t.Helper()
	// CI installs node and the SDK (.ci/run), so there a missing piece is a
	// failure, never a skip.
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") != "" && !testing.Short() {
			t.Fatalf(format+" (CI must run this test, not skip it)", args...)
		}
		t.Skipf(format, args...)
	}
	if testing.Short() {
		t.Skip("interop with @a2a-js/sdk: skipped in -short mode")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skip("interop with @a2a-js/sdk: node is not installed")
	}
	dir = os.Getenv("TALLY_A2A_JS_DIR")
	if dir == "" {
		npm, err := exec.LookPath("npm")
		if err != nil {
			skip("interop with @a2a-js/sdk: npm is not installed")
		}
		dir = t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", dir, "@a2a-js/sdk@1.3.0")
		if out, err := cmd.CombinedOutput(); err != nil {
			skip("interop with @a2a-js/sdk: npm install failed (no network?): %v\n%s", err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
		skip("interop with @a2a-js/sdk: not installed in %s", dir)
	}
	return node, dir
}

// runJS runs testdata/a2a-js/<script> under node beside the SDK's
// node_modules (so its imports resolve there) with env added, and fails
// the test when the script does.
func runJS(t *testing.T, node, dir, script string, env ...string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "a2a-js", script))
	if err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "tally-"+script)
	if err := os.WriteFile(run, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(run) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, run)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("node %s:\n%s", script, out)
	if err != nil {
		t.Fatalf("%s failed: %v", script, err)
	}
}

// TestA2AInteropJS runs an independent client, @a2a-js/sdk@1.3.0 under
// node, against the server on 127.0.0.1 (testdata/a2a-js/interop.mjs).
func TestA2AInteropJS(t *testing.T) {
	node, dir := a2aJS(t)
	f := newFixture(t)
	if !strings.HasPrefix(f.ts.URL, "http://127.0.0.1:") {
		t.Fatalf("test server is not on 127.0.0.1: %s", f.ts.URL)
	}
	runJS(t, node, dir, "interop.mjs", "A2A_BASE="+f.ts.URL+a2aBase, "TALLY_TOKEN="+f.tokens["reviewer"])
	log := string(f.logBytes())
	for _, id := range []string{"js-jsonrpc", "js-httpjson"} {
		if strings.Count(log, `"type":"promise","id":"`+id+`"`) != 1 {
			t.Fatalf("promise %s not recorded once: %s", id, log)
		}
	}
	// A claim is counted by the lines it starts: the recorded answer that
	// follows it quotes it among its records.
	for _, id := range []string{"js-claim-jsonrpc", "js-claim-httpjson"} {
		n := 0
		for _, line := range strings.Split(log, "\n") {
			if strings.HasPrefix(line, `{"ts":"`+t0.Format(time.RFC3339)+`","type":"claim.create","claim":"`+id+`","claimant":"reviewer"`) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("claim %s recorded %d times: %s", id, n, log)
		}
	}
}

// TestA2AStockClientJS: @a2a-js/sdk as it comes, given only the server's
// URL (testdata/a2a-js/stock.mjs): it reads the root card, which names the
// default session's agent, and declares, reads back and misses a task
// there; once on a server without tokens (--insecure-dev, no tally header
// sent at all) and once with a token passed by a call interceptor.
func TestA2AStockClientJS(t *testing.T) {
	node, dir := a2aJS(t)
	for _, mode := range []string{"insecure-dev", "token"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t)
			env := []string{"TALLY_ROOT=" + f.ts.URL, "PROMISE_ID=js-stock-" + mode}
			if mode == "token" {
				tok, _, err := f.srv.tokens.Create("default", "reviewer", "agent", t0)
				if err != nil {
					t.Fatal(err)
				}
				env = append(env, "TALLY_TOKEN="+tok)
			} else {
				f.srv.cfg.Insecure = true
			}
			runJS(t, node, dir, "stock.mjs", env...)
			log, _ := os.ReadFile(filepath.Join(f.root, "sessions", "default", "default", "log.jsonl"))
			if strings.Count(string(log), `"type":"promise","id":"js-stock-`+mode+`","promise":"hand back a reviewed schema","by":"reviewer"`) != 1 {
				t.Fatalf("promise not recorded once in default/default: %s", log)
			}
		})
	}
}
