package mcp

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"tally/api"
	"tally/verb"
)

// schemaOptions maps tally's own JSON types to their schemas.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[api.Object](): {Type: "object"},
	// replyTo: an agent's URL, or the object ParseReplyTo reads.
	reflect.TypeFor[json.RawMessage](): replyToSchema(),
}}

// replyToSchema is the schema of a replyTo member: a URL, or the object
// api.ReplyTo describes. json.RawMessage is used by no other document.
func replyToSchema() *jsonschema.Schema {
	s, err := jsonschema.For[api.ReplyTo](nil)
	if err != nil {
		panic("mcp: replyTo schema: " + err.Error())
	}
	s.Type, s.Types = "", []string{"string", "object"}
	return s
}

// verbSchema is the members of the verb t's document and extras, by their
// argument names, and those it requires.
func (t tool) verbSchema() (map[string]*jsonschema.Schema, []string, error) {
	s, err := jsonschema.ForType(t.doc, schemaOptions)
	if err != nil {
		return nil, nil, fmt.Errorf("verb %s: schema: %w", t.name, err)
	}
	props := map[string]*jsonschema.Schema{}
	for name, p := range s.Properties {
		// Inside the document, what is required is the family core's to
		// say (a check's mode and attempts have defaults there): nested
		// objects keep their members' types and require nothing. A copy:
		// the table's words are set on it, and a TypeSchemas schema
		// (replyTo's) is shared by every call of ForType.
		p = p.CloneSchemas()
		loosen(p)
		props[t.argName(name)] = p
	}
	required := s.Required
	for i, r := range required {
		required[i] = t.argName(r)
	}
	for _, x := range t.extra {
		if _, clash := props[x.name]; clash {
			return nil, nil, fmt.Errorf("verb %s: the document has a member %q, which the verb takes beside it", t.name, x.name)
		}
		props[x.name] = x.schema.CloneSchemas()
		if x.required {
			required = append(required, x.name)
		}
	}
	return props, required, nil
}

// requires is what the verb v of t requires: what t's table says its
// actions require, or where the table says nothing of it (a tool of one
// verb added without one), what v's document's tags and path say. A member
// the table requires that v does not take is an error.
func (t tool) requires(v tool) ([]string, error) {
	props, required, err := v.verbSchema()
	if err != nil {
		return nil, err
	}
	table := false
	var out []string
	for _, a := range t.args {
		if a.required == nil {
			continue
		}
		table = true
		if slices.Contains(a.required, v.name) && !slices.Contains(out, a.name) {
			if _, ok := props[a.name]; !ok {
				return nil, fmt.Errorf("tool %s: the table requires %q of %s, which does not take it", t.name, a.name, v.name)
			}
			out = append(out, a.name)
		}
	}
	if !table {
		return required, nil
	}
	return out, nil
}

// argNames are the arguments of the verb t besides the call's context,
// sorted.
func (t tool) argNames() []string {
	var names []string
	for _, m := range api.Members(reflect.New(t.doc).Interface()) {
		names = append(names, t.argName(m))
	}
	for _, x := range t.extra {
		names = append(names, x.name)
	}
	slices.Sort(names)
	return names
}

// argName is the argument a document member is.
func (t tool) argName(member string) string {
	for a, m := range t.rename {
		if m == member {
			return a
		}
	}
	return member
}

