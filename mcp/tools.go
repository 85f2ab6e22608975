package mcp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"tally/api"
	"tally/refuse"
	"tally/service"
	"tally/verb"
)

// A tool is what MCP lists: one Service method (a verb), or a group of
// verbs of one family that all read or all write, chosen by the argument
// "action". A
// verb has its document (the api document it takes, whose members are its
// arguments besides the call's context) and run, which decodes the
// arguments with the one strict decoder and calls the method.
type tool struct {
	name, title, description string
	effect                   verb.Effect  // for its annotations
	doc                      reflect.Type // the document's struct type
	// extra are arguments beside the document and the Call: what REST
	// carries in the path (an expectation's id) or as the body (an
	// artifact's bytes). Each is a string.
	extra []extra
	// rename maps an argument's name to the document member it is, where
	// the document's name would mislead a model (a resolution is "as" in
	// pinki's lines, and --as is the identity on the CLI).
	rename map[string]string
	run    func(ctx context.Context, svc service.Service, c service.Call, body []byte, given map[string]string) (any, error)

	// actions are a group's verbs, each named by its action; nil for a
	// tool of one verb.
	actions []tool
	// args describe the members: the table they are read from (args.go).
	args []arg

	// verb is the verb table's name of a tool of one verb or an action;
	// idempotent its MCP hint. err is what is wrong with the tool's
	// place in the table: New refuses it.
	verbName   string
	idempotent bool
	err        error
}

// extra is one argument beside the document.
type extra struct {
	name     string
	schema   *jsonschema.Schema
	required bool
}

// The call's context: members every tool takes beside its document,
// which become the Call, not the document.
const (
	argSession   = "session"
	argRequestID = "request_id"
	argNow       = "now"
	argAction    = "action"
)

// requestIDMax bounds a request id, as REST bounds Idempotency-Key.
const requestIDMax = service.RequestIDMax

// act is an action the verb table runs as every binding does: its
// arguments are the verb's request document (verb.Verb.Request), read by
// the one strict decoder, and its answer the verb's (verb.Verb.Call). A
// group or single fills it in from its verb (of); the tools below name a
// Service method only where MCP reads its arguments its own way.
func act(name, description string) tool {
	return tool{name: name, description: description}
}

// write is a write method whose document is D.
func write[D, R any](name, title, description string, m func(service.Service, context.Context, service.Call, D) (R, error)) tool {
	return tool{name: name, title: title, description: description, effect: verb.Write, doc: reflect.TypeFor[D](),
		run: func(ctx context.Context, svc service.Service, c service.Call, body []byte, _ map[string]string) (any, error) {
			d, err := decoded[D](body)
			if err != nil {
				return nil, err
			}
			return m(svc, ctx, c, d)
		}}
}

// decoded is the document D the arguments hold besides the call's, by the
// one strict decoder.
func decoded[D any](body []byte) (D, error) {
	var d D
	err := api.Decode("arguments", body, &d)
	return d, err
}

// writeAt is a write method that takes, besides its document D, the id of
// what it writes to, which REST names in the path: here the argument id.
func writeAt[D, R any](name, title, description string, id extra, m func(service.Service, context.Context, service.Call, string, D) (R, error)) tool {
	id.required = true
	return tool{name: name, title: title, description: description, effect: verb.Write, doc: reflect.TypeFor[D](), extra: []extra{id},
		run: func(ctx context.Context, svc service.Service, c service.Call, body []byte, given map[string]string) (any, error) {
			d, err := decoded[D](body)
			if err != nil {
				return nil, err
			}
			return m(svc, ctx, c, given[id.name], d)
		}}
}

// read is a read method whose arguments D become what it takes by arg.
func read[D, A, R any](name, title, description string, arg func(*D) (A, error), m func(service.Service, context.Context, service.Call, A) (R, error)) tool {
	return tool{name: name, title: title, description: description, effect: verb.Read, doc: reflect.TypeFor[D](),
		run: func(ctx context.Context, svc service.Service, c service.Call, body []byte, _ map[string]string) (any, error) {
			d, err := decoded[D](body)
			if err != nil {
				return nil, err
			}
			a, err := arg(&d)
			if err != nil {
				return nil, err
			}
			return m(svc, ctx, c, a)
		}}
}

// plain is a read's argument that needs no reading.
func plain[D, A any](f func(*D) A) func(*D) (A, error) {
	return func(d *D) (A, error) { return f(d), nil }
}

