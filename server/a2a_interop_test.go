package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/internal/proctest"
)

// a2aJS is @a2a-js/sdk@1.3.0: from TALLY_A2A_JS_DIR (a directory whose
// node_modules holds it, as .ci/run installs it) or installed with npm.
var a2aJS = proctest.NPM{Name: "@a2a-js/sdk", Version: "1.3.0", DirEnv: "TALLY_A2A_JS_DIR", Install: 90 * time.Second, What: "interop with @a2a-js/sdk"}

// runJS runs testdata/a2a-js/<script> under node beside the SDK's
// node_modules with env added, and fails the test when the script does.
func runJS(t *testing.T, node, dir, script string, env ...string) {
	t.Helper()
	proctest.Script{Node: node, Dir: dir, Path: filepath.Join("testdata", "a2a-js", script), Env: append(os.Environ(), env...), Timeout: 30 * time.Second}.Run(t)
}

// TestA2AInteropJS runs an independent client, @a2a-js/sdk@1.3.0 under
// node, against the server on 127.0.0.1 (testdata/a2a-js/interop.mjs).
func TestA2AInteropJS(t *testing.T) {
	node, dir := a2aJS.Find(t)
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
	node, dir := a2aJS.Find(t)
	for _, mode := range []string{"insecure-dev", "token"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t)
			env := []string{"TALLY_ROOT=" + f.ts.URL, "PROMISE_ID=js-stock-" + mode}
			if mode == "token" {
				tok, _, err := fileTokens(f.srv).Create("default", "reviewer", "agent", t0)
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
