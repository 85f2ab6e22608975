package mcp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/internal/proctest"
)

// The tools the interop test expects, as TOOL/ACTION.
var interopTools = []string{
	"tally_promise/declare", "tally_promise/amend", "tally_promise/resolve", "tally_promise/assess",
	"tally_promise_read/show", "tally_promise_read/list",
	"tally_expect/raise", "tally_expect/supersede", "tally_expect/fact", "tally_expect/withdraw",
	"tally_expect_read/show", "tally_expect_read/list", "tally_expect_read/lapses",
	"tally_ledger/verify",
	"tally_claim/create", "tally_claim/post", "tally_claim/receipt.acquire", "tally_claim/artifact.publish",
	"tally_claim/testament.close", "tally_claim/testament.post", "tally_claim/testament.receive",
	"tally_claim/check.begin", "tally_claim/check.report", "tally_claim_read/show", "tally_claim/cancel",
	"tally_claim_read/artifact",
}

// mcpTS is the TypeScript SDK the interop test drives tally with, pinned:
// from TALLY_MCP_TS_DIR (a directory whose
// node_modules holds it, as .ci/run installs it) or installed with npm.
var mcpTS = proctest.NPM{Name: "@modelcontextprotocol/sdk", Version: "1.32.2", DirEnv: "TALLY_MCP_TS_DIR", Install: 3 * time.Minute, What: "interop with @modelcontextprotocol/sdk"}

// built is the tally binary the tests of this package run, built once.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// TestMain removes the binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// tallyBinary builds the tally binary, and tally-server beside it, which
// tally runs `tally mcp` with (once for the package's tests).
func tallyBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "tally-mcp-bin-"); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "tally")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if out, err := exec.CommandContext(ctx, "go", "build", "-o", built.dir, "tally/cmd/tally", "tally/cmd/tally-server").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("build tally: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// tally runs the binary and returns its stdout.
func tally(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tally %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// cleanEnv is the environment without the variables that choose a ledger
// or a server, so the test's own are the only ones.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TALLY_") {
			env = append(env, kv)
		}
	}
	return env
}

// runTS runs testdata/mcp-ts/<script> under node beside the SDK's
// node_modules, with env added to the environment without TALLY_ variables;
// it fails the test when the script does.
func runTS(t *testing.T, node, dir, script string, env ...string) {
	t.Helper()
	proctest.Script{Node: node, Dir: dir, Path: filepath.Join("testdata", "mcp-ts", script), Env: append(cleanEnv(), env...), Timeout: 2 * time.Minute}.Run(t)
}

// TestInteropTypeScript drives tally with the official TypeScript SDK:
// over stdio it launches `tally mcp` as each seat; over streamable HTTP
// it talks to `tally serve` with tokens, one of another tenant.
func TestInteropTypeScript(t *testing.T) {
	node, dir := mcpTS.Find(t)
	bin := tallyBinary(t)
	common := []string{"EXPECT_TOOLS=" + strings.Join(interopTools, ","), "CLAIMS=1"}

	t.Run("stdio", func(t *testing.T) {
		ledgerDir := filepath.Join(t.TempDir(), "ledger")
		tally(t, bin, "init", "--dir", ledgerDir)
		logPath := filepath.Join(ledgerDir, "sessions", "default", "default", "log.jsonl")
		runTS(t, node, dir, "interop.mjs", append(common, "MODE=stdio", "TALLY_BIN="+bin, "TALLY_DIR="+ledgerDir, "LOG_PATH="+logPath)...)
		checkLog(t, logPath, "desk/ship-91-stdio")
	})

	// Over streamable HTTP at /mcp, and as `tally mcp` with TALLY_URL (the
	// client): both act as the token's identity in its tenant.
	for _, mode := range []string{"http", "client"} {
		t.Run(mode, func(t *testing.T) {
			ledgerDir := filepath.Join(t.TempDir(), "ledger")
			tally(t, bin, "init", "--dir", ledgerDir)
			logPath := filepath.Join(ledgerDir, "sessions", "default", "default", "log.jsonl")
			env := append([]string{"MODE=" + mode, "TALLY_BIN=" + bin, "LOG_PATH=" + logPath}, common...)
			for _, tok := range []struct{ tenant, who string }{{"default", "reviewer"}, {"default", "author"}, {"default", "stranger"}, {"default", "maintainer"}, {"default", "parser"}, {"globex", "foreign"}} {
				secret := tally(t, bin, "token", "create", "--dir", ledgerDir, "--tenant", tok.tenant, "--participant", tok.who)
				env = append(env, "TOKEN_"+strings.ToUpper(tok.who)+"="+secret)
			}
			url := serve(t, bin, ledgerDir)
			runTS(t, node, dir, "interop.mjs", append(env, "MCP_URL="+url+"/mcp", "TALLY_URL="+url)...)
			checkLog(t, logPath, "desk/ship-91-"+mode)
			if _, err := os.Stat(filepath.Join(ledgerDir, "sessions", "globex", "default", "log.jsonl")); err == nil {
				t.Error("the foreign tenant's calls created a log")
			}
		})
	}
}

// checkLog checks the promise's lifecycle is in the log once, and verified.
func checkLog(t *testing.T, path, id string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	for _, typ := range []string{"promise", "amend", "assess", "resolve"} {
		field := "promise"
		if typ == "promise" {
			field = "id"
		}
		if n := strings.Count(log, `"type":"`+typ+`","`+field+`":"`+id+`"`); n != 1 {
			t.Errorf("%s %s recorded %d times:\n%s", typ, id, n, log)
		}
	}
}

// serve runs `tally serve` on a free loopback port until the test ends and
// returns its URL.
func serve(t *testing.T, bin, dir string) string {
	t.Helper()
	url, _ := proctest.Serve(t, bin, cleanEnv(), io.Discard, "--dir", dir)
	return url
}

// `tally mcp` whose stdin closes in the middle of a call's line exits 1
// at once saying so, having appended nothing; one without an actor refuses to start
// (exit 2), naming how to set it.
func TestBinaryStdinClosedMidCall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := tallyBinary(t)
	dir := filepath.Join(t.TempDir(), "ledger")
	tally(t, bin, "init", "--dir", dir)

	cmd := exec.Command(bin, "mcp")
	cmd.Env = append(cleanEnv(), "TALLY_DIR="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil || cmd.ProcessState.ExitCode() != 2 || !strings.Contains(stderr.String(), "actor: required") {
		t.Fatalf("without an actor: %v %q", err, stderr.String())
	}

	cmd = exec.Command(bin, "mcp")
	cmd.Env = append(cleanEnv(), "TALLY_DIR="+dir, "TALLY_ACTOR=reviewer")
	stderr.Reset()
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`+"\n")
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"serverInfo"`) {
		t.Fatalf("initialize: %q", sc.Text())
	}
	io.WriteString(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	io.WriteString(in, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"tally_promise/declare","arguments":{"promise":"half`)
	in.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(stderr.String(), "stdin: closed in the middle of a message, which was not run") {
			t.Fatalf("tally mcp exited: %v %q", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("tally mcp did not exit when stdin closed")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "sessions", "default", "default", "log.jsonl")); len(b) != 0 {
		t.Fatalf("a half-read call appended: %s", b)
	}
}
