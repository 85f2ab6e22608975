package server

import (
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"time"

	"tally/api"
)

var pathParam = regexp.MustCompile(`\{([a-z]+)\}`)

// schemas are the request bodies, as JSON Schema.
var schemas = map[string]any{
	"Declare": obj([]string{"promise", "to", "until"}, map[string]any{
		"id": str("your id (≤128 characters, no whitespace); default: minted pnk_xxxxxx"), "promise": str("what is promised"),
		"by": str("the debtor; must be the authenticated identity"), "to": str("the creditor"), "on": str("antecedent promise id"),
		"until": str("RFC 3339, or a duration from now (90m, 2h, 3d)"), "task": str("A2A task id"), "meta": map[string]any{"type": "object"},
	}),
	"Amend":   obj([]string{"until"}, map[string]any{"until": str("new deadline"), "reason": str("why"), "meta": map[string]any{"type": "object"}}),
	"Resolve": obj([]string{"as"}, map[string]any{"as": map[string]any{"enum": []string{"satisfied", "cancelled", "released"}}, "evidence": map[string]any{"type": "array", "items": str("")}, "reason": str(""), "meta": map[string]any{"type": "object"}}),
	"Assess":  obj(nil, map[string]any{"state": map[string]any{"enum": []string{"violated"}}, "observer": str("must be the authenticated identity"), "note": str(""), "meta": map[string]any{"type": "object"}}),
	"Error":   obj([]string{"schema_version", "error", "code"}, map[string]any{"schema_version": map[string]any{"type": "integer"}, "error": str("field: rule"), "code": str("invalid, not_found, conflict, forbidden, unauthenticated, IdempotencyConflict, RequestHistoryExpired, corrupt, error")}),
}

func init() {
	reason := str("why")
	for name, sc := range map[string]any{
		"ClaimCreate":          schemaOf(reflect.TypeOf(api.ClaimCreate{})),
		"ClaimTestament":       schemaOf(reflect.TypeOf(api.ClaimTestament{})),
		"ClaimCheck":           schemaOf(reflect.TypeOf(api.ClaimCheck{})),
		"ExpectRaise":          schemaOf(reflect.TypeOf(api.ExpectRaise{})),
		"TokenCreate":          schemaOf(reflect.TypeOf(api.TokenCreate{})),
		"ClaimPost":            obj(nil, map[string]any{"claim": str("the path's claim"), "failed": boolean(), "reason": reason}),
		"ClaimEnd":             obj([]string{"reason"}, map[string]any{"claim": str("the path's claim"), "reason": reason}),
		"ClaimSupersede":       obj([]string{"successor"}, map[string]any{"claim": str("the path's claim"), "successor": str("names this claim as predecessor"), "reason": reason}),
		"ClaimReceipt":         obj(nil, map[string]any{"claim": str("the path's claim"), "decline": boolean(), "reason": reason}),
		"ClaimAdopt":           obj([]string{"holder"}, map[string]any{"claim": str("the path's claim"), "holder": str("the new receipt holder"), "reason": reason}),
		"ClaimProgress":        obj([]string{"generation"}, map[string]any{"claim": str("the path's claim"), "generation": integer(), "note": str("")}),
		"ClaimArtifactReceive": obj(nil, map[string]any{"claim": str("the path's claim"), "artifact": str("the path's artifact"), "digest": str("default: the recorded one")}),
		"Empty":                obj(nil, map[string]any{"claim": str("the path's claim"), "testament": str("the path's testament")}),
		"Bytes":                map[string]any{"type": "string", "format": "binary"},
		"ClusterRequest":       map[string]any{"type": "object", "description": "a cluster node's join or operator request, signed with the join secret (tally cluster; docs/CLUSTER.md)"},
		"ExpectWithdraw":       obj(nil, map[string]any{"reason": reason}),
		"ExpectFact":           obj([]string{"factKey", "subject"}, map[string]any{"factKey": str(""), "subject": obj([]string{"type", "id"}, map[string]any{"type": str(""), "id": str("")}), "at": str("RFC 3339; default now")}),
		"ExpectTaskOutcome":    obj([]string{"outcome"}, map[string]any{"outcome": map[string]any{"enum": []string{"completed", "cancelled", "failed"}}}),
		"ExpectLapse":          obj([]string{"expectationId", "lapse"}, map[string]any{"expectationId": str(""), "lapse": map[string]any{"enum": []string{"overdue", "skipped", "stalled"}}, "dueAt": str("RFC 3339; default the due time in force")}),
	} {
		schemas[name] = sc
	}
}

func boolean() map[string]any { return map[string]any{"type": "boolean"} }
func integer() map[string]any { return map[string]any{"type": "integer"} }

// schemaOf derives a JSON Schema from a document type's json tags, so a
// schema cannot drift from the decoder.
func schemaOf(t reflect.Type) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeOf(time.Time{}) {
		return map[string]any{"type": "string", "format": "date-time"}
	}
	switch t.Kind() {
	case reflect.String:
		return str("")
	case reflect.Bool:
		return boolean()
	case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Uint, reflect.Int32:
		return integer()
	case reflect.Float64, reflect.Float32:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.Struct:
		props := map[string]any{}
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			props[name] = schemaOf(t.Field(i).Type)
		}
		return obj(nil, props)
	}
	return map[string]any{}
}

func obj(required []string, props map[string]any) map[string]any {
	o := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if required != nil {
		o["required"] = required
	}
	return o
}

func str(desc string) map[string]any {
	if desc == "" {
		return map[string]any{"type": "string"}
	}
	return map[string]any{"type": "string", "description": desc}
}

// OpenAPI builds the document from the route table, so every route the
// server registers is described and nothing else is.
func (s *Server) OpenAPI() map[string]any {
	paths := map[string]any{}
	for _, rt := range s.routes {
		// "/{$}" is the mux's "exactly /"; OpenAPI spells it "/".
		path := strings.TrimSuffix(rt.pattern, "{$}")
		item, _ := paths[path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[path] = item
		}
		op := map[string]any{
			"operationId": rt.name,
			"summary":     rt.summary,
			"responses": map[string]any{
				"200":     map[string]any{"description": "OK"},
				"default": map[string]any{"description": "A refusal or failure", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}},
			},
		}
		var params []any
		for _, m := range pathParam.FindAllStringSubmatch(rt.pattern, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": str("")})
		}
		if rt.write && !rt.public { // a public write is a cluster node's signed request: its nonce is its key
			params = append(params, map[string]any{"name": "Idempotency-Key", "in": "header", "required": false, "schema": str("a request id: a retry with the same key and body gets the recorded response")})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if rt.body == "Bytes" {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/octet-stream": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Bytes"}}}}
		} else if rt.body != "" {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/" + rt.body}}}}
		}
		if strings.HasPrefix(rt.pattern, "/v1/tenants") {
			op["security"] = []any{map[string]any{"bearer": []any{}}}
		}
		item[strings.ToLower(rt.method)] = op
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "tally", "version": "1"},
		"paths":   paths,
		"components": map[string]any{
			"schemas":         schemas,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
}

func (s *Server) openapi(*http.Request) (int, any, error) {
	b, _ := json.MarshalIndent(s.OpenAPI(), "", "  ")
	return http.StatusOK, append(b, '\n'), nil
}
