package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tally/api"
	"tally/instant"
	"tally/jsonline"
	"tally/refuse"
	"tally/rest"
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

// addTool registers t with its schema, annotations and handler.
func (s *Server) addTool(t tool) error {
	if t.err != nil {
		return t.err
	}
	in, err := t.inputSchema()
	if err != nil {
		return err
	}
	resolved, err := in.Resolve(nil)
	if err != nil {
		return fmt.Errorf("tool %s: resolve input schema: %w", t.name, err)
	}
	desc, err := t.fullDescription()
	if err != nil {
		return err
	}
	ann := &sdk.ToolAnnotations{ReadOnlyHint: t.effect == verb.Read, OpenWorldHint: jsonschema.Ptr(false)}
	if t.effect != verb.Read {
		ann.DestructiveHint = jsonschema.Ptr(t.effect == verb.Destructive)
		// A write given a request_id is idempotent; the hint is for the
		// calls that give none.
		ann.IdempotentHint = t.idempotent
	}
	// No output schema: the answer is its document as text, once (see
	// answer).
	required := map[string][]string{}
	for _, v := range t.verbs() {
		if required[v.name], err = t.requires(v); err != nil {
			return err
		}
	}
	s.mcp.AddTool(&sdk.Tool{Name: t.name, Title: t.title, Description: desc, Annotations: ann, InputSchema: in}, s.handler(t, in, resolved, required))
	return nil
}

// handler runs one call of t: the arguments bounded and checked against
// the schema before anything runs, the verb the action names chosen and
// its required members checked, the call's context taken out of them, the
// rest decoded as the document, the method called as the caller.
func (s *Server) handler(t tool, in *jsonschema.Schema, resolved *jsonschema.Resolved, required map[string][]string) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		raw := []byte(req.Params.Arguments)
		if len(raw) > s.cfg.ArgumentsMax {
			return refused(refuse.Invalidf("arguments", fmt.Sprintf("at most %d bytes", s.cfg.ArgumentsMax))), nil
		}
		if len(raw) == 0 || string(raw) == "null" {
			raw = []byte("{}")
		}
		var inst any
		if err := json.Unmarshal(raw, &inst); err != nil {
			return refused(refuse.Invalidf("arguments", "must be one JSON object")), nil
		}
		args, isObject := inst.(map[string]any)
		if !isObject {
			return refused(refuse.Invalidf("arguments", "must be one JSON object")), nil
		}
		action, isString := args[argAction].(string)
		if _, given := args[argAction]; given && !isString && t.actions != nil {
			return refused(refuse.Invalidf(argAction, "must be a string: "+orList(t.actionNames()))), nil
		}
		v, err := t.verb(action)
		if err != nil {
			return refused(err), nil
		}
		body, given, err := split(raw, func(name string) bool { return v.takes(name, t.actions != nil) }, v.rename)
		if err != nil {
			return refused(err), nil
		}
		if err := resolved.Validate(inst); err != nil {
			return refused(v.schemaRefusal(in, required[v.name], args, body, err)), nil
		}
		for _, name := range required[v.name] {
			if _, ok := args[name]; !ok {
				return refused(refuse.Invalidf(name, "required")), nil
			}
		}
		c, err := s.call(ctx, req, given)
		if err != nil {
			return refused(err), nil
		}
		if s.cfg.Hold != nil {
			var release func()
			ctx, release = s.cfg.Hold(ctx)
			defer release()
		}
		res, err := s.run(ctx, v, c, body, given)
		if err != nil {
			return refused(v.named(err)), nil
		}
		return answer(res), nil
	}
}

