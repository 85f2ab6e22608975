package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Each verb tally builds alone is the command the whole tree has: the
// same name, usage and flags, and no verbs under it; any other word gets
// the whole tree.
func TestSoloVerbsAreTheTree(t *testing.T) {
	full := newRoot(&global{}, nil)
	names := []string{"init", "promise", "amend", "resolve", "assess", "show", "ls", "owed", "graph", "export", "import", "verify", "version"}
	for _, name := range names {
		root := newRootFor(&global{}, nil, []string{name, "--help"})
		if len(root.Commands()) != 1 {
			t.Fatalf("%s: a tree of %d verbs, want the verb alone", name, len(root.Commands()))
		}
		solo := root.Commands()[0]
		want, _, err := full.Find([]string{name})
		if err != nil || want.Name() != name {
			t.Fatalf("%s: not a verb of the whole tree (%v)", name, err)
		}
		if solo.Name() != name || solo.HasSubCommands() || usage(solo) != usage(want) {
			t.Fatalf("%s: built alone, its usage is\n%s\nin the whole tree\n%s", name, usage(solo), usage(want))
		}
	}
	for _, args := range [][]string{nil, {"claim"}, {"--dir", "x", "ls"}, {"help", "ls"}, {"lss"}} {
		if got := len(newRootFor(&global{}, nil, args).Commands()); got != len(full.Commands()) {
			t.Fatalf("%q: %d verbs, want the whole tree's %d", args, got, len(full.Commands()))
		}
	}
	if soloVerb("claim") != nil || soloVerb("demo") != nil {
		t.Fatal("a verb with verbs under it, or one not listed, is built alone")
	}
}

// usage is c's usage text as its help prints it.
func usage(c *cobra.Command) string {
	var b bytes.Buffer
	c.SetOut(&b)
	c.SetErr(&b)
	c.Usage()
	return strings.TrimSpace(b.String())
}