// inputSchema is the union of the verbs' members, described by t.args,
// plus the call's context (and the action, in a group). A member that
// every verb requires is required; what one action requires besides is
// said in the tool's description and checked when it is called.
func (t tool) inputSchema() (*jsonschema.Schema, error) {
	s := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{}, AdditionalProperties: &jsonschema.Schema{Not: &jsonschema.Schema{}}}
	var common []string
	for i, v := range t.verbs() {
		if (v.effect == verb.Read) != (t.effect == verb.Read) {
			return nil, fmt.Errorf("tool %s: verb %s reads in a tool that writes, or writes in one that reads", t.name, v.name)
		}
		props, _, err := v.verbSchema()
		if err != nil {
			return nil, err
		}
		required, err := t.requires(v)
		if err != nil {
			return nil, err
		}
		names := slices.Sorted(func(yield func(string) bool) {
			for n := range props {
				if !yield(n) {
					return
				}
			}
		})
		for _, n := range names {
			if have, ok := s.Properties[n]; ok {
				if kind(have) != kind(props[n]) {
					return nil, fmt.Errorf("tool %s: member %q is %s in one verb and %s in %s", t.name, n, kind(have), kind(props[n]), v.name)
				}
				continue
			}
			s.Properties[n] = props[n]
			s.PropertyOrder = append(s.PropertyOrder, n)
		}
		if i == 0 {
			common = slices.Clone(required)
		} else {
			common = slices.DeleteFunc(common, func(r string) bool { return !slices.Contains(required, r) })
		}
	}
	s.Required = common
	ctx := contextArgs(t.effect)
	if t.actions != nil {
		ctx = append([]arg{{argAction, "which verb", t.actionNames(), nil}}, ctx...)
		s.Required = append([]string{argAction}, s.Required...)
	}
	for _, c := range ctx {
		if _, clash := s.Properties[c.name]; clash {
			return nil, fmt.Errorf("tool %s: the document has a member %q, which the tool takes beside it", t.name, c.name)
		}
		p := &jsonschema.Schema{Type: "string"}
		if c.name == argRequestID {
			p.MaxLength = jsonschema.Ptr(requestIDMax)
		}
		s.Properties[c.name] = p
		s.PropertyOrder = append(s.PropertyOrder, c.name)
	}
	tidy(s)
	for _, a := range slices.Concat(t.args, ctx) {
		p := lookup(s, a.name)
		if p == nil {
			continue // a member of another tool the table describes
		}
		p.Description = a.desc
		if a.enum != nil {
			target := p
			if p.Type == "array" {
				target = p.Items
			}
			target.Enum = nil
			for _, v := range a.enum {
				target.Enum = append(target.Enum, v)
			}
		}
	}
	return s, nil
}

// kind is a schema's JSON type, for comparing two verbs' members.
func kind(s *jsonschema.Schema) string {
	if s.Type != "" {
		return s.Type
	}
	return strings.Join(s.Types, "|")
}

// lookup is the schema of the member at a dotted path (arrays passed
// through to their items), or nil.
func lookup(s *jsonschema.Schema, path string) *jsonschema.Schema {
	for _, name := range strings.Split(path, ".") {
		for s != nil && s.Items != nil {
			s = s.Items
		}
		if s == nil {
			return nil
		}
		s = s.Properties[name]
	}
	return s
}

// tidy makes s what a model reads most easily and in fewest bytes: a
// member that may be null (a Go slice or pointer) is its one type, and
// only the arguments themselves are closed.
func tidy(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && s.Types[0] == "null" {
		s.Type, s.Types = s.Types[1], nil
	}
	for _, p := range s.Properties {
		tidy(p)
		closedOnlyAtTop(p)
	}
	tidy(s.Items)
}

// closedOnlyAtTop leaves a nested object open in the schema: its members
// are in the description, and the strict decoder refuses any other.
func closedOnlyAtTop(s *jsonschema.Schema) {
	for ; s != nil; s = s.Items {
		s.AdditionalProperties = nil
		for _, p := range s.Properties {
			closedOnlyAtTop(p)
		}
	}
}

// loosen drops the required members of s and of every schema inside it.
func loosen(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	s.Required = nil
	for _, p := range s.Properties {
		loosen(p)
	}
	loosen(s.Items)
	loosen(s.AdditionalProperties)
}

// fullDescription is t's description and, in a group, each action with
// what it requires: what the schema, the union of the actions' members,
// cannot say. A member an action does not take is refused naming those it
// does.
func (t tool) fullDescription() (string, error) {
	if t.actions == nil {
		return t.description, nil
	}
	var b strings.Builder
	b.WriteString(t.description)
	for _, a := range t.actions {
		required, err := t.requires(a)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "\n- %s(%s): %s", a.name, strings.Join(required, ", "), a.description)
	}
	return b.String(), nil
}