// run calls t's method as c. With Config.Retry, a write that names no
// request id gets one of the server's own (service.NewRequestID), and a
// retryable answer runs the call again, bounded by it: one refused before
// anything was proposed always, a write of unknown outcome under its
// request id, whose record answers it if it did commit.
func (s *Server) run(ctx context.Context, t tool, c service.Call, body []byte, given map[string]string) (any, error) {
	if s.cfg.Retry == nil {
		return t.run(ctx, s.cfg.Service, c, body, given)
	}
	r := s.cfg.Retry.WithDefaults()
	if t.effect != verb.Read && c.RequestID == "" {
		c.RequestID = service.NewRequestID()
		given[argRequestID] = c.RequestID
	}
	until := time.Now().Add(r.Within)
	for attempt := 1; ; attempt++ {
		res, err := t.run(ctx, s.cfg.Service, c, body, given)
		if err == nil || attempt >= r.Attempts {
			return res, err
		}
		ref := rest.Refuse(err)
		if !ref.NotCommitted() && !ref.OutcomeUnknown() {
			return res, err
		}
		pause := r.Wait(attempt, ref.RetryAfter)
		if !time.Now().Add(pause).Before(until) || service.Sleep(ctx, pause) != nil {
			return res, err
		}
		s.cfg.Logger.Debug("mcp: running a call again", "tool", t.name, "attempt", attempt, "err", err)
	}
}

// named is err naming the arguments where it names renamed members: the
// member at fault, and those the decoder lists as the verb's.
func (t tool) named(err error) error {
	r, ok := refuse.As(err)
	if !ok || t.rename == nil {
		return err
	}
	field, rule := t.argName(r.Field), r.Rule
	if list, ok := strings.CutPrefix(rule, notAField); ok {
		members := strings.Split(strings.TrimSuffix(list, ")"), ", ")
		for i, m := range members {
			members[i] = t.argName(m)
		}
		rule = notAField + strings.Join(members, ", ") + ")"
	}
	return refuse.New(r.Code, field, rule)
}

// notAField begins the decoder's refusal of an unknown member.
const notAField = "is not a field of this command ("

// split takes the call's context members out of the arguments, keeping
// the document's members as they were given (a member given twice stays
// twice, for the decoder to refuse), renamed to the document's names.
func split(raw []byte, taken func(name string) bool, rename map[string]string) (body []byte, given map[string]string, err error) {
	body = append(make([]byte, 0, len(raw)), '{')
	given = map[string]string{}
	err = jsonline.Object(raw, func(key, v []byte) error {
		name := string(key)
		if taken(name) {
			str, err := jsonline.String(v)
			if err != nil {
				return refuse.Invalidf(name, "must be a string")
			}
			if _, twice := given[name]; twice {
				return refuse.Invalidf(name, "appears twice")
			}
			given[name] = str
			return nil
		}
		if m, ok := rename[name]; ok {
			key = []byte(m)
		}
		if len(body) > 1 {
			body = append(body, ',')
		}
		body = append(append(append(append(body, '"'), key...), '"', ':'), v...)
		return nil
	})
	if err != nil {
		if _, ok := refuse.As(err); ok {
			return nil, nil, err
		}
		return nil, nil, refuse.Invalidf("arguments", "must be one JSON object")
	}
	return append(body, '}'), given, nil
}

// schemaRefusal says which member the schema refused: one the tool does
// not take (in the decoder's words, naming the verb's), a required one
// missing, a value outside its set, or what the strict decoder says of the
// document (the same words as stdin and REST), or the schema's own words.
func (t tool) schemaRefusal(in *jsonschema.Schema, required []string, args map[string]any, body []byte, err error) error {
	for _, name := range slices.Sorted(maps.Keys(args)) {
		if _, ok := in.Properties[name]; !ok {
			return refuse.Invalidf(name, notAField+strings.Join(t.argNames(), ", ")+")")
		}
	}
	for _, name := range slices.Concat(in.Required, required) {
		if _, ok := args[name]; !ok {
			return refuse.Invalidf(name, "required")
		}
	}
	if r := firstRefused("", in, args, outsideEnum); r != nil {
		return r
	}
	d := reflect.New(t.doc).Interface()
	if derr := api.Decode("arguments", body, d); derr != nil {
		return t.named(derr)
	}
	// Where the decoder does not look (inside replyTo, kept raw).
	if r := firstRefused("", in, args, wrongType); r != nil {
		return r
	}
	if v, ok := args[argRequestID].(string); ok && len(v) > requestIDMax {
		return refuse.Invalidf(argRequestID, fmt.Sprintf("at most %d bytes", requestIDMax))
	}
	return refuse.Invalidf("arguments", err.Error())
}

