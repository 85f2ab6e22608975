package mcp_test

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tally/api"
)

// toolsListMax is what the whole tools/list answer may weigh: what a host
// puts in a model's context before it has done anything.
const toolsListMax = 16 << 10

// schema is the part of a JSON Schema the tests read.
type schema struct {
	Type                 any                `json:"type"`
	Description          string             `json:"description"`
	Enum                 []string           `json:"enum"`
	Required             []string           `json:"required"`
	Properties           map[string]*schema `json:"properties"`
	Items                *schema            `json:"items"`
	AdditionalProperties *bool              `json:"additionalProperties"`
	MaxLength            *int               `json:"maxLength"`
}

func inputOf(t *testing.T, tl *sdk.Tool) *schema {
	t.Helper()
	b, err := json.Marshal(tl.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	var s schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// at is the schema of the member at a dotted path, through arrays.
func (s *schema) at(path string) *schema {
	for _, name := range strings.Split(path, ".") {
		for s != nil && s.Items != nil {
			s = s.Items
		}
		if s == nil {
			return nil
		}
		s = s.Properties[name]
	}
	for s != nil && s.Items != nil && s.Enum == nil {
		s = s.Items
	}
	return s
}

// The tools, their actions and annotations: a read-only tool only reads,
// and a tool that may end an obligation for good says it is destructive.
func TestToolsListed(t *testing.T) {
	f := newFixture(t)
	ts := tools(t, f.client("reviewer"))
	for name, want := range map[string]struct {
		readOnly, destructive bool
		actions               []string
	}{
		"tally_promise":      {false, true, []string{"declare", "amend", "assess", "resolve"}},
		"tally_promise_read": {true, false, []string{"show", "list", "owed", "graph"}},
		"tally_claim": {false, true, []string{"create", "post", "receipt.acquire", "receipt.adopt", "progress", "artifact.publish", "artifact.receive",
			"testament.close", "testament.post", "testament.receive", "check.begin", "check.report", "cancel", "revoke", "supersede"}},
		"tally_claim_read":  {true, false, []string{"show", "list", "graph", "artifact"}},
		"tally_expect":      {false, true, []string{"raise", "supersede", "fact", "withdraw"}},
		"tally_expect_read": {true, false, []string{"show", "list", "lapses"}},
		"tally_ledger":      {true, false, []string{"verify", "export"}},
	} {
		tl, found := ts[name]
		if !found {
			t.Errorf("%s: not listed", name)
			continue
		}
		a := tl.Annotations
		if a == nil || a.ReadOnlyHint != want.readOnly || a.OpenWorldHint == nil || *a.OpenWorldHint ||
			!want.readOnly && (a.DestructiveHint == nil || *a.DestructiveHint != want.destructive) {
			t.Errorf("%s: annotations %+v", name, a)
		}
		if tl.OutputSchema != nil || tl.Title == "" {
			t.Errorf("%s: an output schema, or no title", name)
		}
		in := inputOf(t, tl)
		if in.Type != "object" || in.AdditionalProperties == nil || *in.AdditionalProperties || in.Required[0] != "action" {
			t.Errorf("%s: not a closed object requiring action: %+v", name, in)
		}
		if got := in.Properties["action"].Enum; !slices.Equal(got, want.actions) {
			t.Errorf("%s: actions %v, want %v", name, got, want.actions)
		}
		for _, action := range want.actions {
			if !strings.Contains(tl.Description, "\n- "+action+"(") {
				t.Errorf("%s: the description does not list %s: %q", name, action, tl.Description)
			}
		}
		ctx := "now"
		if !want.readOnly {
			ctx = "request_id"
			if m := in.Properties[ctx].MaxLength; m == nil || *m != 256 {
				t.Errorf("%s: request_id unbounded", name)
			}
		}
		for _, m := range []string{"session", ctx} {
			if in.Properties[m] == nil {
				t.Errorf("%s: no %s", name, m)
			}
		}
	}
	// Besides the families' grouped tools, the seat's own reads.
	for _, name := range []string{"tally_ready", "tally_prime"} {
		if ts[name] == nil {
			t.Errorf("%s: not listed", name)
		}
	}
	if len(ts) != 9 {
		t.Errorf("%d tools", len(ts))
	}
	// What an action requires is said in the description.
	if d := ts["tally_promise"].Description; !strings.Contains(d, "- declare(promise, to, until):") || !strings.Contains(d, "- resolve(id, resolution):") {
		t.Errorf("tally_promise: %q", d)
	}
}

// The whole tools/list answer, as a host receives it, is at most
// toolsListMax bytes: over HTTP, and over stdio, where the tools that take
// bytes also take a path.
func TestToolsListSize(t *testing.T) {
	for _, readPaths := range []bool{false, true} {
		f := newFixture(t)
		f.readPaths = readPaths
		res, err := f.client("reviewer").ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("tools/list (paths %v): %d bytes, %d tools", readPaths, len(b), len(res.Tools))
		if len(b) > toolsListMax {
			t.Errorf("tools/list (paths %v) is %d bytes, over %d", readPaths, len(b), toolsListMax)
		}
	}
}

// Every argument is described, and every closed set is an enum whose
// values are the core's constants of that kind, read from the core's
// source: a value added to a core and not to its enum fails here.
func TestEveryArgumentDescribedEveryClosedSetAnEnum(t *testing.T) {
	f := newFixture(t)
	ts := tools(t, f.client("reviewer"))
	for name, tl := range ts {
		for member, p := range inputOf(t, tl).Properties {
			if strings.TrimSpace(p.Description) == "" {
				t.Errorf("%s: %s has no description", name, member)
			}
		}
	}
	claim, expect, promise := consts(t, "claim"), consts(t, "expect"), consts(t, "promise")
	for _, c := range []struct {
		tool, path string
		want       []string
	}{
		{"tally_promise", "resolution", promise["As"]},
		{"tally_promise", "state", promise["StateViolated"]},
		{"tally_promise_read", "state", promise["Filter"]},
		{"tally_claim", "slots.mode", claim["Mode"]},
		{"tally_claim", "slots.checks.mode", claim["Mode"]},
		{"tally_claim", "slots.checks.phases", claim["Phase"]},
		{"tally_claim", "outcome", claim["Outcome"]},
		{"tally_claim", "result", claim["Result"]},
		{"tally_claim", "role", union(claim["Role"], claim["TestamentRes"])},
		{"tally_claim_read", "state", claim["Status"]},
		{"tally_expect", "basis", expect["Basis"]},
		{"tally_expect_read", "state", expect["Life"]},
		{"tally_ledger", "format", []string{"jsonl", "json", "pinki"}}, // TestLedgerVerifyExport runs each
	} {
		p := inputOf(t, ts[c.tool]).at(c.path)
		if p == nil || len(c.want) == 0 {
			t.Errorf("%s.%s: no member, or no constants %v", c.tool, c.path, c.want)
			continue
		}
		if got, want := slices.Sorted(slices.Values(p.Enum)), slices.Sorted(slices.Values(c.want)); !slices.Equal(got, want) {
			t.Errorf("%s.%s: enum %v, the core's %v", c.tool, c.path, got, want)
		}
	}
	// The claim actions are the api's, but the timekeeper's.
	var want []string
	for _, n := range api.ClaimActions().Names() {
		if !strings.HasSuffix(n, ".commit") {
			want = append(want, n)
		}
	}
	if got := inputOf(t, ts["tally_claim"]).Properties["action"].Enum; !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Errorf("tally_claim actions %v, the api's %v", got, want)
	}
}

func union(sets ...[]string) []string {
	var out []string
	for _, s := range sets {
		for _, v := range s {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// consts reads the string constants a core package declares: by their
// type's name when typed (Status, Mode), else by their name's prefix
// (As: AsSatisfied…, Filter: FilterOpen…), and a Life's names from the
// constants' order (lifeNames, by iota). Keys are those names.
func consts(t *testing.T, pkg string) map[string][]string {
	t.Helper()
	fs := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join("..", pkg, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fs, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			typ := ""
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				// A spec with neither type nor value repeats the one
				// before (iota).
				if id, ok := vs.Type.(*ast.Ident); ok {
					typ = id.Name
				} else if vs.Type != nil || len(vs.Values) > 0 {
					typ = ""
				}
				for i, n := range vs.Names {
					if typ == "Life" {
						out[typ] = append(out[typ], strings.ToLower(n.Name))
						continue
					}
					if i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					key := typ
					if key == "" {
						for _, prefix := range []string{"As", "Filter", "TestamentRes", "StateViolated"} {
							if strings.HasPrefix(n.Name, prefix) {
								key = prefix
							}
						}
					}
					if key != "" {
						out[key] = append(out[key], v)
					}
				}
			}
		}
	}
	return out
}
