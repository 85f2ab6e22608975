package servecli

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"tally/cli"
)

// TestAddsEveryHostedVerb: tally-server adds exactly the verbs tally has
// stand-ins for, each with the one-line help the stand-in shows.
func TestAddsEveryHostedVerb(t *testing.T) {
	root := &cobra.Command{Use: "tally"}
	Add(root, cli.Env{})
	var names []string
	for _, c := range root.Commands() {
		names = append(names, c.Name())
		if c.Short != cli.HostedShort(c.Name()) {
			t.Errorf("%s: Short %q, the stand-in's %q", c.Name(), c.Short, cli.HostedShort(c.Name()))
		}
	}
	want := cli.HostedVerbs()
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("servecli adds %q; tally's stand-ins are %q", names, want)
	}
}

// TestHostedGroupsRefuseUnknownVerbs: in tally-server, the hosted command
// groups refuse a word that names none of their verbs (exit 2, the closest
// verb named), as every group of tally does.
func TestHostedGroupsRefuseUnknownVerbs(t *testing.T) {
	for _, tc := range []struct{ args []string }{
		{[]string{"cluster", "statu"}},
		{[]string{"backup", "verif"}},
	} {
		var out, errb bytes.Buffer
		io := cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb, Getenv: func(string) string { return "" },
			Cwd: t.TempDir(), Now: func() time.Time { return time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC) }}
		code := cli.MainWith(tc.args, io, Add)
		if code != cli.ExitUsage || out.Len() != 0 || !strings.Contains(errb.String(), "did you mean") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", tc.args, code, out.String(), errb.String())
		}
	}
}
