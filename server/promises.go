package server

import (
	"net/http"
	"strconv"
	"time"

	"tally/api"
	"tally/instant"
	"tally/jsondoc"
	"tally/ledger"
	"tally/promise"
	"tally/rule"
)

// renderPromise makes the write response: the record's sequence and the
// promise as it stands, at the time of the write.
func (s *Server) renderPromise(id string) func(st *ledger.State, res []ledger.Result) []byte {
	return func(st *ledger.State, res []ledger.Result) []byte {
		p, ok := st.Promises.Get(id)
		if !ok && len(res) > 0 {
			p, ok = st.Promises.Get(res[0].Event.ID)
		}
		if !ok || len(res) == 0 {
			return jsondoc.Doc()
		}
		v := st.Promises.View(p, s.cfg.Ledger.Now())
		return jsondoc.PromiseWrite(res[0].Seq, &v, res[0].Warnings)
	}
}

// isDeclaration reports whether cmd declares a promise without an
// antecedent: its response depends on nothing but its own record.
func isDeclaration(cmd ledger.Command) bool {
	d, ok := cmd.Promise.(promise.Declare)
	return ok && d.On == ""
}

// renderDeclared answers a declaration without an antecedent from its own
// record, outside the session lock (the view at the time of the write
// depends on nothing else in the state), so the committer does not spend
// its serial time rendering the commonest write.
func (s *Server) renderDeclared(res []ledger.Result) []byte {
	if len(res) != 1 || res[0].Event.Type != promise.TypePromise || res[0].Event.On != "" {
		return nil
	}
	st := promise.NewState()
	st.Apply(promise.Meta{Seq: res[0].Seq}, &res[0].Event)
	p, ok := st.Get(res[0].Event.ID)
	if !ok {
		return nil
	}
	v := st.View(p, s.cfg.Ledger.Now())
	return jsondoc.PromiseWrite(res[0].Seq, &v, res[0].Warnings)
}

// promiseWrite is the shape of every promise write route: authenticate,
// open the session, build the command of the body (an api promise
// document) and the path's promise id, and execute it (idempotently when
// the request carries a key).
func (s *Server) promiseWrite(w http.ResponseWriter, r *http.Request, status int,
	build func(body []byte, id string) (promise.Command, error)) {
	p, l, err := s.openSession(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	id := r.PathValue("id")
	cmd, err := build(body, id)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if d, ok := cmd.(promise.Declare); ok {
		id = d.ID
	}
	if s.stubWrite != nil {
		writeDoc(w, status, s.stubWrite(cmd, p))
		return
	}
	s.execute(w, r, p, l, body, ledger.Command{Promise: cmd}, status, s.renderPromise(id))
}

// The promise routes' bodies are api's promise documents; the path names
// the promise, so a body's id, if given, must name the same.

func (s *Server) declare(w http.ResponseWriter, r *http.Request) {
	s.promiseWrite(w, r, http.StatusCreated, func(body []byte, _ string) (promise.Command, error) {
		var d api.PromiseDeclare
		if err := api.Decode("body", body, &d); err != nil {
			return nil, err
		}
		return d.Command(s.cfg.Ledger.Now())
	})
}

func (s *Server) amend(w http.ResponseWriter, r *http.Request) {
	s.promiseWrite(w, r, http.StatusOK, func(body []byte, id string) (promise.Command, error) {
		var d api.PromiseAmend
		if err := decodeAt("body", body, &d, &d.ID, id); err != nil {
			return nil, err
		}
		return d.Command(s.cfg.Ledger.Now())
	})
}

func (s *Server) resolve(w http.ResponseWriter, r *http.Request) {
	s.promiseWrite(w, r, http.StatusOK, func(body []byte, id string) (promise.Command, error) {
		var d api.PromiseResolve
		if err := decodeAt("body", body, &d, &d.ID, id); err != nil {
			return nil, err
		}
		return d.Command(), nil
	})
}

func (s *Server) assess(w http.ResponseWriter, r *http.Request) {
	s.promiseWrite(w, r, http.StatusOK, func(body []byte, id string) (promise.Command, error) {
		var d api.PromiseAssess
		if err := decodeAt("body", body, &d, &d.ID, id); err != nil {
			return nil, err
		}
		return d.Command(), nil
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

func (s *Server) listPromises(w http.ResponseWriter, r *http.Request) {
	l, err := s.openRead(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	now, err := s.readNow(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	q := r.URL.Query()
	state, by, to := q.Get("state"), q.Get("by"), q.Get("to")
	if state == "" {
		state = "open"
	}
	if state != "open" && state != "overdue" && state != "all" {
		s.writeError(w, rule.Invalidf("state", "must be open, overdue or all"))
		return
	}
	var vs []promise.View
	l.Read(func(st *ledger.State) {
		vs = st.Promises.Select(promise.Filter{State: state, By: by, To: to}, now)
	})
	writeDoc(w, http.StatusOK, jsondoc.PromiseList(now, "promises", vs))
}

func (s *Server) showPromise(w http.ResponseWriter, r *http.Request) {
	l, err := s.openRead(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	now, err := s.readNow(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	id := r.PathValue("id")
	var doc []byte
	l.Read(func(st *ledger.State) {
		if p, ok := st.Promises.Get(id); ok {
			v := st.Promises.View(p, now)
			doc = jsondoc.PromiseShow(now, &v)
		}
	})
	if doc == nil {
		s.writeError(w, rule.NotFoundf("promise", "no promise with id "+id))
		return
	}
	writeDoc(w, http.StatusOK, doc)
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
