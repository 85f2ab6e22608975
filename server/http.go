package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"tally/auth"
	"tally/jsondoc"
	"tally/ledger"
	"tally/service"
	"tally/store"
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
	media  string
	handle func(w http.ResponseWriter, r *http.Request)
}

const sessionPath = "/v1/tenants/{tenant}/sessions/{session}"

func (s *Server) routeTable() []route {
	routes := []route{
		{name: "health", method: "GET", pattern: "/healthz", summary: "Liveness: the process serves requests", handle: s.healthz},
		{name: "ready", method: "GET", pattern: "/readyz", summary: "Readiness: the ledger directory is usable", handle: s.readyz},
		{name: "metrics", method: "GET", pattern: "/metrics", summary: "Prometheus metrics", handle: s.metrics.handler},
		{name: "openapi", method: "GET", pattern: "/v1/openapi.json", summary: "This API as OpenAPI 3.1", handle: s.openapi},
		{name: "promise.declare", method: "POST", pattern: sessionPath + "/promises", summary: "Declare a promise as the authenticated debtor", body: "Declare", write: true, handle: s.declare},
		{name: "promise.list", method: "GET", pattern: sessionPath + "/promises", summary: "List promises (state=open|overdue|all, by, to, now)", handle: s.listPromises},
		{name: "promise.show", method: "GET", pattern: sessionPath + "/promises/{id}", summary: "One promise with its horizons and assessments (now)", handle: s.showPromise},
		{name: "promise.amend", method: "POST", pattern: sessionPath + "/promises/{id}/amend", summary: "Move the deadline (debtor only)", body: "Amend", write: true, handle: s.amend},
		{name: "promise.resolve", method: "POST", pattern: sessionPath + "/promises/{id}/resolve", summary: "Satisfy, cancel (debtor) or release (creditor)", body: "Resolve", write: true, handle: s.resolve},
		{name: "promise.assess", method: "POST", pattern: sessionPath + "/promises/{id}/assess", summary: "Record the authenticated observer's judgment", body: "Assess", write: true, handle: s.assess},
		{name: "events", method: "GET", pattern: sessionPath + "/events", summary: "Server-Sent Events of committed records after a sequence (after=SEQ or Last-Event-ID)", handle: s.events},
		{name: "a2a.card", method: "GET", pattern: "/.well-known/agent-card.json", summary: "A2A AgentCard of the server: the default session's agent (ETag; --a2a-default-session)", handle: s.a2aCard},
		{name: "a2a.session_card", method: "GET", pattern: sessionPath + "/a2a/.well-known/agent-card.json", summary: "A2A AgentCard of one session (ETag)", handle: s.a2aSessionCard},
		{name: "a2a.session_card_bare", method: "GET", pattern: sessionPath + "/.well-known/agent-card.json", summary: "A2A AgentCard of one session, where a client resolves it against …/a2a without a trailing slash (ETag)", handle: s.a2aSessionCard},
		{name: "a2a.jsonrpc", method: "POST", pattern: sessionPath + "/a2a", summary: "A2A v1.0 JSON-RPC: SendMessage, GetTask, ListTasks, CancelTask (A2A-Extensions activates a family)", write: true, handle: s.a2aJSONRPC()},
		{name: "a2a.send", method: "POST", pattern: sessionPath + "/a2a/rest/message:send", summary: "A2A v1.0 HTTP+JSON SendMessage", write: true, media: mediaJSON, handle: s.a2aREST()},
		{name: "a2a.tasks", method: "GET", pattern: sessionPath + "/a2a/rest/tasks", summary: "A2A v1.0 HTTP+JSON ListTasks", handle: s.a2aREST()},
		{name: "a2a.task", method: "GET", pattern: sessionPath + "/a2a/rest/tasks/{id}", summary: "A2A v1.0 HTTP+JSON GetTask", handle: s.a2aREST()},
		{name: "a2a.cancel", method: "POST", pattern: sessionPath + "/a2a/rest/tasks/{id}", summary: "A2A v1.0 HTTP+JSON CancelTask ({id}:cancel)", write: true, media: mediaJSON, handle: s.a2aREST()},
		{name: "whoami", method: "GET", pattern: "/v1/tenants/{tenant}/whoami", summary: "The identity and role the bearer token acts as", handle: s.whoami},
	}
	routes = append(routes, s.claimRoutes()...)
	routes = append(routes, s.consoleRoutes()...)
	routes = append(routes, s.mcpRoutes()...)
	return append(append(routes, s.expectRoutes()...), s.adminRoutes()...)
}

