package server

import (
	"slices"
	"testing"

	"tally/verb"
)

// Every verb of the table with a route is served by exactly one route of
// the server, with the table's method, path, body and write flag, and
// every route beyond them is the server's own or another binding's: a
// Service route added beside the table fails here.
func TestVerbRoutes(t *testing.T) {
	f := newFixture(t)
	byName := map[string][]route{}
	for _, rt := range f.srv.routes {
		byName[rt.name] = append(byName[rt.name], rt)
	}
	for _, v := range verb.Table() {
		rts := byName[v.Name]
		if v.HTTP.Path == "" {
			if len(rts) != 0 {
				t.Errorf("%s: the table gives it no route, the server has %d", v.Name, len(rts))
			}
			continue
		}
		if len(rts) != 1 {
			t.Errorf("%s: %d routes, want 1", v.Name, len(rts))
			continue
		}
		rt := rts[0]
		if rt.method != v.HTTP.Method || rt.pattern != v.HTTP.Path || rt.body != v.HTTP.Body || rt.write != (v.Effect != verb.Read) || rt.summary != v.Summary {
			t.Errorf("%s: route %s %s body %q write %v, table %s %s body %q effect %s", v.Name, rt.method, rt.pattern, rt.body, rt.write, v.HTTP.Method, v.HTTP.Path, v.HTTP.Body, v.Effect)
		}
		if (rt.stream != nil) != v.HTTP.Stream {
			t.Errorf("%s: a stream route is %v, the table says %v", v.Name, rt.stream != nil, v.HTTP.Stream)
		}
		delete(byName, v.Name)
	}
	// The routes that are not the Service's verbs: the server's own, and
	// other bindings' (A2A, MCP, the console), each answering through the
	// Service's verbs above or through no ledger at all.
	own := []string{"a2a.cancel", "a2a.card", "a2a.jsonrpc", "a2a.send", "a2a.session_card", "a2a.session_card_bare", "a2a.task", "a2a.tasks",
		"events", "health", "metrics", "openapi", "ready", "token.create", "token.list", "token.revoke", "whoami"}
	for name, rts := range byName {
		if slices.Contains(own, name) || rts[0].handle != nil || len(name) > 8 && name[:8] == "console." {
			continue
		}
		t.Errorf("route %s (%s %s) is neither a verb of the table nor the server's own", name, rts[0].method, rts[0].pattern)
	}
}
