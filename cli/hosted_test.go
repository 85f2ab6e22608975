package cli

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestStandInsRunTheCommandLine: each hosted verb hands the whole command
// line, global flags and its own (which the stand-in does not know) alike,
// to tally-server, with or without TALLY_URL, and its help too; a process
// that cannot run tally-server says so with exit 1.
func TestStandInsRunTheCommandLine(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--addr", "127.0.0.1:0", "--insecure-dev"},
		{"--dir", "/tmp/x", "serve", "--cluster", "--node-id", "1"},
		{"mcp"},
		{"cluster", "status", "--node", "127.0.0.1:7420", "--json"},
		{"backup", "verify", "a.backup"},
		{"restore", "a.backup", "--data", "d"},
		{"serve", "--help"},
		{"help", "cluster"},
	} {
		for _, env := range []map[string]string{nil, {"TALLY_URL": "http://127.0.0.1:1"}} {
			var out, errb bytes.Buffer
			io := testStreams(&out, &errb, env)
			var got []string
			io.Server = func(a []string) error { got = a; return nil }
			code := Main(args, io)
			if code != ExitOK || !slices.Equal(got, args) || out.Len() != 0 || errb.Len() != 0 {
				t.Errorf("%q (env %v): exit %d, ran %q, stdout %q, stderr %q", args, env, code, got, out.String(), errb.String())
			}
		}
	}
	var out, errb bytes.Buffer
	io := testStreams(&out, &errb, nil)
	io.Server = func([]string) error { return errors.New("serve: needs tally-server") }
	if code := Main([]string{"serve"}, io); code != ExitError || !strings.Contains(errb.String(), "needs tally-server") {
		t.Errorf("without tally-server: exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := Main([]string{"mcp"}, testStreams(&out, &errb, nil)); code != ExitError || !strings.Contains(errb.String(), "cannot run tally-server") {
		t.Errorf("without Server: exit %d, stderr %q", code, errb.String())
	}
}
