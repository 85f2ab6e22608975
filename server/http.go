package server

import (
	"errors"
	"io"
	"net/http"

	"tally/api"
	"tally/auth"
	"tally/rest"
	"tally/store"
	"tally/verb"
)

// route is one endpoint. The route table is the single source of the mux
// and of the OpenAPI document, so the two cannot disagree.
type route struct {
	name    string // for metrics and logs
	method  string
	pattern string
	summary string
	body    string // request schema name, or ""
	write   bool
	bodyMax int64 // bounds the body of a write; 0 means Config.BodyMax
	// media is the body's media type, checked before the handler runs;
	// "" derives it from body (Bytes: octet-stream, another schema: JSON).
	media string
	// public routes are served without authentication.
	public bool
	// replica routes read this server's files as they stand rather than
	// through the Service (the event stream): on a cluster node, the node's
	// replica as applied. They take no consistency parameter.
	replica bool
	// notInCluster routes are served by `tally serve` only: a cluster
	// node answers them 501 NotInCluster (NewCluster). None is today;
	// the route table is the one list of what a node serves.
	notInCluster bool
	// serve is a REST route's endpoint; stream, a REST route that writes
	// its answer as it goes (an event stream, bytes, an export). Both run
	// behind the REST middleware (middleware.go).
	serve  endpoint
	stream http.HandlerFunc
	// handle is a route of another binding (A2A, MCP, the console): it
	// authenticates and answers itself.
	handle func(w http.ResponseWriter, r *http.Request)
}

const sessionPath = verb.SessionPath

func (s *Server) routeTable() []route {
	routes := []route{
		{name: "health", method: "GET", pattern: "/healthz", summary: "Liveness: the process serves requests", public: true, serve: s.healthz},
		{name: "ready", method: "GET", pattern: "/readyz", summary: "Readiness: the ledger directory is usable", public: true, serve: s.readyz},
		{name: "metrics", method: "GET", pattern: "/metrics", summary: "Prometheus metrics", public: true, stream: s.metrics.handler},
		{name: "openapi", method: "GET", pattern: "/v1/openapi.json", summary: "This API as OpenAPI 3.1", public: true, serve: s.openapi},
		{name: "events", method: "GET", pattern: sessionPath + "/events", summary: "Server-Sent Events of committed records after a sequence (after=SEQ or Last-Event-ID); on a cluster node, its replica's applied records", stream: s.events, replica: true},
		{name: "a2a.card", method: "GET", pattern: "/.well-known/agent-card.json", summary: "A2A AgentCard of the server: the default session's agent (ETag; --a2a-default-session)", handle: s.a2aCard},
		{name: "a2a.session_card", method: "GET", pattern: sessionPath + "/a2a/.well-known/agent-card.json", summary: "A2A AgentCard of one session (ETag)", handle: s.a2aSessionCard},
		{name: "a2a.session_card_bare", method: "GET", pattern: sessionPath + "/.well-known/agent-card.json", summary: "A2A AgentCard of one session, where a client resolves it against …/a2a without a trailing slash (ETag)", handle: s.a2aSessionCard},
		{name: "a2a.jsonrpc", method: "POST", pattern: sessionPath + "/a2a", summary: "A2A v1.0 JSON-RPC: SendMessage, GetTask, ListTasks, CancelTask (A2A-Extensions activates a family)", write: true, handle: s.a2aJSONRPC()},
		{name: "a2a.send", method: "POST", pattern: sessionPath + "/a2a/rest/message:send", summary: "A2A v1.0 HTTP+JSON SendMessage", write: true, media: mediaJSON, handle: s.a2aREST()},
		{name: "a2a.tasks", method: "GET", pattern: sessionPath + "/a2a/rest/tasks", summary: "A2A v1.0 HTTP+JSON ListTasks", handle: s.a2aREST()},
		{name: "a2a.task", method: "GET", pattern: sessionPath + "/a2a/rest/tasks/{id}", summary: "A2A v1.0 HTTP+JSON GetTask", handle: s.a2aREST()},
		{name: "a2a.cancel", method: "POST", pattern: sessionPath + "/a2a/rest/tasks/{id}", summary: "A2A v1.0 HTTP+JSON CancelTask ({id}:cancel)", write: true, media: mediaJSON, handle: s.a2aREST()},
		{name: "whoami", method: "GET", pattern: "/v1/tenants/{tenant}/whoami", summary: "The identity and role the bearer token acts as", serve: s.whoami},
	}
	routes = append(routes, s.verbRoutes()...)
	routes = append(routes, s.consoleRoutes()...)
	routes = append(routes, s.mcpRoutes()...)
	routes = append(routes, s.tokenRoutes()...)
	return routes
}

func writeDoc(w http.ResponseWriter, code int, doc []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(doc)
}

// errNotFound hides whether a foreign tenant's session exists.
var errNotFound = statusError{http.StatusNotFound, "not_found", "not found"}

// statusError is one of the server's own refusals with its status.
type statusError struct {
	status     int
	code, text string
}

func (e statusError) Error() string { return e.text }

func (e statusError) Refusal() *rest.Refusal {
	if e.status == http.StatusServiceUnavailable {
		return rest.NewRetryable(e.code, e.text) // refused before it ran: retry
	}
	return rest.NewRefusal(e.status, e.code, e.text)
}

// badRequest is a malformed request that is not a rule's refusal.
type badRequest struct{ msg string }

func (b badRequest) Error() string { return b.msg }

func (b badRequest) Refusal() *rest.Refusal {
	return rest.NewRefusal(http.StatusBadRequest, "invalid", b.msg)
}

// writeError answers err with its status and error document, the one
// mapping (rest.Refuse) the CLI prints too.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	var bi *bodyIncomplete
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", `Bearer realm="tally"`)
	case errors.As(err, &bi):
		w.Header().Set("Connection", "close") // the rest of the body is not waited for
	}
	ref := rest.Refuse(err)
	if ref.Status == http.StatusInternalServerError {
		s.cfg.Logger.Error("request failed", "err", err)
	}
	rest.WriteRefusal(w, ref)
}

func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (s *Server) healthz(*http.Request) (int, any, error) {
	return http.StatusOK, api.Doc(api.M("status", api.S("ok"))), nil
}

func (s *Server) readyz(*http.Request) (int, any, error) {
	if !store.IsLedger(s.cfg.Root) {
		return http.StatusServiceUnavailable, api.Error("ledger directory missing", "unavailable"), nil
	}
	return http.StatusOK, api.Doc(api.M("status", api.S("ready"))), nil
}
