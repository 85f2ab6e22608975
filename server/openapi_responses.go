package server

import (
	_ "embed"
	"encoding/json"
	"fmt"
)

// responsesJSON is the schema of each verb's success document, by verb
// name: inferred from the documents the server answers when the verb
// table's script (verb/verbtest) runs, and written by
// TestOpenAPIResponsesAreTheDocuments -update, which fails while it differs
// from what the server writes. None is written by hand.
//
//go:embed openapi_responses.json
var responsesJSON []byte

// responseSchemas are responsesJSON read: verb name → JSON Schema.
func responseSchemas() (map[string]any, error) {
	var out map[string]any
	if err := json.Unmarshal(responsesJSON, &out); err != nil {
		return nil, fmt.Errorf("openapi: response schemas: %w", err)
	}
	return out, nil
}

// responseSchemaName is the component a verb's success document is.
func responseSchemaName(verbName string) string { return verbName + ".response" }
