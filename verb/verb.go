// Package verb is tally's table of operations: every verb of the Service,
// declared once with its name, family, api documents, effect, the party
// member that names the actor's side, its HTTP method and path, its A2A
// action, its MCP tool and action, its CLI verb, the command a cluster's
// replicas run, and the call into service.Service. The bindings are
// derived from it: the server's REST routes and OpenAPI document, the
// client's paths, the cluster's command map, the MCP tools' actions and
// the A2A records' actions. A verb missing from a binding is a failing
// test (verb_test.go in each binding), not a 404 found in production.
//
// The table holds what every binding must agree on; how a binding reads
// its input (a body, a query, a path, a message's metadata) stays in the
// binding.
package verb

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"

	"tally/api"
	"tally/service"
)

// Effect is what a verb does to the ledger: the MCP annotations, the REST
// write flag (an Idempotency-Key) and the A2A task's kind follow from it.
type Effect int

const (
	Read        Effect = iota // changes nothing
	Write                     // appends a record that moves an obligation on
	Destructive               // ends an obligation for good (resolve, cancel, revoke, withdraw, supersede)
)

func (e Effect) String() string {
	switch e {
	case Read:
		return "read"
	case Write:
		return "write"
	}
	return "destructive"
}

// HTTP is a verb's REST route.
type HTTP struct {
	Method string
	// Path is the route's pattern, as net/http's mux reads it; its
	// parameters other than {tenant} and {session} are the verb's path
	// arguments, in order (Verb.Params).
	Path string
	// Status is a success's status (200 when zero).
	Status int
	// Body names the request body's schema in the OpenAPI document; ""
	// takes none, BodyBytes takes bytes (application/octet-stream).
	Body string
	// Members are the request document's members the path's arguments
	// set, in the order of Params ("claim" is a claim path's {id}).
	Members []string
	// Stream says the answer is written as it is read (an export, bytes)
	// rather than a document.
	Stream bool
}

// BodyBytes is the Body of a verb whose request body is bytes.
const BodyBytes = "Bytes"

// MCP is a verb's place among the MCP tools: the tool and, in a tool that
// groups several verbs, the action that chooses it. The annotations follow
// from the verb's effect (read-only, destructive); Idempotent says a call
// repeated without a request id changes nothing more.
type MCP struct {
	Tool, Action string
	Idempotent   bool
}

// Verb is one operation.
type Verb struct {
	Name    string // family.verb, the route's and the metrics' name
	Family  string // promise, claim, expect, log, work
	Summary string
	Effect  Effect
	// Party is the request document's member naming the actor's side
	// (a declaration's "by", an assessment's "observer"), or "" where
	// the document names none and the actor is the caller.
	Party string
	// Request is the api document or query the verb takes; Response the
	// service result it answers with (its Doc the response document).
	Request, Response reflect.Type
	HTTP              HTTP
	A2A               string // the action of the family's A2A record, or ""
	// A2ARank is A2A's place among its family's record actions: the
	// order the agent card and a refusal list them in, the default (0)
	// first.
	A2ARank int
	MCP     MCP    // Tool "" when MCP does not offer the verb
	CLI     string // the CLI's verb path, words space-separated
	// Command is the name of the command a cluster's replicas run for a
	// write (the Service method's name). Stored in the raft log: do not
	// rename.
	Command string
	// Call runs the verb on a Service: in.Doc is a Request value, in.Path
	// the path's arguments (Params), in.Body the bytes of a verb whose
	// body is bytes.
	Call func(ctx context.Context, svc service.Service, c service.Call, in Input) (service.Doc, error)
	// Apply is how a replica runs Command: its document as proposed
	// (CommandDoc), its answer the Service's typed result. Nil where a
	// cluster runs the command its own way (with staged bytes).
	Apply func(ctx context.Context, svc service.Service, c service.Call, doc []byte) (any, error)
}

// Input is one call's input.
type Input struct {
	Doc  any
	Path []string
	Body io.Reader
}

// arg is the i-th path argument, "" when not given.
func (in Input) arg(i int) string {
	if i < len(in.Path) {
		return in.Path[i]
	}
	return ""
}

