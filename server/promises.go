package server

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"tally/api"
	"tally/instant"
	"tally/jsondoc"
	"tally/ledger"
	"tally/promise"
	"tally/rule"
	"tally/store"
	"tally/wire"
)

// fields decodes a request body that must be one JSON object whose members
// are all in allowed; strings land in str, "meta" (an object) in meta and
// "evidence" (an array of strings) in list.
type fields struct {
	str      map[string]string
	meta     string
	evidence []string
}

func decodeFields(body []byte, allowed ...string) (fields, error) {
	if len(allowed) > 64 {
		panic("decodeFields: at most 64 allowed members")
	}
	f := fields{str: make(map[string]string, len(allowed))}
	if err := jsondoc.CheckSyntax("body", body); err != nil {
		return f, err
	}
	var seen uint64 // bit i: allowed[i] was a member
	err := wire.Object(body, func(key, v []byte) error {
		if len(key) == 0 {
			return rule.Invalidf("body", "has a member with an empty name")
		}
		i := slices.Index(allowed, string(key))
		if i < 0 {
			return rule.Invalidf(string(key), "is not a member of this request")
		}
		k := allowed[i]
		if seen&(1<<i) != 0 {
			return rule.Invalidf(k, "appears twice")
		}
		seen |= 1 << i
		switch k {
		case "meta":
			if !wire.IsObject(v) {
				return rule.Invalidf("meta", "must be a JSON object")
			}
			f.meta = string(v)
		case "evidence":
			list, err := wire.Strings(v)
			if err != nil {
				return rule.Invalidf("evidence", "must be an array of strings")
			}
			f.evidence = list
		default:
			sv, err := wire.String(v)
			if err != nil {
				return rule.Invalidf(k, "must be a string")
			}
			f.str[k] = sv
		}
		return nil
	})
	if err != nil {
		if _, isRule := rule.As(err); isRule {
			return f, err
		}
		return f, rule.Invalidf("body", "must be one JSON object")
	}
	return f, nil
}

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
// open the session, decode the body's allowed members, build the command,
// and execute it (idempotently when the request carries a key).
func (s *Server) promiseWrite(w http.ResponseWriter, r *http.Request, status int, allowed []string,
	build func(p principal, f fields, id string) (promise.Command, error)) {
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
	f, err := decodeFields(body, allowed...)
	if err != nil {
		s.writeError(w, err)
		return
	}
	id := r.PathValue("id")
	cmd, err := build(p, f, id)
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

// The promise routes' bodies are api's promise documents without "id" (the
// path names the promise), decoded by decodeFields.

func (s *Server) declare(w http.ResponseWriter, r *http.Request) {
	s.promiseWrite(w, r, http.StatusCreated, a2aPromiseActions[0].Members,
		func(_ principal, f fields, _ string) (promise.Command, error) {
			d := f.declare()
			return d.Command(s.cfg.Ledger.Now())
		})
}

func (s *Server) amend(w http.ResponseWriter, r *http.Request) {
	s.promiseWrite(w, r, http.StatusOK, pathMembers(a2aPromiseActions[1]),
		func(_ principal, f fields, id string) (promise.Command, error) {
			d := f.amend(id)
			return d.Command(s.cfg.Ledger.Now())
		})
}

func (s *Server) resolve(w http.ResponseWriter, r *http.Request) {
	s.promiseWrite(w, r, http.StatusOK, pathMembers(a2aPromiseActions[2]),
		func(_ principal, f fields, id string) (promise.Command, error) {
			d := f.resolve(id)
			return d.Command(), nil
		})
}

func (s *Server) assess(w http.ResponseWriter, r *http.Request) {
	s.promiseWrite(w, r, http.StatusOK, pathMembers(a2aPromiseActions[3]),
		func(_ principal, f fields, id string) (promise.Command, error) {
			d := f.assess(id)
			return d.Command(), nil
		})
}

// pathMembers are an action's members but "id", which a route's path names.
func pathMembers[C any](a api.Action[C]) []string {
	return slices.DeleteFunc(slices.Clone(a.Members), func(m string) bool { return m == "id" })
}

// The promise documents of decoded fields; id, when given, names the
// promise (the path's).
func (f fields) declare() api.PromiseDeclare {
	return api.PromiseDeclare{ID: f.str["id"], Promise: f.str["promise"], By: f.str["by"], To: f.str["to"], On: f.str["on"],
		Until: f.str["until"], Task: f.str["task"], Meta: f.meta}
}

func (f fields) amend(id string) api.PromiseAmend {
	return api.PromiseAmend{ID: cmp.Or(id, f.str["id"]), Until: f.str["until"], Reason: f.str["reason"], Meta: f.meta}
}

func (f fields) resolve(id string) api.PromiseResolve {
	return api.PromiseResolve{ID: cmp.Or(id, f.str["id"]), As: f.str["as"], Evidence: f.evidence, Reason: f.str["reason"], Meta: f.meta}
}

func (f fields) assess(id string) api.PromiseAssess {
	return api.PromiseAssess{ID: cmp.Or(id, f.str["id"]), State: f.str["state"], Observer: f.str["observer"], Note: f.str["note"], Meta: f.meta}
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
	l.Read(func(st *ledger.State, _ store.Position) {
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
	l.Read(func(st *ledger.State, _ store.Position) {
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