// statusRecorder remembers the status for metrics and logs.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusRecorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) instrument(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		ctx, release := s.withSessionHolds(r.Context())
		r = r.WithContext(ctx)
		defer release() // after the handler and its panic's answer
		defer func() {
			if p := recover(); p != nil {
				s.cfg.Logger.Error("panic serving request", "route", rt.name, "panic", fmt.Sprint(p))
				if rec.code == 0 {
					writeDoc(rec, http.StatusInternalServerError, jsondoc.Error("internal error", "internal"))
				}
			}
			elapsed := time.Since(start)
			s.metrics.request(rt.name, rec.code, elapsed)
			s.cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
				slog.String("method", r.Method), slog.String("route", rt.name), slog.String("path", r.URL.Path),
				slog.Int("status", rec.code), slog.Duration("duration", elapsed))
		}()
		if rt.write {
			limit := s.cfg.BodyMax
			if rt.bodyMax > 0 {
				limit = rt.bodyMax
			}
			r.Body = s.checkedBody(w, r, rt.mediaType(), http.MaxBytesReader(rec, r.Body, limit))
		}
		rt.handle(rec, r)
	})
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

func (e statusError) Refusal() *service.Refusal { return service.NewRefusal(e.status, e.code, e.text) }

// badRequest is a malformed request that is not a rule's refusal.
type badRequest struct{ msg string }

func (b badRequest) Error() string { return b.msg }

func (b badRequest) Refusal() *service.Refusal {
	return service.NewRefusal(http.StatusBadRequest, "invalid", b.msg)
}

// writeError answers err with its status and error document, the one
// mapping (service.Refuse) the CLI prints too.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	var bi *bodyIncomplete
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", `Bearer realm="tally"`)
	case errors.As(err, &bi):
		w.Header().Set("Connection", "close") // the rest of the body is not waited for
	}
	ref := service.Refuse(err)
	if ref.Status == http.StatusInternalServerError {
		s.cfg.Logger.Error("request failed", "err", err)
	}
	writeDoc(w, ref.Status, ref.Document)
}

// principal is who a request acts as.
type principal struct {
	actor  string
	role   string
	tenant string // the token's tenant; empty in --insecure-dev
}

// authenticate checks the bearer token against the path's tenant. A token
// of another tenant gets 404, as if the session did not exist.
func (s *Server) authenticate(r *http.Request) (principal, error) {
	tenant := r.PathValue("tenant")
	if s.cfg.Insecure {
		// No header: anonymous, which reads; a write then acts as its
		// record's own party (writeActor).
		actor := r.Header.Get("X-Tally-Actor")
		role := r.Header.Get("X-Tally-Role")
		if role == "" {
			role = auth.RoleAgent
		}
		return s.principalOf(actor, role), nil
	}
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return principal{}, auth.ErrUnauthenticated
	}
	tok, err := s.tokens.Authenticate(strings.TrimSpace(secret))
	if err != nil {
		return principal{}, err
	}
	if tenant != "" && tok.Tenant != tenant {
		return principal{}, errNotFound
	}
	p := s.principalOf(tok.Participant, tok.Role)
	p.tenant = tok.Tenant
	return p, nil
}

func (s *Server) principalOf(participant, role string) principal {
	if role == auth.RoleTimekeeper {
		// The timekeeper role acts as the ledger's timekeeper identity,
		// the only one the cores let commit lapses and deadline facts.
		return principal{actor: s.cfg.Ledger.Timekeeper, role: role}
	}
	return principal{actor: participant, role: role}
}

// openSession authenticates and opens the path's session for a write,
// creating it if it has no log (removed again if the write is refused).
func (s *Server) openSession(r *http.Request) (principal, *ledger.Ledger, error) {
	return s.openSessionFor(r, true)
}

// openSessionFor authenticates and opens the path's session, held until
// the request ends; one without a log is created only when create is set.
func (s *Server) openSessionFor(r *http.Request, create bool) (principal, *ledger.Ledger, error) {
	p, err := s.authenticate(r)
	if err != nil {
		return p, nil, err
	}
	l, err := s.sessionIn(r.Context(), r.PathValue("tenant"), r.PathValue("session"), create)
	return p, l, err
}

// openRead authenticates, opens the path's session (never creating it)
// and folds what other processes appended to it, so every read route
// answers from the log as it stands.
func (s *Server) openRead(r *http.Request) (*ledger.Ledger, error) {
	_, l, err := s.openSessionFor(r, false)
	if err != nil {
		return nil, err
	}
	if err := l.Refresh(); err != nil {
		return nil, err
	}
	return l, nil
}

func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeDoc(w, http.StatusOK, jsondoc.Doc(jsondoc.M("status", jsondoc.S("ok"))))
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if !store.IsLedger(s.cfg.Root) {
		writeDoc(w, http.StatusServiceUnavailable, jsondoc.Error("ledger directory missing", "unavailable"))
		return
	}
	writeDoc(w, http.StatusOK, jsondoc.Doc(jsondoc.M("status", jsondoc.S("ready"))))
}
