package mcp

import (
	"context"
	"encoding/json"
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