// Params are the path's parameters after {tenant} and {session}, in order.
func (v Verb) Params() []string {
	var out []string
	for _, seg := range strings.Split(v.HTTP.Path, "/") {
		if p, ok := strings.CutPrefix(seg, "{"); ok {
			p = strings.TrimSuffix(p, "}")
			if p != "tenant" && p != "session" && p != "$" {
				out = append(out, p)
			}
		}
	}
	return out
}

// PathOf is the verb's path in tenant/session with args as its other
// parameters, in order, each escaped; it panics on a wrong count of
// arguments (a broken caller, not a request).
func (v Verb) PathOf(tenant, session string, args ...string) string {
	var b strings.Builder
	i := 0
	for _, seg := range strings.Split(v.HTTP.Path, "/")[1:] {
		b.WriteByte('/')
		switch {
		case seg == "{tenant}":
			b.WriteString(url.PathEscape(tenant))
		case seg == "{session}":
			b.WriteString(url.PathEscape(session))
		case strings.HasPrefix(seg, "{"):
			if i >= len(args) {
				panic(fmt.Sprintf("verb %s: path %s given %d arguments", v.Name, v.HTTP.Path, len(args)))
			}
			b.WriteString(url.PathEscape(args[i]))
			i++
		default:
			b.WriteString(seg)
		}
	}
	if i != len(args) {
		panic(fmt.Sprintf("verb %s: path %s given %d arguments", v.Name, v.HTTP.Path, len(args)))
	}
	return b.String()
}

// Table is every verb, family by family: a copy of the table, whose
// entries' slices the caller must not change.
func Table() []Verb {
	table, _ := built()
	return slices.Clone(table)
}

// built is every verb and its index by name, built once on first use:
// building costs a tenth of a millisecond, which a binding must not pay on
// a request's path (an A2A record's actions), nor every process at its
// start (most tally commands never read the table). Neither changes after.
var built = sync.OnceValues(build)

// build makes the table and its index.
func build() ([]Verb, map[string]Verb) {
	var out []Verb
	for _, f := range [][]Verb{promiseVerbs(), claimVerbs(), expectVerbs(), logVerbs(), workVerbs()} {
		out = append(out, f...)
	}
	m := make(map[string]Verb, len(out))
	for _, v := range out {
		if _, twice := m[v.Name]; twice {
			panic("verb: " + v.Name + " declared twice")
		}
		m[v.Name] = v
	}
	return out, m
}

// Of is the verb called name; it panics for a name the table lacks (a
// caller's broken constant, caught by any test that calls it).
func Of(name string) Verb {
	_, index := built()
	v, ok := index[name]
	if !ok {
		panic("verb: no verb " + name)
	}
	return v
}

// A2AActions are the verbs of family that an A2A record names by its
// action, in their A2A order (A2ARank).
func A2AActions(family string) []Verb {
	var out []Verb
	table, _ := built()
	for _, v := range table {
		if v.Family == family && v.A2A != "" {
			out = append(out, v)
		}
	}
	slices.SortStableFunc(out, func(a, b Verb) int { return cmp.Compare(a.A2ARank, b.A2ARank) })
	return out
}

// Lookup is the verb called name, if the table has one.
func Lookup(name string) (Verb, bool) {
	_, index := built()
	v, ok := index[name]
	return v, ok
}

// OnPath is the command document of a write whose path names what it is
// about besides its document (the expectation extended or withdrawn, the
// task). Stored in the raft log: do not rename the members.
type OnPath[D any] struct {
	Path string `json:"path"`
	Doc  D      `json:"doc"`
}

// Evidence is the request of a verdict whose evidence is the body's bytes:
// the verdict, and how its evidence is described. Stored in the raft log
// as a cluster's command document: do not rename the members.
type Evidence struct {
	Check  api.ClaimCheck `json:"check"`
	Name   string         `json:"name,omitempty"`
	Kind   string         `json:"kind,omitempty"`
	Schema string         `json:"schema,omitempty"`
}
