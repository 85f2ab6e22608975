package server

// The REST routes' middleware, built once per route from the route table
// (handlerOf, instrument), outermost first:
//
//	instrument     the session holds of the request, the panic answer, the
//	               request's metric (route, code) and log line; a write's
//	               body bounded (the route's bodyMax, else Config.BodyMax)
//	               and checked (checkedBody: its media type, the body
//	               timeout) before a byte of it is used
//	authenticated  the caller (bearer token, or --insecure-dev's headers)
//	               and the token's tenant against the path's, in the
//	               request's context (callerOf); a public route skips it
//	answer         the route's endpoint, its document written by
//	               writeAnswer and its error by writeError
//
// A route of another binding (A2A, MCP, the console) has its own handle:
// instrument wraps it, and it authenticates and answers itself.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"tally/api"
	"tally/auth"
	"tally/refuse"
	"tally/service"
)

// handlerOf is the route's handler inside instrument: its binding's own,
// or the REST middleware around its endpoint or stream.
func (s *Server) handlerOf(rt route) http.Handler {
	if rt.handle != nil {
		return http.HandlerFunc(rt.handle)
	}
	var h http.Handler = rt.stream
	if rt.serve != nil {
		h = s.answer(rt.serve)
	}
	if !rt.public {
		h = s.authenticated(h)
	}
	return h
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
	h := s.handlerOf(rt)
	media := rt.mediaType()
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
					writeDoc(rec, http.StatusInternalServerError, api.Error("internal error", "internal"))
				}
			}
			elapsed := time.Since(start)
			s.metrics.request(rt.name, rec.code, elapsed)
			s.cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
				slog.String("method", r.Method), slog.String("route", rt.name), slog.String("path", r.URL.Path),
				slog.Int("status", rec.code), slog.Duration("duration", elapsed))
		}()
		if rt.write {
			limit := s.cfg.BodyMax // read here: a test lowers it on a running server
			if rt.bodyMax > 0 {
				limit = rt.bodyMax
			}
			if rt.body == "Bytes" {
				limit = s.artifactMax()
			}
			r.Body = s.checkedBody(w, r, media, limit, http.MaxBytesReader(rec, r.Body, limit))
		}
		if rt.readsSessions() {
			var err error
			if r, err = withConsistency(rec, r); err != nil {
				s.writeError(rec, err)
				return
			}
		}
		h.ServeHTTP(rec, r)
	})
}

// readsSessions is a REST read that runs through the Service: it takes the
// consistency parameter.
func (rt route) readsSessions() bool {
	return !rt.write && !rt.public && rt.handle == nil && !rt.replica
}

type staleKey struct{}

// withConsistency takes the consistency parameter out of a read's query
// (so the route's own parameters are all that is left), notes a stale read
// in the request's context for sessionCall, and marks the answer with the
// consistency it is served at.
func withConsistency(w http.ResponseWriter, r *http.Request) (*http.Request, error) {
	q := r.URL.Query()
	v, asked := q["consistency"]
	stale := false
	if asked {
		switch {
		case len(v) == 1 && v[0] == service.Stale:
			stale = true
		case len(v) == 1 && v[0] == service.Linearizable:
		default:
			return r, refuse.Invalidf("consistency", "must be linearizable (the default) or stale, once")
		}
		q.Del("consistency")
		u := *r.URL
		u.RawQuery = q.Encode()
		r = r.Clone(context.WithValue(r.Context(), staleKey{}, stale))
		r.URL = &u
	}
	w.Header().Set(service.ConsistencyHeader, map[bool]string{false: service.Linearizable, true: service.Stale}[stale])
	return r, nil
}

// staleRead says the read asked for consistency=stale.
func staleRead(r *http.Request) bool {
	stale, _ := r.Context().Value(staleKey{}).(bool)
	return stale
}

// principal is who a request acts as.
type principal struct {
	actor  string
	role   string
	tenant string // the token's tenant; empty in --insecure-dev
}

type callerKey struct{}

// authenticated runs next as the request's caller (callerOf); a request
// it cannot authenticate is refused (401 with WWW-Authenticate; a token of
// another tenant, 404).
func (s *Server) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r)
		if err != nil {
			s.writeError(w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, p)))
	})
}

// callerOf is who the request acts as, as authenticated found.
func callerOf(r *http.Request) principal {
	p, _ := r.Context().Value(callerKey{}).(principal)
	return p
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
