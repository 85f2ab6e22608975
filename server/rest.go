package server

// The shape of the REST routes. A route's endpoint runs after the
// middleware (middleware.go) with the caller in the request's context and
// returns what to answer; one writer answers documents (writeAnswer), one
// errors (writeError). Each family's routes decode their api document and
// call the server's Service.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"tally/api"
	"tally/auth"
	"tally/instant"
	"tally/refuse"
	"tally/service"
)

// endpoint is a REST route's handler: the status and response document of
// its answer, or the error writeError answers. doc is a document's bytes,
// a service.Doc (Idempotent-Replayed when it was replayed), or either
// withHeader.
type endpoint func(r *http.Request) (status int, doc any, err error)

// withHeader is a document answered with one header of its own.
type withHeader struct {
	name, value string
	doc         any
}

// answer serves an endpoint.
func (s *Server) answer(e endpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, doc, err := e(r)
		if err != nil {
			s.writeError(w, err)
			return
		}
		s.writeAnswer(w, status, doc)
	})
}

// writeAnswer writes a route's response document with its status.
func (s *Server) writeAnswer(w http.ResponseWriter, status int, doc any) {
	switch d := doc.(type) {
	case []byte:
		writeDoc(w, status, d)
	case service.Doc:
		if d.Replayed {
			w.Header().Set(api.ReplayedHeader, "true")
		}
		writeDoc(w, status, d.JSON)
	case withHeader:
		w.Header().Set(d.name, d.value)
		s.writeAnswer(w, status, d.doc)
	default:
		s.writeError(w, fmt.Errorf("server: a route answered a %T, not a document", doc))
	}
}

// docRule is how a write route reads its api document D from the request
// beyond the strict decoding every one has.
type docRule[D any] struct {
	// empty reads an empty body as {} (every member optional).
	empty bool
	// members are set from the path before decoding, refusing a body
	// member that names another ("claim" is the path's {id}, the others
	// their own: {check}, {testament}, {artifact}).
	members []string
	// id is the document's id, set from the path's {id} after decoding;
	// given, it must name the same.
	id func(*D) *string
}

// apiWrite is the one shape of the write routes whose body is an api
// document D: read the body whole, decode it by in, and run it through the
// Service with the request's Call (writeCall), acting under --insecure-dev
// as the party the document names (partyOf).
func apiWrite[D any](s *Server, status int, in docRule[D], run func(r *http.Request, c service.Call, d *D) (service.Doc, error)) endpoint {
	decode := func(r *http.Request, body []byte) (any, error) {
		var d D
		if in.id != nil {
			return &d, decodeAt("body", body, &d, in.id(&d), r.PathValue("id"))
		}
		return &d, api.Decode("body", body, &d)
	}
	return docWrite(s, status, in.empty, in.members, decode, func(r *http.Request, c service.Call, d any) (service.Doc, error) {
		return run(r, c, d.(*D))
	})
}

// docWrite is apiWrite's shape whatever the document's type: decode
// reads the body (its members named in members set from the path; empty,
// an empty body read as {}) into a new document, run runs it.
func docWrite(s *Server, status int, empty bool, members []string, decode func(r *http.Request, body []byte) (any, error),
	run func(r *http.Request, c service.Call, d any) (service.Doc, error)) endpoint {
	return func(r *http.Request) (int, any, error) {
		body, err := readBody(r)
		if err != nil {
			return 0, nil, err
		}
		if empty && len(bytes.TrimSpace(body)) == 0 {
			body = []byte("{}")
		}
		if len(members) > 0 {
			if body, err = withPathMembers(r, body, members); err != nil {
				return 0, nil, err
			}
		}
		d, err := decode(r, body)
		if err != nil {
			return 0, nil, err
		}
		c, err := s.writeCall(r, partyOf(d))
		if err != nil {
			return 0, nil, err
		}
		doc, err := run(r, c, d)
		return status, doc, err
	}
}

// writeCall is the Call of a write: the session of the path, the acting
// identity (under --insecure-dev without one, the party the command
// names: party), and the request's Idempotency-Key.
func (s *Server) writeCall(r *http.Request, party string) (service.Call, error) {
	p := callerOf(r)
	actor, err := s.writeActor(p, party)
	if err != nil {
		return service.Call{}, err
	}
	key, err := requestID(r)
	if err != nil {
		return service.Call{}, err
	}
	c := sessionCall(r)
	c.Actor, c.Person, c.RequestID = actor, p.role == auth.RolePerson, key
	return c, nil
}

// requestID is the request's Idempotency-Key, bounded.
func requestID(r *http.Request) (string, error) {
	key := r.Header.Get("Idempotency-Key")
	if len(key) > service.RequestIDMax {
		return "", refuse.Invalidf("Idempotency-Key", "at most 256 bytes")
	}
	return key, nil
}

// sessionCall is the Call of the path's session.
func sessionCall(r *http.Request) service.Call {
	return service.Call{Tenant: r.PathValue("tenant"), Session: r.PathValue("session"), Stale: staleRead(r)}
}

// readCall is the Call of a read route: the path's session, at the now
// query parameter (else the clock).
func (s *Server) readCall(r *http.Request) (service.Call, error) {
	now, err := s.readNow(r)
	if err != nil {
		return service.Call{}, err
	}
	c := sessionCall(r)
	c.Now = now
	return c, nil
}

// readNow reads the now query parameter (RFC 3339), else the clock.
func (s *Server) readNow(r *http.Request) (time.Time, error) {
	v := r.URL.Query().Get("now")
	if v == "" {
		return s.cfg.Ledger.Now().UTC(), nil
	}
	return instant.Parse("now", v)
}

// decodeAt decodes a document about the object id names: its own id
// (*docID), when given, must be the same.
func decodeAt(where string, body []byte, doc any, docID *string, id string) error {
	if err := api.Decode(where, body, doc); err != nil {
		return err
	}
	if *docID != "" && *docID != id {
		return refuse.Invalidf("id", "names "+strconv.Quote(*docID)+" but the path names "+strconv.Quote(id))
	}
	*docID = id
	return nil
}

// withPathMembers sets the body's members named in path to the path's
// values ("claim" is the path's {id}), refusing a member that names another.
func withPathMembers(r *http.Request, body []byte, path []string) ([]byte, error) {
	doc := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &doc); err != nil {
			return nil, refuse.Invalidf("body", "must be one JSON object")
		}
	}
	for _, m := range path {
		v := r.PathValue(m)
		if m == "claim" {
			v = r.PathValue("id")
		}
		if raw, ok := doc[m]; ok {
			var given string
			if json.Unmarshal(raw, &given) != nil || (given != "" && given != v) {
				return nil, refuse.Invalidf(m, "names "+string(raw)+" but the path names "+strconv.Quote(v))
			}
		}
		doc[m], _ = json.Marshal(v)
	}
	return json.Marshal(doc)
}
