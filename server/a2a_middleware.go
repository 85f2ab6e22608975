package server

// The A2A transports' middleware. An A2A request (a card's aside: cards are
// public) passes the same wrappers on either transport before the
// transport sees it, in this order:
//
//	a2aAuthenticated  the caller (its bearer token) and the requested
//	                  extensions this server accepts, in the request's
//	                  context (a2aCall)
//	a2aJSONBody       a POST's body is JSON; where the transport reads it
//	                  itself, read whole first, within the route's body
//	                  limit and the body timeout
//
// What a wrapper refuses, the transport answers through its one error
// writer (an a2aRefuser): JSON-RPC in its envelope (rpcRefuse), HTTP+JSON
// as the HTTP JSON API's error document (writeError). An authentication
// failure is the HTTP JSON API's on both (401 with WWW-Authenticate), as
// A2A's transport rules have it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// a2aCall is what the middleware learned about a request.
type a2aCall struct {
	p               principal
	tenant, session string
	active          []string // requested URIs this server accepts, in request order
	requestID       string   // the Idempotency-Key header
	sessionURL      string   // the session's HTTP JSON API, where artifact bytes are read
	// body is the request's body, read whole by a2aJSONBody where the
	// transport reads it itself (JSON-RPC; HTTP+JSON's CancelTask).
	body []byte
	// cancelMetadata is the metadata of an HTTP+JSON CancelTask's body,
	// which a2a-go's REST handler does not pass on (the cancel reason).
	cancelMetadata map[string]any
}

type a2aCallKey struct{}

func a2aCallFrom(ctx context.Context) *a2aCall {
	c, _ := ctx.Value(a2aCallKey{}).(*a2aCall)
	return c
}

// a2aRefuser is a transport's error writer for what the middleware
// refuses.
type a2aRefuser func(w http.ResponseWriter, err error)

// a2aAuthenticated runs next as the request's caller (a2aContext); a
// request it cannot authenticate is the HTTP JSON API's refusal.
func (s *Server) a2aAuthenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, err := s.a2aContext(w, r)
		if err != nil {
			s.writeError(w, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// a2aJSONBody refuses, through refuse, a POST whose body is not JSON
// (a2a-go would call it a parse error). With read it reads the body whole
// into the request's call and puts it back for next, refusing a body over
// the limit or one that did not arrive whole; without, next reads it.
func (s *Server) a2aJSONBody(refuse a2aRefuser, read bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		if err := requireContentType(r, mediaJSON); err != nil {
			refuse(w, err)
			return
		}
		if read {
			b, err := readBody(r)
			if err != nil {
				refuse(w, err)
				return
			}
			a2aCallFrom(r.Context()).body = b
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		next.ServeHTTP(w, r)
	})
}

// rpcRefuse is JSON-RPC's answer to what the middleware refuses: an
// invalid request with the status the transport's failure deserves (415
// for the media type, 413 over the body limit, 400 for a body that did not
// arrive whole) and a null id, the request not having been read.
func (s *Server) rpcRefuse(w http.ResponseWriter, err error) {
	status, msg := http.StatusBadRequest, "request: the body ended early: "+err.Error()
	var mte *mediaTypeError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mte):
		status, msg = http.StatusUnsupportedMediaType, err.Error()
	case errors.As(err, &mbe):
		status, msg = http.StatusRequestEntityTooLarge, "request: at most "+strconv.FormatInt(mbe.Limit, 10)+" bytes"
	}
	s.writeRPC(w, status, nullID, nil, a2a.NewError(a2a.ErrInvalidRequest, msg))
}

// a2aCancelMetadata reads the metadata of an HTTP+JSON CancelTask's body
// ({"metadata":{…}}, or no body) into the request's call for next.
func (s *Server) a2aCancelMetadata(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := a2aCallFrom(r.Context())
		if len(bytes.TrimSpace(call.body)) > 0 {
			var req struct {
				Metadata map[string]any `json:"metadata"`
			}
			if err := json.Unmarshal(call.body, &req); err != nil {
				s.writeError(w, badRequest{"body: must be a CancelTaskRequest object: " + err.Error()})
				return
			}
			call.cancelMetadata = req.Metadata
		}
		next.ServeHTTP(w, r)
	})
}

// requestedExtensions parses the A2A-Extensions header(s): a comma list.
func requestedExtensions(h http.Header) []string {
	var out []string
	for _, v := range h.Values(a2a.SvcParamExtensions) {
		for _, u := range strings.Split(v, ",") {
			if u = strings.TrimSpace(u); u != "" && !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	return out
}

// a2aContext authenticates a request and returns its context, carrying the
// call (a2aCallFrom) and a2a-go's call context with the requested
// extensions the server accepts activated. It echoes them in the
// A2A-Extensions response header (a2a-go does not for JSON-RPC and REST).
func (s *Server) a2aContext(w http.ResponseWriter, r *http.Request) (context.Context, error) {
	p, err := s.authenticate(r)
	if err != nil {
		return nil, err
	}
	call := &a2aCall{p: p, tenant: r.PathValue("tenant"), session: r.PathValue("session"), requestID: r.Header.Get("Idempotency-Key")}
	call.sessionURL = s.baseURL(r) + "/v1/tenants/" + url.PathEscape(call.tenant) + "/sessions/" + url.PathEscape(call.session)
	for _, u := range requestedExtensions(r.Header) {
		if _, ok := s.cfg.A2A.uris().FamilyOf(u); ok {
			call.active = append(call.active, u)
		}
	}
	if len(call.active) > 0 {
		w.Header().Set(a2a.SvcParamExtensions, strings.Join(call.active, ", "))
	}
	ctx := context.WithValue(r.Context(), a2aCallKey{}, call)
	ctx, cc := a2asrv.NewCallContext(ctx, a2asrv.NewServiceParams(r.Header))
	for _, u := range call.active {
		cc.Extensions().Activate(&a2a.AgentExtension{URI: u})
	}
	cc.User = &a2asrv.User{Name: p.actor, Authenticated: p.actor != ""}
	return ctx, nil
}
