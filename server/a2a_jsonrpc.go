package server

// The A2A JSON-RPC 2.0 endpoint. Its envelope is tally's own rather than
// a2a-go's handler, so that every answer past authentication is a JSON-RPC
// response object carrying the request's id, with the code the failure
// deserves (a2a-go answers a non-object with -32602 naming Go types, takes
// any A2A-Version, and opens an event stream to say streaming is not
// offered). The methods are still served by a2asrv.RequestHandler (the
// intercepted a2aHandler), with a2a-go's request and result types.
//
//	-32700 the body is not JSON, or not UTF-8
//	-32600 not a request object: a batch, a non-object, a bad jsonrpc,
//	       method or id member, an unknown member; a body over the limit
//	       (HTTP 413) or a Content-Type other than application/json (415)
//	-32601 a method A2A v1.0 does not define
//	-32602 params that do not decode, naming the field
//	-32603 the server's fault
//	-32009 an A2A-Version header other than 1.0 (or 1, or none)
//
// A notification (no id) is executed and answered with 204 and no body.
// Authentication failures stay HTTP 401 with WWW-Authenticate, as A2A's
// transport rules have it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/errordetails"

	"tally/a2atask"
	"tally/jsonline"
)

// A2AVersion is the A2A protocol version tally speaks.
const A2AVersion = "1.0"

// a2aVersionOK reports whether an A2A-Version header names the version
// tally speaks: "1.0", its major version alone, or no header (a client
// that does not say is taken to speak 1.0; 0.3 clients send their version).
func a2aVersionOK(v string) bool {
	v = strings.TrimSpace(v)
	return v == "" || v == A2AVersion || v == "1"
}

// rpcCodes maps a2a's errors to JSON-RPC codes, in the order they are
// tested (an error wraps one of them).
var rpcCodes = []struct {
	err  error
	code int
}{
	{a2a.ErrParseError, -32700},
	{a2a.ErrInvalidRequest, -32600},
	{a2a.ErrMethodNotFound, -32601},
	{a2a.ErrInvalidParams, -32602},
	{a2a.ErrInternalError, -32603},
	{a2a.ErrServerError, -32000},
	{a2a.ErrTaskNotFound, -32001},
	{a2a.ErrTaskNotCancelable, -32002},
	{a2a.ErrPushNotificationNotSupported, -32003},
	{a2a.ErrUnsupportedOperation, -32004},
	{a2a.ErrUnsupportedContentType, -32005},
	{a2a.ErrInvalidAgentResponse, -32006},
	{a2a.ErrExtendedCardNotConfigured, -32007},
	{a2a.ErrExtensionSupportRequired, -32008},
	{a2a.ErrVersionNotSupported, -32009},
	{a2a.ErrUnauthenticated, -31401},
	{a2a.ErrUnauthorized, -31403},
}

// rpcError is a JSON-RPC error object. Its data is a2a's: the error's
// details as a google.protobuf.Struct, then a google.rpc.ErrorInfo with
// the A2A reason (no timestamp, so an answer is the same bytes each time).
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    []any  `json:"data,omitempty"`
}

// rpcErrorOf is the error object of err; an error that is no a2a error is
// internal.
func rpcErrorOf(err error) *rpcError {
	e := &rpcError{Code: -32603, Message: err.Error()}
	sentinel := a2a.ErrInternalError
	for _, c := range rpcCodes {
		if errors.Is(err, c.err) {
			e.Code, sentinel = c.code, c.err
			break
		}
	}
	var ae *a2a.Error
	if e.Code == -32603 && !errors.As(err, &ae) {
		// The cause (a path, a disk error) is for the server's log, not
		// for the client.
		e.Message = "internal error: the server could not answer this request; its log has the cause"
	}
	if errors.As(err, &ae) {
		if len(ae.Details) > 0 {
			e.Data = append(e.Data, errordetails.NewFromStruct(ae.Details))
		}
		for _, d := range ae.TypedDetails {
			if d.TypeURL != errordetails.ErrorInfoType {
				e.Data = append(e.Data, d)
			}
		}
	}
	e.Data = append(e.Data, errordetails.NewErrorInfo(a2a.ErrorReason(sentinel), a2a.ProtocolDomain, nil))
	return e
}

// rpcRefusal is an error of the envelope: its a2a error and the HTTP
// status it is answered with (200 unless the transport refused the body).
type rpcRefusal struct {
	status int
	err    error
}

func refuseRequest(status int, sentinel error, msg string) *rpcRefusal {
	return &rpcRefusal{status: status, err: a2a.NewError(sentinel, msg)}
}

// rpcRequest is a request object that passed the envelope's checks.
type rpcRequest struct {
	id     json.RawMessage // nil: a notification
	method string
	params json.RawMessage // nil when absent or null
}

var nullID = json.RawMessage("null")

