package server

import (
	"net/http"
	"strconv"
	"time"

	"tally/api"
	"tally/auth"
	"tally/instant"
	"tally/jsondoc"
	"tally/ledger"
	"tally/promise"
	"tally/rule"
	"tally/service"
)

// promiseCall is the Call of a promise write: the session of the path,
// the acting identity (under --insecure-dev without one, the party the
// document names: party), and the request's Idempotency-Key.
func (s *Server) promiseCall(r *http.Request, p principal, party ledger.Command) (service.Call, error) {
	actor, err := s.writeActor(p, party)
	if err != nil {
		return service.Call{}, err
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > service.RequestIDMax {
		return service.Call{}, rule.Invalidf("Idempotency-Key", "at most 256 bytes")
	}
	return service.Call{Tenant: r.PathValue("tenant"), Session: r.PathValue("session"), Actor: actor, Person: p.role == auth.RolePerson, RequestID: key}, nil
}

// promiseWrite is the shape of every promise write route: authenticate,
// read the body, and run it (an api promise document about the path's
// promise) through the service.
func (s *Server) promiseWrite(w http.ResponseWriter, r *http.Request, status int,
	run func(p principal, body []byte, id string) (service.PromiseWritten, error)) {
	p, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	res, err := run(p, body, r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeDoc(w, status, res.JSON)
}

// The promise routes' bodies are api's promise documents; the path names
// the promise, so a body's id, if given, must name the same.

func (s *Server) declare(w http.ResponseWriter, r *http.Request) {
	s.promiseWrite(w, r, http.StatusCreated, func(p principal, body []byte, _ string) (service.PromiseWritten, error) {
		var d api.PromiseDeclare
		if err := api.Decode("body", body, &d); err != nil {
			return service.PromiseWritten{}, err
		}
		if s.stubWrite != nil {
			cmd, err := d.Command(s.cfg.Ledger.Now())
			if err != nil {
				return service.PromiseWritten{}, err
			}
			// The session is opened as a write would, so the baseline
			// counts the cache.
			if _, err := s.sessionIn(r.Context(), r.PathValue("tenant"), r.PathValue("session"), true); err != nil {
				return service.PromiseWritten{}, err
			}
			return service.PromiseWritten{Doc: service.Doc{JSON: s.stubWrite(cmd, p)}}, nil
		}
		c, err := s.promiseCall(r, p, ledger.Command{Promise: promise.Declare{By: d.By}})
		if err != nil {
			return service.PromiseWritten{}, err
		}
		return s.local.DeclarePromise(r.Context(), c, d)
	})
}

func (s *Server) amend(w http.ResponseWriter, r *http.Request) {
	s.promiseWrite(w, r, http.StatusOK, func(p principal, body []byte, id string) (service.PromiseWritten, error) {
		var d api.PromiseAmend
		if err := decodeAt("body", body, &d, &d.ID, id); err != nil {
			return service.PromiseWritten{}, err
		}
		c, err := s.promiseCall(r, p, ledger.Command{})
		if err != nil {
			return service.PromiseWritten{}, err
		}
		return s.local.AmendPromise(r.Context(), c, d)
	})
}

func (s *Server) resolve(w http.ResponseWriter, r *http.Request) {
	s.promiseWrite(w, r, http.StatusOK, func(p principal, body []byte, id string) (service.PromiseWritten, error) {
		var d api.PromiseResolve
		if err := decodeAt("body", body, &d, &d.ID, id); err != nil {
			return service.PromiseWritten{}, err
		}
		c, err := s.promiseCall(r, p, ledger.Command{})
		if err != nil {
			return service.PromiseWritten{}, err
		}
		return s.local.ResolvePromise(r.Context(), c, d)
	})
}

func (s *Server) assess(w http.ResponseWriter, r *http.Request) {
	s.promiseWrite(w, r, http.StatusOK, func(p principal, body []byte, id string) (service.PromiseWritten, error) {
		var d api.PromiseAssess
		if err := decodeAt("body", body, &d, &d.ID, id); err != nil {
			return service.PromiseWritten{}, err
		}
		c, err := s.promiseCall(r, p, ledger.Command{Promise: promise.Assess{Observer: d.Observer}})
		if err != nil {
			return service.PromiseWritten{}, err
		}
		return s.local.AssessPromise(r.Context(), c, d)
	})
}

// decodeAt decodes a promise document about the promise id names: its own
// id (*docID), when given, must be the same.
func decodeAt(where string, body []byte, doc any, docID *string, id string) error {
	if err := api.Decode(where, body, doc); err != nil {
		return err
	}
	if *docID != "" && *docID != id {
		return rule.Invalidf("id", "names "+strconv.Quote(*docID)+" but the path names "+strconv.Quote(id))
	}
	*docID = id
	return nil
}

// readNow reads the now query parameter (RFC 3339), else the clock.
func (s *Server) readNow(r *http.Request) (time.Time, error) {
	v := r.URL.Query().Get("now")
	if v == "" {
		return s.cfg.Ledger.Now().UTC(), nil
	}
	return instant.Parse("now", v)
}

// readCall is the Call of a read route: the path's session, at the now
// query parameter (else the clock).
func (s *Server) readCall(r *http.Request) (service.Call, error) {
	if _, err := s.authenticate(r); err != nil {
		return service.Call{}, err
	}
	now, err := s.readNow(r)
	if err != nil {
		return service.Call{}, err
	}
	return service.Call{Tenant: r.PathValue("tenant"), Session: r.PathValue("session"), Now: now}, nil
}

func (s *Server) listPromises(w http.ResponseWriter, r *http.Request) {
	c, err := s.readCall(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	q := r.URL.Query()
	res, err := s.local.ListPromises(r.Context(), c, promise.Filter{State: q.Get("state"), By: q.Get("by"), To: q.Get("to"), Task: q.Get("task")})
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, res.JSON)
}

func (s *Server) showPromise(w http.ResponseWriter, r *http.Request) {
	c, err := s.readCall(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	res, err := s.local.Promise(r.Context(), c, r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, res.JSON)
}

// whoami answers with the identity the request acts as: what the CLI, as a
// client, prints and acts as when no --as is given.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	p, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, jsondoc.Doc(jsondoc.M("tenant", jsondoc.S(r.PathValue("tenant"))), jsondoc.M("actor", jsondoc.S(p.actor)), jsondoc.M("role", jsondoc.S(p.role))))
}
