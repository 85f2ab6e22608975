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

// TestA2AInteropJS runs an independent client, @a2a-js/sdk@1.3.0 under
// node, against the server on 127.0.0.1 (testdata/a2a-js/interop.mjs). The
// SDK is installed with npm into a temporary directory, or taken from
// TALLY_A2A_JS_DIR (a directory whose node_modules holds it). Skipped, with
// the reason, when node, npm or the network is missing.
func TestA2AInteropJS(t *testing.T) {
	if testing.Short() {
		t.Skip("interop with @a2a-js/sdk: skipped in -short mode")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("interop with @a2a-js/sdk: node is not installed")
	}
	dir := os.Getenv("TALLY_A2A_JS_DIR")
	if dir == "" {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Skip("interop with @a2a-js/sdk: npm is not installed")
		}
		dir = t.TempDir()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--no-save", "--prefix", dir, "@a2a-js/sdk@1.3.0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("interop with @a2a-js/sdk: npm install failed (no network?): %v\n%s", err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
		t.Skipf("interop with @a2a-js/sdk: not installed in %s", dir)
	}
	script, err := os.ReadFile(filepath.Join("testdata", "a2a-js", "interop.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	// The script sits beside node_modules so its imports resolve there.
	run := filepath.Join(dir, "tally-a2a-interop.mjs")
	if err := os.WriteFile(run, script, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(run) })

	f := newFixture(t)
	if !strings.HasPrefix(f.ts.URL, "http://127.0.0.1:") {
		t.Fatalf("test server is not on 127.0.0.1: %s", f.ts.URL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, run)
	cmd.Env = append(os.Environ(), "A2A_BASE="+f.ts.URL+a2aBase, "TALLY_TOKEN="+f.tokens["reviewer"])
	out, err := cmd.CombinedOutput()
	t.Logf("node:\n%s", out)
	if err != nil {
		t.Fatalf("interop client failed: %v", err)
	}
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