// firstRefused walks v beside its schema s, members in name order, and
// returns the first refusal check makes of a value, naming it by its path
// (slots[0].mode, replyTo.push.url), or nil.
func firstRefused(path string, s *jsonschema.Schema, v any, check func(path string, s *jsonschema.Schema, v any) error) error {
	if s == nil {
		return nil
	}
	if err := check(path, s, v); err != nil {
		return err
	}
	switch x := v.(type) {
	case map[string]any:
		for _, name := range slices.Sorted(maps.Keys(x)) {
			p := name
			if path != "" {
				p = path + "." + name
			}
			if err := firstRefused(p, s.Properties[name], x[name], check); err != nil {
				return err
			}
		}
	case []any:
		for i, m := range x {
			if err := firstRefused(fmt.Sprintf("%s[%d]", path, i), s.Items, m, check); err != nil {
				return err
			}
		}
	}
	return nil
}

// outsideEnum refuses a string outside its schema's set.
func outsideEnum(path string, s *jsonschema.Schema, v any) error {
	str, ok := v.(string)
	if s.Enum == nil || !ok || slices.Contains(s.Enum, any(str)) {
		return nil
	}
	var set []string
	for _, e := range s.Enum {
		set = append(set, fmt.Sprint(e))
	}
	return refuse.Invalidf(path, strconv.Quote(str)+" is not "+orList(set))
}

// wrongType refuses a value that is not of its schema's type.
func wrongType(path string, s *jsonschema.Schema, v any) error {
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	kind := jsonKind(v)
	if len(types) == 0 || slices.Contains(types, kind) || kind == "integer" && slices.Contains(types, "number") {
		return nil
	}
	var want []string
	for _, t := range types {
		want = append(want, article(t))
	}
	if kind == "integer" {
		kind = "number"
	}
	return refuse.Invalidf(path, "must be "+orList(want)+", not "+kind)
}

// jsonKind is the JSON Schema type of a decoded JSON value.
func jsonKind(v any) string {
	switch x := v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	return "null"
}

// article is a JSON Schema type as the refusals name it.
func article(t string) string {
	switch t {
	case "array", "integer", "object":
		return "an " + t
	}
	return "a " + t
}

// call is the Call of a request: who the binding says it is, where the
// arguments say, under which request id and at which time.
func (s *Server) call(ctx context.Context, req *sdk.CallToolRequest, given map[string]string) (service.Call, error) {
	who, err := s.cfg.Identify(ctx, req.Extra)
	if err != nil {
		return service.Call{}, err
	}
	tenant, session, err := s.where(who, given[argSession])
	if err != nil {
		return service.Call{}, err
	}
	c := service.Call{Tenant: tenant, Session: session, Actor: who.Actor, Person: who.Person, RequestID: given[argRequestID]}
	if v := given[argNow]; v != "" {
		if c.Now, err = instant.Parse(argNow, v); err != nil {
			return service.Call{}, err
		}
	}
	return c, nil
}

// answer is a result as a tool answers it: its document, once, as text.
// The MCP specification (2025-06-18) makes structured content optional and
// asks a tool that gives it to repeat it as text; hosts differ in which of
// the two they hand a model, so a tool that gave both would cost a model
// that reads both the document twice. Text alone reaches every host.
func answer(res any) *sdk.CallToolResult {
	switch r := res.(type) {
	case interface{ toolContent() []sdk.Content }:
		return &sdk.CallToolResult{Content: r.toolContent()}
	case interface{ toolText() string }:
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: r.toolText()}}}
	}
	d := docOf(res)
	r := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(d.JSON)}}}
	if d.Replayed {
		r.Meta = sdk.Meta{"tally/replayed": true}
	}
	return r
}

// docOf is the Doc a result carries (each embeds one).
func docOf(res any) service.Doc {
	r, ok := res.(interface{ Document() service.Doc })
	if !ok {
		panic(fmt.Sprintf("mcp: result %T carries no service.Doc", res))
	}
	return r.Document()
}

// refused is a refusal as a tool error: its text is the error document
// the CLI's --json prints (field and rule in "error", and "code").
func refused(err error) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: string(errorDocument(err))}}}
}
