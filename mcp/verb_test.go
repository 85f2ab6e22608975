package mcp

import (
	"testing"
	"time"

	"tally/verb"
)

// Every verb the table gives an MCP place is that tool's action (or the
// tool, for a tool of one verb) with the table's effect, and every tool
// and action is a verb of the table.
func TestToolsAreTheTables(t *testing.T) {
	offered := map[[2]string]tool{}
	for _, tl := range tools(nil, true, time.Now) {
		if tl.err != nil {
			t.Fatal(tl.err)
		}
		if tl.actions == nil {
			offered[[2]string{tl.name, ""}] = tl
		}
		for _, a := range tl.actions {
			offered[[2]string{tl.name, a.name}] = a
		}
	}
	for _, v := range verb.Table() {
		if v.MCP.Tool == "" {
			continue
		}
		k := [2]string{v.MCP.Tool, v.MCP.Action}
		a, ok := offered[k]
		if !ok {
			t.Errorf("%s: tool %s action %q is not offered", v.Name, k[0], k[1])
			continue
		}
		if a.verbName != v.Name || a.effect != v.Effect {
			t.Errorf("%s: offered as %s with effect %s, the table's %s", v.Name, a.verbName, a.effect, v.Effect)
		}
		delete(offered, k)
	}
	for k := range offered {
		t.Errorf("tool %s action %q is no verb of the table", k[0], k[1])
	}
}
