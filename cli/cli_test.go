package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func testStreams(out, errb *bytes.Buffer, env map[string]string) Streams {
	return Streams{In: strings.NewReader(""), Out: out, Err: errb, Getenv: func(k string) string { return env[k] },
		Cwd: "/nonexistent", Now: func() time.Time { return time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC) }}
}

// TestUnknownVerbOfEveryGroup: every command group refuses a word that names
// none of its verbs with exit 2 and the closest verb, locally and with
// TALLY_URL set, and still prints its help when given no word.
func TestUnknownVerbOfEveryGroup(t *testing.T) {
	var groups []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() {
			groups = append(groups, c)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRoot(&global{}, nil))
	if len(groups) < 8 {
		t.Fatalf("found only %d command groups", len(groups))
	}
	for _, grp := range groups {
		path := strings.Fields(grp.CommandPath())[1:]
		verb := grp.Commands()[0].Name()
		typo := verb[:len(verb)-1] + "x" // one letter off a real verb
		for _, env := range []map[string]string{nil, {"TALLY_URL": "http://127.0.0.1:1"}} {
			var out, errb bytes.Buffer
			code := Main(append(append([]string{}, path...), typo), testStreams(&out, &errb, env))
			msg := errb.String()
			if code != ExitUsage || out.Len() != 0 || !strings.Contains(msg, `unknown command "`+typo+`" for "`+grp.CommandPath()+`"`) ||
				!strings.Contains(msg, "did you mean") || !strings.Contains(msg, `"`+verb+`"`) {
				t.Errorf("%s %s (env %v): exit %d, stdout %q, stderr %q", grp.CommandPath(), typo, env, code, out.String(), msg)
			}
			out.Reset()
			errb.Reset()
			if code := Main(path, testStreams(&out, &errb, env)); code != ExitOK || !strings.Contains(out.String(), "Usage:") {
				t.Errorf("%s alone (env %v): exit %d, stdout %q, stderr %q", grp.CommandPath(), env, code, out.String(), errb.String())
			}
		}
	}
}

// --consistency takes linearizable or stale, locally and through
// TALLY_URL; another value is a usage error (exit 2) before anything is
// asked of a server or a ledger. A token grant the core refuses is a usage
// error too, and writes no token.
func TestConsistencyAndTokenRefusals(t *testing.T) {
	for _, env := range []map[string]string{nil, {"TALLY_URL": "http://127.0.0.1:1"}} {
		var out, errb bytes.Buffer
		code := Main([]string{"--consistency", "eventual", "ls"}, testStreams(&out, &errb, env))
		if code != ExitUsage || out.Len() != 0 || !strings.Contains(errb.String(), `consistency: must be linearizable or stale, not "eventual"`) {
			t.Errorf("env %v: exit %d, stdout %q, stderr %q", env, code, out.String(), errb.String())
		}
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := Main([]string{"--dir", dir, "init"}, testStreams(&out, &errb, nil)); code != ExitOK {
		t.Fatalf("init: %d %s", code, errb.String())
	}
	for _, args := range [][]string{
		{"token", "create", "--tenant", "acme", "--participant", "p", "--role", "root"},
		{"token", "create", "--tenant", "*", "--participant", "p"},
		{"token", "create", "--tenant", "acme"},
	} {
		out.Reset()
		errb.Reset()
		code := Main(append([]string{"--dir", dir}, args...), testStreams(&out, &errb, nil))
		if code != ExitUsage || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
		if _, err := os.Stat(filepath.Join(dir, "tokens.jsonl")); !os.IsNotExist(err) {
			t.Fatalf("%v: a refused grant wrote the tokens file (%v)", args, err)
		}
	}
}