// renamed gives the document member doc the argument name arg.
func (t tool) renamed(arg, doc string) tool {
	if t.rename == nil {
		t.rename = map[string]string{}
	}
	t.rename[arg] = doc
	return t
}

// group is one tool of several verbs, each a tool whose name is its
// action; args describe the members of them all. Which verbs it offers,
// in which order and with which effect, is the verb table's (the verbs
// whose MCP tool is name); impls are how each action runs, by action.
// Its effect is its most lasting verb's: a group that may end an
// obligation for good says so. Reads are never grouped with writes (New
// refuses it), so a read-only tool stays one.
func group(name, title, description string, args []arg, impls ...tool) tool {
	t := tool{name: name, title: title, description: description, args: args}
	byAction := map[string]tool{}
	for _, a := range impls {
		byAction[a.name] = a
	}
	for _, v := range verb.Table() {
		if v.MCP.Tool != name {
			continue
		}
		a, ok := byAction[v.MCP.Action]
		if !ok {
			t.err = errors.Join(t.err, fmt.Errorf("tool %s: verb %s (action %q) has no implementation", name, v.Name, v.MCP.Action))
			continue
		}
		delete(byAction, v.MCP.Action)
		t.actions = append(t.actions, a.of(v))
	}
	for _, action := range slices.Sorted(maps.Keys(byAction)) {
		t.err = errors.Join(t.err, fmt.Errorf("tool %s: action %s is no verb of the table", name, action))
	}
	for _, a := range t.actions {
		t.effect = max(t.effect, a.effect)
	}
	return t
}

// of is the tool t as the verb v: its effect and hints are v's, and an
// action (act) runs v.
func (t tool) of(v verb.Verb) tool {
	t.verbName = v.Name
	t.idempotent = v.MCP.Idempotent
	if t.run == nil {
		t.doc = v.Request
		t.run = func(ctx context.Context, svc service.Service, c service.Call, body []byte, _ map[string]string) (any, error) {
			d := reflect.New(v.Request)
			if err := api.Decode("arguments", body, d.Interface()); err != nil {
				return nil, err
			}
			return v.Call(ctx, svc, c, verb.Input{Doc: d.Interface()})
		}
	}
	t.effect = v.Effect
	return t
}

// single is a tool of one verb, the verb table's whose MCP tool is t's.
func single(t tool) tool {
	for _, v := range verb.Table() {
		if v.MCP.Tool == t.name && v.MCP.Action == "" {
			return t.of(v)
		}
	}
	t.err = fmt.Errorf("tool %s: no verb of the table", t.name)
	return t
}

// verbs are the verbs t runs: its actions, or itself.
func (t tool) verbs() []tool {
	if t.actions == nil {
		return []tool{t}
	}
	return t.actions
}

// verb is the verb of t the arguments name by action.
func (t tool) verb(action string) (tool, error) {
	if t.actions == nil {
		return t, nil
	}
	if action == "" {
		return tool{}, refuse.Invalidf(argAction, "required: one of "+orList(t.actionNames()))
	}
	for _, a := range t.actions {
		if a.name == action {
			return a, nil
		}
	}
	return tool{}, refuse.Invalidf(argAction, "must be "+orList(t.actionNames()))
}

func (t tool) actionNames() []string {
	var names []string
	for _, a := range t.actions {
		names = append(names, a.name)
	}
	return names
}

// orList is "a, b or c".
func orList(vs []string) string {
	if len(vs) < 2 {
		return strings.Join(vs, "")
	}
	return strings.Join(vs[:len(vs)-1], ", ") + " or " + vs[len(vs)-1]
}

// takes reports whether name is an argument of the verb t beside its
// document: the call's context, and the action where t is grouped.
func (t tool) takes(name string, grouped bool) bool {
	switch name {
	case argSession:
		return true
	case argRequestID:
		return t.effect != verb.Read
	case argNow:
		return t.effect == verb.Read
	case argAction:
		return grouped
	}
	for _, x := range t.extra {
		if x.name == name {
			return true
		}
	}
	return false
}

// tools is every tool of svc, family by family; readPaths offers the
// arguments that name a file for the server to read; now is the clock a
// duration counts from.
func tools(svc service.Service, readPaths bool, now func() time.Time) []tool {
	return slices.Concat(promiseTools(), claimTools(readPaths), expectTools(now), logTools(svc), readyTools())
}
