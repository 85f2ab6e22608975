package cli

import (
	"strings"
	"testing"

	"tally/verb"
)

// Every CLI verb the verb table names is a command of the CLI.
func TestTableVerbsAreCommands(t *testing.T) {
	root := newRoot(&global{}, nil)
	for _, v := range verb.Table() {
		if v.CLI == "" {
			continue
		}
		c, _, err := root.Find(strings.Fields(v.CLI))
		if err != nil || c.CommandPath() != "tally "+v.CLI {
			t.Errorf("%s: the table's CLI verb %q is %v (%v)", v.Name, v.CLI, c.CommandPath(), err)
		}
	}
}
