package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tally/api"
	"tally/instant"
	"tally/jsonline"
	"tally/service"
	"tally/vocab"
)

// effect is what a tool does to the ledger, for its annotations.
type effect int

const (
	reads       effect = iota // changes nothing
	appends                   // adds a record that moves an obligation on
	destructive               // ends an obligation for good (resolve, cancel, revoke, withdraw)
)

// A tool is one Service method as MCP offers it: its document (the api
// document it takes, whose members are the tool's arguments besides the
// call's context), its result (whose document is the structured content)
// and run, which decodes the arguments with the one strict decoder and
// calls the method.
type tool struct {
	name, title, description string
	effect                   effect
	doc                      reflect.Type // the document's struct type
	// required overrides the members the document's tags make required,
	// where the document leaves one to a REST path (a promise's id).
	required []string
	// extra are arguments beside the document and the Call: what REST
	// carries in the path (an expectation's id) or as the body (an
	// artifact's bytes). Each is a string.
	extra  []extra
	result reflect.Type
	run    func(ctx context.Context, svc service.Service, c service.Call, body []byte, given map[string]string) (any, error)
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
)

// requestIDMax bounds a request id, as REST bounds Idempotency-Key.
const requestIDMax = service.RequestIDMax

// write is a write method whose document is D.
func write[D, R any](name, title, description string, e effect, m func(service.Service, context.Context, service.Call, D) (R, error)) tool {
	return tool{name: name, title: title, description: description, effect: e,
		doc: reflect.TypeFor[D](), result: reflect.TypeFor[R](),
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
func writeAt[D, R any](name, title, description string, e effect, id extra, m func(service.Service, context.Context, service.Call, string, D) (R, error)) tool {
	id.required = true
	return tool{name: name, title: title, description: description, effect: e,
		doc: reflect.TypeFor[D](), result: reflect.TypeFor[R](), extra: []extra{id},
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
	return tool{name: name, title: title, description: description, effect: reads,
		doc: reflect.TypeFor[D](), result: reflect.TypeFor[R](),
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

// takes reports whether name is an argument of t beside its document.
func (t tool) takes(name string) bool {
	switch name {
	case argSession:
		return true
	case argRequestID:
		return t.effect != reads
	case argNow:
		return t.effect == reads
	}
	for _, x := range t.extra {
		if x.name == name {
			return true
		}
	}
	return false
}

// textOnly marks a tool whose answer is text, not a document: it has no
// output schema.
func textOnly(t tool) tool {
	t.result = nil
	return t
}

// needs sets the members a tool requires.
func (t tool) needs(members ...string) tool {
	t.required = members
	return t
}

// tools is every tool of svc, family by family; readPaths offers the
// arguments that name a file for the server to read.
func tools(svc service.Service, readPaths bool) []tool {
	return slices.Concat(promiseTools(), claimTools(readPaths), expectTools(), logTools(svc), readyTools())
}

// schemaOptions maps tally's own JSON types to their schemas.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[api.Object](): {Type: "object", Description: "a JSON object of the caller's own, kept as given"},
}}

// inputSchema is the document's schema plus the call's context.
func (t tool) inputSchema() (*jsonschema.Schema, error) {
	s, err := jsonschema.ForType(t.doc, schemaOptions)
	if err != nil {
		return nil, fmt.Errorf("tool %s: input schema: %w", t.name, err)
	}
	if s.Properties == nil {
		s.Properties = map[string]*jsonschema.Schema{}
	}
	ctx := map[string]*jsonschema.Schema{
		argSession: {Type: "string", Description: "TENANT/SESSION, or SESSION in the caller's tenant (default: the server's)"},
	}
	if t.effect == reads {
		ctx[argNow] = &jsonschema.Schema{Type: "string", Description: "RFC 3339 time the views are computed at (default: now)"}
	} else {
		ctx[argRequestID] = &jsonschema.Schema{Type: "string", MaxLength: jsonschema.Ptr(requestIDMax),
			Description: "makes the write idempotent: a retry with the same id and arguments returns the recorded answer"}
	}
	if t.required != nil {
		s.Required = t.required
	}
	// Inside the document, what is required is the family core's to say
	// (a check's mode and attempts have defaults there): nested objects
	// keep their members' types and stay closed, and require nothing.
	for _, p := range s.Properties {
		loosen(p)
	}
	add := func(name string, c *jsonschema.Schema) error {
		if _, clash := s.Properties[name]; clash {
			return fmt.Errorf("tool %s: the document has a member %q, which the tool takes beside it", t.name, name)
		}
		s.Properties[name] = c
		s.PropertyOrder = append(s.PropertyOrder, name)
		return nil
	}
	for _, x := range t.extra {
		if err := add(x.name, x.schema); err != nil {
			return nil, err
		}
		if x.required {
			s.Required = append(s.Required, x.name)
		}
	}
	for _, name := range []string{argSession, argRequestID, argNow} {
		if c, ok := ctx[name]; ok {
			if err := add(name, c); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
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

// outputSchema is the schema of the result's document: schema_version and
// one member for each of the result's fields besides its Doc, named as the
// document names them (its json tag, else snake_case), with the field's
// JSON kind. The document may hold more.
func (t tool) outputSchema() *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"schema_version": {Type: "integer"}},
		Required: []string{"schema_version"}, PropertyOrder: []string{"schema_version"}}
	for i := 0; i < t.result.NumField(); i++ {
		f := t.result.Field(i)
		if !f.IsExported() || f.Type == reflect.TypeFor[service.Doc]() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		tagged := name != ""
		if !tagged {
			name = snake(f.Name)
		}
		s.Properties[name] = kindSchema(f.Type)
		// A member is promised only where the result is read from its
		// document by that name (a json tag); a list may be left out of a
		// document when it is empty.
		if k := f.Type.Kind(); tagged && k != reflect.Slice && k != reflect.Pointer {
			s.Required = append(s.Required, name)
		}
		s.PropertyOrder = append(s.PropertyOrder, name)
	}
	return s
}

// kindSchema is the JSON kind of values of t: a document's nested objects
// are described by their own documents, so only the kind is promised here.
func kindSchema(t reflect.Type) *jsonschema.Schema {
	switch {
	case t == reflect.TypeFor[time.Time]():
		return &jsonschema.Schema{Type: "string"}
	case t.Kind() == reflect.Pointer:
		s := kindSchema(t.Elem())
		return &jsonschema.Schema{Types: []string{s.Type, "null"}}
	}
	switch t.Kind() {
	case reflect.String:
		return &jsonschema.Schema{Type: "string"}
	case reflect.Bool:
		return &jsonschema.Schema{Type: "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return &jsonschema.Schema{Type: "integer"}
	case reflect.Float32, reflect.Float64:
		return &jsonschema.Schema{Type: "number"}
	case reflect.Slice, reflect.Array:
		return &jsonschema.Schema{Type: "array", Items: kindSchema(t.Elem())}
	}
	return &jsonschema.Schema{Type: "object"}
}

// snake is a Go field name as a document member: PromiseID → promise_id.
func snake(name string) string {
	var b strings.Builder
	rs := []rune(name)
	for i, r := range rs {
		if unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// addTool registers t with its schemas, annotations and handler.
func (s *Server) addTool(t tool) error {
	in, err := t.inputSchema()
	if err != nil {
		return err
	}
	resolved, err := in.Resolve(nil)
	if err != nil {
		return fmt.Errorf("tool %s: resolve input schema: %w", t.name, err)
	}
	ann := &sdk.ToolAnnotations{Title: t.title, ReadOnlyHint: t.effect == reads, OpenWorldHint: jsonschema.Ptr(false)}
	if t.effect != reads {
		ann.DestructiveHint = jsonschema.Ptr(t.effect == destructive)
		// A write given a request_id is idempotent; the hint is for the
		// calls that give none.
		ann.IdempotentHint = false
	}
	st := &sdk.Tool{Name: t.name, Title: t.title, Description: t.description, Annotations: ann, InputSchema: in}
	if t.result != nil {
		st.OutputSchema = t.outputSchema()
	}
	s.mcp.AddTool(st, s.handler(t, in, resolved))
	return nil
}

// handler runs one call of t: the arguments bounded and checked against
// the schema before anything runs, the call's context taken out of them,
// the rest decoded as the document, the method called as the caller.
func (s *Server) handler(t tool, in *jsonschema.Schema, resolved *jsonschema.Resolved) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		raw := []byte(req.Params.Arguments)
		if len(raw) > s.cfg.ArgumentsMax {
			return refused(vocab.Invalidf("arguments", fmt.Sprintf("at most %d bytes", s.cfg.ArgumentsMax))), nil
		}
		if len(raw) == 0 || string(raw) == "null" {
			raw = []byte("{}")
		}
		var inst any
		if err := json.Unmarshal(raw, &inst); err != nil {
			return refused(vocab.Invalidf("arguments", "must be one JSON object")), nil
		}
		if _, ok := inst.(map[string]any); !ok {
			return refused(vocab.Invalidf("arguments", "must be one JSON object")), nil
		}
		body, given, err := split(raw, t.takes)
		if err != nil {
			return refused(err), nil
		}
		if err := resolved.Validate(inst); err != nil {
			return refused(t.schemaRefusal(in, inst.(map[string]any), body, err)), nil
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
		res, err := s.run(ctx, t, c, body, given)
		if err != nil {
			return refused(err), nil
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
	if t.effect != reads && c.RequestID == "" {
		c.RequestID = service.NewRequestID()
		given[argRequestID] = c.RequestID
	}
	until := time.Now().Add(r.Within)
	for attempt := 1; ; attempt++ {
		res, err := t.run(ctx, s.cfg.Service, c, body, given)
		if err == nil || attempt >= r.Attempts {
			return res, err
		}
		ref := service.Refuse(err)
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

// split takes the call's context members out of the arguments, keeping
// the document's members as they were given (a member given twice stays
// twice, for the decoder to refuse).
func split(raw []byte, taken func(name string) bool) (body []byte, given map[string]string, err error) {
	body = append(make([]byte, 0, len(raw)), '{')
	given = map[string]string{}
	err = jsonline.Object(raw, func(key, v []byte) error {
		if name := string(key); taken(name) {
			str, err := jsonline.String(v)
			if err != nil {
				return vocab.Invalidf(name, "must be a string")
			}
			if _, twice := given[name]; twice {
				return vocab.Invalidf(name, "appears twice")
			}
			given[name] = str
			return nil
		}
		if len(body) > 1 {
			body = append(body, ',')
		}
		body = append(append(append(append(body, '"'), key...), '"', ':'), v...)
		return nil
	})
	if err != nil {
		if _, ok := vocab.As(err); ok {
			return nil, nil, err
		}
		return nil, nil, vocab.Invalidf("arguments", "must be one JSON object")
	}
	return append(body, '}'), given, nil
}

// schemaRefusal says which member the schema refused: a required one
// missing, or what the strict decoder says of the document (the same words
// as stdin and REST), or the schema's own words.
func (t tool) schemaRefusal(in *jsonschema.Schema, args map[string]any, body []byte, err error) error {
	for _, name := range in.Required {
		if _, ok := args[name]; !ok {
			return vocab.Invalidf(name, "required")
		}
	}
	d := reflect.New(t.doc).Interface()
	if derr := api.Decode("arguments", body, d); derr != nil {
		return derr
	}
	if v, ok := args[argRequestID].(string); ok && len(v) > requestIDMax {
		return vocab.Invalidf(argRequestID, fmt.Sprintf("at most %d bytes", requestIDMax))
	}
	return vocab.Invalidf("arguments", err.Error())
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

// answer is a result as a tool answers it: its document as the structured
// content, and as text for a host that shows only text.
func answer(res any) *sdk.CallToolResult {
	if t, ok := res.(interface{ toolText() string }); ok {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: t.toolText()}}}
	}
	d := docOf(res)
	r := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: string(d.JSON)}}, StructuredContent: json.RawMessage(d.JSON)}
	if d.Replayed {
		r.Meta = sdk.Meta{"tally/replayed": true}
	}
	return r
}

// docOf is the Doc a result carries (each embeds one).
func docOf(res any) service.Doc {
	v := reflect.Indirect(reflect.ValueOf(res))
	d, ok := v.FieldByName("Doc").Interface().(service.Doc)
	if !ok {
		panic(fmt.Sprintf("mcp: result %T carries no service.Doc", res))
	}
	return d
}

// refused is a refusal as a tool error: its text is the error document
// the CLI's --json prints (field and rule in "error", and "code").
func refused(err error) *sdk.CallToolResult {
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: string(errorDocument(err))}}}
}
