package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// readmeBlock returns the first ```sh block after the README heading that
// starts with heading.
func readmeBlock(t *testing.T, readme, heading string) string {
	t.Helper()
	i := strings.Index(readme, "\n"+heading)
	if i < 0 {
		t.Fatalf("README has no heading %q", heading)
	}
	rest := readme[i:]
	start := strings.Index(rest, "\n```sh\n")
	if start < 0 {
		t.Fatalf("README section %q has no sh block", heading)
	}
	rest = rest[start+len("\n```sh\n"):]
	end := strings.Index(rest, "\n```")
	if end < 0 {
		t.Fatalf("README section %q: unterminated block", heading)
	}
	return rest[:end+1]
}

// TestREADMEExamplesRun runs the README's promise, claim and expectation
// examples, as written, in one shell on a fresh directory with the built
// tally first on PATH: the test fails when the README drifts from what
// tally does.
func TestREADMEExamplesRun(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	dir := t.TempDir()
	script := "set -ex\n"
	for _, h := range []string{"## Verbs", "## Claims", "## Expectations"} {
		script += "# " + h + "\n" + readmeBlock(t, readme, h)
	}
	// What the blocks left, for the checks below.
	script += "tally claim show C17 --json > c17.json\ntally expect show exp-arrive-2 --json > arrive2.json\n"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), "PATH="+filepath.Dir(tallyBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("the README's examples fail: %v\n%s", err, out.String())
	}
	read := func(name string) map[string]any {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return decode(t, string(b))
	}
	if c := read("c17.json")["claim"].(map[string]any); c["state"] != "Satisfied" {
		t.Errorf("the README's claim C17 is %v, not Satisfied", c["state"])
	}
	// The extension's --due is the due in force (an inherited anchor would
	// have kept the re-anchored one, a few hours from now).
	v := read("arrive2.json")["expectation"].(map[string]any)
	due, err := time.Parse(time.RFC3339, v["currentDue"].(string))
	if err != nil || time.Until(due) < 20*time.Hour || v["anchor"] != nil {
		t.Errorf("exp-arrive-2 after `supersede --due 1d`: %v", v)
	}
	if !strings.Contains(out.String(), "exp-customs") || !strings.Contains(out.String(), "withdrew exp-arrive-2") {
		t.Errorf("the README's lapses and task outcome did not show:\n%s", out.String())
	}
}