// a2aJSONRPC returns the JSON-RPC endpoint's handler, behind the A2A
// middleware (which reads the body, refusing in the envelope).
func (s *Server) a2aJSONRPC() func(http.ResponseWriter, *http.Request) {
	h := s.a2aRequestHandler()
	serve := func(w http.ResponseWriter, r *http.Request) {
		req, ref := readRPCRequest(a2aCallFrom(r.Context()).body, r.Header)
		if ref != nil {
			id := nullID
			if req != nil && req.id != nil {
				id = req.id
			}
			s.writeRPC(w, ref.status, id, nil, ref.err)
			return
		}
		result, err := s.callRPC(r.Context(), h, req)
		if req.id == nil {
			if err != nil {
				s.metrics.rpcError(rpcErrorOf(err).Code)
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		s.writeRPC(w, http.StatusOK, req.id, result, err)
	}
	return s.a2aAuthenticated(s.a2aJSONBody(s.rpcRefuse, true, http.HandlerFunc(serve))).ServeHTTP
}

// readRPCRequest checks the envelope of a request's body (hdr its
// headers). A refusal found once the id is known comes with the request,
// so that the answer carries the id.
func readRPCRequest(body []byte, hdr http.Header) (*rpcRequest, *rpcRefusal) {
	if !utf8.Valid(body) {
		return nil, refuseRequest(http.StatusOK, a2a.ErrParseError,
			"request: invalid UTF-8 at byte offset "+strconv.Itoa(invalidUTF8At(body)))
	}
	var top json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, refuseRequest(http.StatusOK, a2a.ErrParseError, "request: "+syntaxWhere(body, err))
	}
	switch top[0] {
	case '[':
		return nil, refuseRequest(http.StatusOK, a2a.ErrInvalidRequest,
			"request: batches are not supported: send one request object per HTTP request")
	case '{':
	default:
		return nil, refuseRequest(http.StatusOK, a2a.ErrInvalidRequest, "request: must be a JSON-RPC request object")
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(top, &members); err != nil {
		return nil, refuseRequest(http.StatusOK, a2a.ErrInvalidRequest, "request: must be a JSON-RPC request object")
	}
	req := &rpcRequest{}
	if id, ok := members["id"]; ok {
		switch id[0] {
		case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			req.id = compactJSON(id)
		default:
			return nil, refuseRequest(http.StatusOK, a2a.ErrInvalidRequest, "id: must be a string, a number or null")
		}
	}
	refuse := func(sentinel error, msg string) (*rpcRequest, *rpcRefusal) {
		return req, refuseRequest(http.StatusOK, sentinel, msg)
	}
	for _, k := range slices.Sorted(maps.Keys(members)) {
		if !slices.Contains([]string{"jsonrpc", "method", "params", "id"}, k) {
			return refuse(a2a.ErrInvalidRequest, "request: unknown member "+strconv.Quote(k)+" (members: jsonrpc, method, params, id)")
		}
	}
	var version string
	if v, ok := members["jsonrpc"]; !ok {
		return refuse(a2a.ErrInvalidRequest, `jsonrpc: required: "2.0"`)
	} else if json.Unmarshal(v, &version) != nil || version != "2.0" {
		return refuse(a2a.ErrInvalidRequest, `jsonrpc: must be "2.0"`)
	}
	if m, ok := members["method"]; !ok {
		return refuse(a2a.ErrInvalidRequest, "method: required: the name of an A2A method")
	} else if json.Unmarshal(m, &req.method) != nil || req.method == "" {
		return refuse(a2a.ErrInvalidRequest, "method: must be a non-empty string")
	}
	if p, ok := members["params"]; ok && string(p) != "null" {
		if p[0] != '{' {
			return refuse(a2a.ErrInvalidParams, "params: must be an object")
		}
		req.params = p
	}
	if v := hdr.Get(a2a.SvcParamVersion); !a2aVersionOK(v) {
		return req, &rpcRefusal{status: http.StatusOK, err: a2a.NewError(a2a.ErrVersionNotSupported,
			"A2A-Version: this server speaks A2A "+A2AVersion+", not "+strconv.Quote(v)).
			WithDetails(map[string]any{"field": a2a.SvcParamVersion, "supportedVersions": []any{A2AVersion}})}
	}
	return req, nil
}

// rpcMethod serves one JSON-RPC method: it decodes the params into the
// method's request type and calls the handler.
type rpcMethod func(ctx context.Context, h a2asrv.RequestHandler, params json.RawMessage) (any, error)

func rpcCall[Req, Res any](call func(a2asrv.RequestHandler, context.Context, *Req) (Res, error)) rpcMethod {
	return func(ctx context.Context, h a2asrv.RequestHandler, params json.RawMessage) (any, error) {
		var req Req
		if err := decodeParams(params, &req); err != nil {
			return nil, err
		}
		return call(h, ctx, &req)
	}
}

// rpcUnsupported answers a method the card says is not offered.
func rpcUnsupported(msg string) rpcMethod {
	return func(context.Context, a2asrv.RequestHandler, json.RawMessage) (any, error) {
		return nil, a2a.NewError(a2a.ErrUnsupportedOperation, msg)
	}
}

// rpcMethods are A2A v1.0's JSON-RPC methods.
var rpcMethods = map[string]rpcMethod{
	"SendMessage": rpcCall(func(h a2asrv.RequestHandler, ctx context.Context, req *a2a.SendMessageRequest) (any, error) {
		res, err := h.SendMessage(ctx, req)
		if err != nil {
			return nil, err
		}
		return a2a.StreamResponse{Event: res}, nil
	}),
	"GetTask":    rpcCall(a2asrv.RequestHandler.GetTask),
	"ListTasks":  rpcCall(a2asrv.RequestHandler.ListTasks),
	"CancelTask": rpcCall(a2asrv.RequestHandler.CancelTask),
	"SendStreamingMessage": rpcUnsupported("SendStreamingMessage: streaming is not offered (capabilities.streaming is false): " +
		"use SendMessage, and the session's event stream (…/events) for what follows"),
	"SubscribeToTask": rpcUnsupported("SubscribeToTask: streaming is not offered (capabilities.streaming is false): " +
		"poll GetTask, or follow the session's event stream (…/events)"),
	"CreateTaskPushNotificationConfig": rpcCall(a2asrv.RequestHandler.CreateTaskPushConfig),
	"GetTaskPushNotificationConfig":    rpcCall(a2asrv.RequestHandler.GetTaskPushConfig),
	"ListTaskPushNotificationConfigs":  rpcCall(a2asrv.RequestHandler.ListTaskPushConfigs),
	"DeleteTaskPushNotificationConfig": rpcCall(func(h a2asrv.RequestHandler, ctx context.Context, req *a2a.DeleteTaskPushConfigRequest) (any, error) {
		if err := h.DeleteTaskPushConfig(ctx, req); err != nil {
			return nil, err
		}
		return struct{}{}, nil
	}),
	"GetExtendedAgentCard": rpcCall(a2asrv.RequestHandler.GetExtendedAgentCard),
}

// callRPC runs a checked request. A panic is the server's fault (-32603),
// answered as JSON-RPC like every other.
func (s *Server) callRPC(ctx context.Context, h a2asrv.RequestHandler, req *rpcRequest) (result any, err error) {
	m, ok := rpcMethods[req.method]
	if !ok {
		return nil, a2a.NewError(a2a.ErrMethodNotFound, "method: "+strconv.Quote(req.method)+" is not an A2A "+A2AVersion+" method (methods: "+strings.Join(slices.Sorted(maps.Keys(rpcMethods)), ", ")+")")
	}
	defer func() {
		if p := recover(); p != nil {
			s.cfg.Logger.Error("panic serving JSON-RPC", "method", req.method, "panic", fmt.Sprint(p))
			result, err = nil, a2a.NewError(a2a.ErrInternalError, "internal error")
		}
	}()
	return m(ctx, h, req.params)
}

// decodeParams decodes a request's params into v, naming the member that
// does not fit and the JSON type it must have.
func decodeParams(params json.RawMessage, v any) error {
	if params == nil {
		return nil
	}
	err := json.Unmarshal(params, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := "params"
		if te.Field != "" {
			field += "." + te.Field
		}
		return a2atask.InvalidParams(field, "must be "+jsonKind(te.Type)+" (got "+te.Value+")")
	}
	return a2atask.InvalidParams("params", err.Error())
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "an object"
}

// writeRPC writes a JSON-RPC response: the result, or err's error object
// (counted by code).
func (s *Server) writeRPC(w http.ResponseWriter, status int, id json.RawMessage, result any, err error) {
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *rpcError       `json:"error,omitempty"`
	}{JSONRPC: "2.0", ID: id}
	if err != nil {
		resp.Error = rpcErrorOf(err)
		s.metrics.rpcError(resp.Error.Code)
		if resp.Error.Code == -32603 {
			s.cfg.Logger.Error("JSON-RPC request failed", "err", err)
		}
	} else {
		resp.Result = result
	}
	b, merr := json.Marshal(resp)
	if merr != nil {
		s.cfg.Logger.Error("encode JSON-RPC response", "err", merr)
		resp.Result, resp.Error = nil, &rpcError{Code: -32603, Message: "internal error: the result could not be encoded"}
		s.metrics.rpcError(-32603)
		b, _ = json.Marshal(resp)
	}
	writeDoc(w, status, append(b, '\n'))
}

// invalidUTF8At is the offset of the first byte of b that is not UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// syntaxWhere describes a JSON syntax error with the byte offset, line
// and column where the decoder stopped (the offending byte, or the last
// one when the input ended early).
func syntaxWhere(body []byte, err error) string {
	if len(bytes.TrimSpace(body)) == 0 {
		return "empty body: send a JSON-RPC request object"
	}
	if msg, ok := jsonline.SyntaxWhere(body, err); ok {
		return msg
	}
	return "invalid JSON: " + err.Error()
}

func compactJSON(b json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}
