package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"tally/api"
	"tally/verb"
)

var pathParam = regexp.MustCompile(`\{([a-z]+)\}`)

// schemas are the document's components: every request body a route
// names (route.body), each derived from its api type by reflection
// (schemaOf): the verb table's requests, a token's, and the error
// document every refusal is; the two bodies that are no api document
// (bytes, a cluster's signed request); and each verb's success document,
// inferred from what the server answers (responseSchemas).
func schemas() (map[string]any, error) {
	out := map[string]any{
		verb.BodyBytes: map[string]any{"type": "string", "format": "binary"},
		clusterRequest: map[string]any{"type": "object", "description": "a cluster node's join or operator request, signed with the join secret (tally cluster; docs/CLUSTER.md)"},
	}
	seen := map[string]reflect.Type{}
	add := func(name string, t reflect.Type, path []string) error {
		if was, ok := seen[name]; ok {
			if was != t {
				return fmt.Errorf("openapi: schema %s is both %s and %s", name, was, t)
			}
			return nil
		}
		seen[name] = t
		sc, err := schemaOf(t, path)
		out[name] = sc
		return err
	}
	for _, v := range verb.Table() {
		if v.HTTP.Body == "" || v.HTTP.Body == verb.BodyBytes {
			continue
		}
		if err := add(v.HTTP.Body, v.Request, v.HTTP.Members); err != nil {
			return nil, err
		}
	}
	if err := add("TokenCreate", reflect.TypeFor[api.TokenCreate](), nil); err != nil {
		return nil, err
	}
	responses, err := responseSchemas()
	if err != nil {
		return nil, err
	}
	for name, sc := range responses {
		out[responseSchemaName(name)] = sc
	}
	return out, add("Error", reflect.TypeFor[errorDocument](), nil)
}

// errorDocument is the error document of every refusal (service.Refuse),
// described for its schema.
type errorDocument struct {
	SchemaVersion int    `json:"schema_version"`
	Error         string `json:"error" jsonschema:"field: rule"`
	Code          string `json:"code" jsonschema:"invalid, not_found, conflict, forbidden, unauthenticated, IdempotencyConflict, RequestHistoryExpired, corrupt, error"`
}

// schemaOptions map tally's own JSON types to their schemas, as MCP's
// tools describe them.
var schemaOptions = &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[api.Object]():      {Type: "object"},
	reflect.TypeFor[json.RawMessage](): {Types: []string{"string", "object"}, Description: "an agent's URL, or {url, extension, push}"},
}}

// schemaOf is the JSON Schema of the document type t, from its json tags
// (and jsonschema tags, its descriptions), so a schema cannot drift from
// the decoder. A member is required where the type does not mark it
// omitempty, except a list (absent reads as empty) and a member the path
// sets (path).
func schemaOf(t reflect.Type, path []string) (*jsonschema.Schema, error) {
	sc, err := jsonschema.ForType(t, schemaOptions)
	if err != nil {
		return nil, fmt.Errorf("openapi: schema of %s: %w", t, err)
	}
	sc.Required = slices.DeleteFunc(sc.Required, func(m string) bool {
		p := sc.Properties[m]
		return slices.Contains(path, m) || p != nil && (p.Type == "array" || slices.Contains(p.Types, "array"))
	})
	return sc, nil
}

func str(desc string) map[string]any {
	if desc == "" {
		return map[string]any{"type": "string"}
	}
	return map[string]any{"type": "string", "description": desc}
}

// OpenAPI builds the document from the route table, so every route the
// server registers is described and nothing else is.
func (s *Server) OpenAPI() (map[string]any, error) {
	components, err := schemas()
	if err != nil {
		return nil, err
	}
	paths := map[string]any{}
	for _, rt := range s.routes {
		// "/{$}" is the mux's "exactly /"; OpenAPI spells it "/".
		path := strings.TrimSuffix(rt.pattern, "{$}")
		item, _ := paths[path].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[path] = item
		}
		ok := map[string]any{"description": "OK"}
		status := "200"
		if _, documented := components[responseSchemaName(rt.name)]; documented {
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/" + responseSchemaName(rt.name)}}}
			if v, _ := verb.Lookup(rt.name); v.HTTP.Status != 0 {
				status = strconv.Itoa(v.HTTP.Status)
			}
		}
		op := map[string]any{
			"operationId": rt.name,
			"summary":     rt.summary,
			"responses": map[string]any{
				status:    ok,
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
		if rt.body == verb.BodyBytes {
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
			"schemas":         components,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}, nil
}

func (s *Server) openapi(*http.Request) (int, any, error) {
	doc, err := s.OpenAPI()
	if err != nil {
		return 0, nil, err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return 0, nil, fmt.Errorf("openapi: %w", err)
	}
	return http.StatusOK, append(b, '\n'), nil
}
