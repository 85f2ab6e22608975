package server

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"

	"tally/api"
	"tally/rest"
	"tally/service"
)

// retryable stands for a cluster node's retryable answer (the cluster's
// Unavailable is a rest.Refuser like it).
type retryable struct{ ref *rest.Refusal }

func (r retryable) Error() string          { return r.ref.Message }
func (r retryable) Refusal() *rest.Refusal { return r.ref }

var (
	unknownOutcome = retryable{rest.NewRetryable(service.CodeUnknownOutcome,
		`group 2 did not answer the write at this node: node: the group's leader changed while the proposal waited; the write may have committed: retry it with the same request id "req-1", which answers it from its record if it did`,
		api.M("group", api.U(2)), api.M("request_id", api.S("req-1")))}
	notCommitted = retryable{rest.NewRetryable(service.CodeUnavailable, "group 2 unavailable at this node: node: the group has no known leader",
		api.M("group", api.U(2)))}
)

// Every retryable 503 carries Retry-After, over REST with its document as
// is, and over A2A JSON-RPC as a server error whose data names the code,
// the seconds to wait and the request id to retry with.
func TestRetryableAnswers(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		rest string
		rpc  string
	}{
		{"unknown outcome", unknownOutcome,
			`{"schema_version":1,"error":"group 2 did not answer the write at this node: node: the group's leader changed while the proposal waited; the write may have committed: retry it with the same request id \"req-1\", which answers it from its record if it did","code":"UnknownOutcome","group":2,"request_id":"req-1"}` + "\n",
			`{"code":-32000,"message":"group 2 did not answer the write at this node: node: the group's leader changed while the proposal waited; the write may have committed: retry it with the same request id \"req-1\", which answers it from its record if it did","data":[{"@type":"type.googleapis.com/google.protobuf.Struct","code":"UnknownOutcome","request_id":"req-1","retry_after_seconds":1},{"@type":"type.googleapis.com/google.rpc.ErrorInfo","domain":"a2a-protocol.org","reason":"SERVER_ERROR"}]}`},
		{"not committed", notCommitted,
			`{"schema_version":1,"error":"group 2 unavailable at this node: node: the group has no known leader","code":"Unavailable","group":2}` + "\n",
			`{"code":-32000,"message":"group 2 unavailable at this node: node: the group has no known leader","data":[{"@type":"type.googleapis.com/google.protobuf.Struct","code":"Unavailable","retry_after_seconds":1},{"@type":"type.googleapis.com/google.rpc.ErrorInfo","domain":"a2a-protocol.org","reason":"SERVER_ERROR"}]}`},
		{"shutting down", errShuttingDown,
			`{"schema_version":1,"error":"server is shutting down","code":"unavailable"}` + "\n",
			`{"code":-32000,"message":"server is shutting down","data":[{"@type":"type.googleapis.com/google.protobuf.Struct","code":"unavailable","retry_after_seconds":1},{"@type":"type.googleapis.com/google.rpc.ErrorInfo","domain":"a2a-protocol.org","reason":"SERVER_ERROR"}]}`},
	} {
		rec := httptest.NewRecorder()
		(&Server{}).writeError(rec, c.err)
		if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" || rec.Body.String() != c.rest {
			t.Errorf("%s: REST %d Retry-After %q\n%s\nwant %s", c.name, rec.Code, rec.Header().Get("Retry-After"), rec.Body, c.rest)
		}
		b, err := json.Marshal(rpcErrorOf(a2aError(c.err)))
		if err != nil || string(b) != c.rpc {
			t.Errorf("%s: JSON-RPC error %s %v\nwant %s", c.name, b, err, c.rpc)
		}
	}
	// A refusal that is not retryable carries no Retry-After.
	rec := httptest.NewRecorder()
	(&Server{}).writeError(rec, errors.Join(errNotFound))
	if rec.Code != 404 || rec.Header().Get("Retry-After") != "" {
		t.Errorf("404: Retry-After %q", rec.Header().Get("Retry-After"))
	}
}
