package server

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"tally/service"
	"tally/verb"
	"tally/verb/verbtest"
)

var updateResponses = flag.Bool("update", false, "rewrite openapi_responses.json from the documents the server answers")

// Each verb's success document in the OpenAPI document is what the server
// answers: the verb table's script runs on the server's Service (the
// documents REST writes byte for byte), each verb's answers are read back
// into one schema (the members every answer holds required, a member's
// types the union of what it held), and openapi_responses.json must be
// that schema, so a document that gains, loses or retypes a member fails
// here until it is written again (-update). Every answer validates against
// its verb's schema as the OpenAPI document serves it, and every REST verb
// that answers a document has one.
func TestOpenAPIResponsesAreTheDocuments(t *testing.T) {
	f := newFixture(t)
	answers := map[string][][]byte{}
	run := held(f.srv)
	verbtest.Run(t, func(ctx context.Context, c verbtest.Call) (service.Doc, error) {
		doc, err := run(ctx, c)
		if err == nil && c.V.HTTP.Path != "" && !c.V.HTTP.Stream {
			answers[c.Verb] = append(answers[c.Verb], bytes.Clone(doc.JSON))
		}
		return doc, err
	}, 10*time.Second)

	inferred := map[string]any{}
	for name, docs := range answers {
		var sc *inferredSchema
		for _, d := range docs {
			dec := json.NewDecoder(bytes.NewReader(d))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("%s answered no JSON document: %v: %s", name, err, d)
			}
			sc = sc.merge(v)
		}
		inferred[name] = sc.json()
	}
	want, err := json.MarshalIndent(inferred, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *updateResponses {
		if err := os.WriteFile("openapi_responses.json", want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Skip("wrote openapi_responses.json; build again and run without -update")
	}
	if !bytes.Equal(want, responsesJSON) {
		t.Fatalf("openapi_responses.json is not what the server answers: go test ./server -run TestOpenAPIResponsesAreTheDocuments -update, and read the diff")
	}

	for _, v := range verb.Table() {
		if described := len(answers[v.Name]) > 0; v.HTTP.Path != "" && !v.HTTP.Stream && described == slices.Contains(noSuccessInScript, v.Name) {
			t.Errorf("%s: described %v, but noSuccessInScript says otherwise", v.Name, described)
		}
	}
	doc, err := f.srv.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	components := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(answers)) {
		b, err := json.Marshal(components[responseSchemaName(name)])
		if err != nil {
			t.Fatal(err)
		}
		var sc jsonschema.Schema
		if err := json.Unmarshal(b, &sc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rs, err := sc.Resolve(nil)
		if err != nil {
			t.Fatalf("%s: resolve: %v", name, err)
		}
		for _, d := range answers[name] {
			var v any
			if err := json.Unmarshal(d, &v); err != nil {
				t.Fatal(err)
			}
			if err := rs.Validate(v); err != nil {
				t.Errorf("%s: an answer does not validate: %v\n%s", name, err, d)
			}
		}
		// The route names its success document.
		v, _ := verb.Lookup(name)
		item, _ := doc["paths"].(map[string]any)[strings.TrimSuffix(v.HTTP.Path, "{$}")].(map[string]any)
		op, _ := item[strings.ToLower(v.HTTP.Method)].(map[string]any)
		if op == nil {
			t.Errorf("%s: no operation %s %s in the document", name, v.HTTP.Method, v.HTTP.Path)
			continue
		}
		found := false
		for _, r := range op["responses"].(map[string]any) {
			b, _ := json.Marshal(r)
			found = found || strings.Contains(string(b), `"#/components/schemas/`+responseSchemaName(name)+`"`)
		}
		if !found {
			t.Errorf("%s %s does not name its success document", v.HTTP.Method, v.HTTP.Path)
		}
	}
}

// noSuccessInScript are the REST verbs the script calls only where they
// are refused, so no answer of theirs is described yet.
var noSuccessInScript = []string{verb.ClaimDependency}

// inferredSchema is what some JSON values have in common: the types they
// took and, for objects, each member's schema and how many held it; for
// arrays, their items'.
type inferredSchema struct {
	n       int
	types   map[string]bool
	members map[string]*inferredSchema
	held    map[string]int // objects that held each member
	objects int
	items   *inferredSchema
}

func (s *inferredSchema) merge(v any) *inferredSchema {
	if s == nil {
		s = &inferredSchema{types: map[string]bool{}}
	}
	s.n++
	switch x := v.(type) {
	case nil:
		s.types["null"] = true
	case bool:
		s.types["boolean"] = true
	case string:
		s.types["string"] = true
	case json.Number:
		if strings.ContainsAny(x.String(), ".eE") {
			s.types["number"] = true
		} else {
			s.types["integer"] = true
		}
	case []any:
		s.types["array"] = true
		for _, e := range x {
			s.items = s.items.merge(e)
		}
	case map[string]any:
		s.types["object"] = true
		s.objects++
		if s.members == nil {
			s.members, s.held = map[string]*inferredSchema{}, map[string]int{}
		}
		for k, e := range x {
			s.members[k] = s.members[k].merge(e)
			s.held[k]++
		}
	}
	return s
}

// json is the schema as JSON Schema: a number that was sometimes an
// integer is a number; a member every object held is required.
func (s *inferredSchema) json() map[string]any {
	out := map[string]any{}
	if s.types["number"] {
		delete(s.types, "integer")
	}
	types := slices.Sorted(maps.Keys(s.types))
	if len(types) == 1 {
		out["type"] = types[0]
	} else {
		out["type"] = types
	}
	if s.members != nil {
		props := map[string]any{}
		var required []string
		for k, m := range s.members {
			props[k] = m.json()
			if s.held[k] == s.objects {
				required = append(required, k)
			}
		}
		out["properties"] = props
		if len(required) > 0 {
			slices.Sort(required)
			out["required"] = required
		}
	}
	if s.items != nil {
		out["items"] = s.items.json()
	}
	return out
}
