package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"tally/api"
	"tally/auth"
	"tally/expect"
	"tally/instant"
	"tally/jsondoc"
	"tally/ledger"
	"tally/rule"
)

// The expectations family over HTTP. A raise body is the draft's document,
// as `tally expect raise -` reads it (times RFC 3339 UTC, durations ISO 8601).
// Who raised, withdrew or observed is the authenticated identity; a
// person-role token may extend past the lineage bound; only the
// timekeeper-role token commits lapses. Responses are the documents the CLI
// prints with --json.

func (s *Server) expectRoutes() []route {
	e := sessionPath + "/expectations"
	return []route{
		{name: "expect.raise", method: "POST", pattern: e, summary: "Raise an expectation as the authenticated identity", body: "ExpectRaise", write: true, handle: s.expectRaise},
		{name: "expect.list", method: "GET", pattern: e, summary: "List expectations (state, kind, subject=TYPE:ID, task, context)", handle: s.expectList},
		{name: "expect.show", method: "GET", pattern: e + "/{id}", summary: "One expectation: state, projected, current and actual times, lapses, lineage", handle: s.expectShow},
		{name: "expect.withdraw", method: "POST", pattern: e + "/{id}/withdraw", summary: "Withdraw an open expectation (its raiser or a person)", body: "ExpectWithdraw", write: true, handle: s.expectWithdraw},
		{name: "expect.supersede", method: "POST", pattern: e + "/{id}/supersede", summary: "Extend an expectation: terms not given are inherited (past the lineage bound: person role only)", body: "ExpectRaise", write: true, handle: s.expectSupersede},
		{name: "expect.fact", method: "POST", pattern: sessionPath + "/facts", summary: "Record an observed fact; expectations with its key are satisfied", body: "ExpectFact", write: true, handle: s.expectFact},
		{name: "expect.task.outcome", method: "POST", pattern: sessionPath + "/tasks/{task}/outcome", summary: "Record an origin task's outcome (cancelled or failed withdraws its expectations)", body: "ExpectTaskOutcome", write: true, handle: s.expectTaskOutcome},
		{name: "expect.lapses", method: "GET", pattern: sessionPath + "/lapses", summary: "Recorded lapses in log order (since=RFC 3339, expectation=ID)", handle: s.expectLapses},
		{name: "expect.lapse", method: "POST", pattern: sessionPath + "/lapses", summary: "Commit a lapse (timekeeper role only)", body: "ExpectLapse", write: true, handle: s.expectLapse},
	}
}

// expectDoc is a --json document of the expect verbs: schema_version, then
// each name/value pair with its value encoded by encoding/json.
func expectDoc(pairs ...any) []byte {
	var b bytes.Buffer
	b.WriteString(`{"schema_version":`)
	b.WriteString(strconv.Itoa(jsondoc.SchemaVersion))
	for i := 0; i+1 < len(pairs); i += 2 {
		name, _ := json.Marshal(pairs[i].(string))
		v, err := json.Marshal(pairs[i+1])
		if err != nil {
			v = []byte("null")
		}
		b.WriteByte(',')
		b.Write(name)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// expectWrite authenticates, reads the body, builds the command against the
// session and executes it.
func (s *Server) expectWrite(w http.ResponseWriter, r *http.Request, status int, build func(body []byte, l *ledger.Ledger) (expect.Command, func(*ledger.State, []ledger.Result) []byte, error)) {
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
	cmd, render, err := build(body, l)
	if err != nil {
		s.writeError(w, err)
		return
	}
	s.execute(w, r, p, l, body, ledger.Command{Expect: cmd, Human: p.role == auth.RolePerson}, status, render)
}

func seqOf(res []ledger.Result) uint64 {
	if len(res) == 0 {
		return 0
	}
	return res[0].Seq
}

// renderExpectation is {"seq":N,"expectation":VIEW}.
func renderExpectation(id string) func(*ledger.State, []ledger.Result) []byte {
	return func(st *ledger.State, res []ledger.Result) []byte {
		v, _ := st.Expects.Expectation(id)
		return expectDoc("seq", seqOf(res), "expectation", v)
	}
}

func (s *Server) expectRaise(w http.ResponseWriter, r *http.Request) {
	s.expectWrite(w, r, http.StatusCreated, func(body []byte, _ *ledger.Ledger) (expect.Command, func(*ledger.State, []ledger.Result) []byte, error) {
		var d api.ExpectRaise
		if err := api.Decode("body", body, &d); err != nil {
			return nil, nil, err
		}
		if d.Supersedes != "" {
			return nil, nil, rule.Invalidf("supersedes", "extend an expectation with POST …/expectations/{id}/supersede")
		}
		rz, err := d.Raise()
		if err != nil {
			return nil, nil, err
		}
		return expect.RaiseCommand{Raise: rz}, renderExpectation(rz.ExpectationID), nil
	})
}

func (s *Server) expectSupersede(w http.ResponseWriter, r *http.Request) {
	s.expectWrite(w, r, http.StatusCreated, func(body []byte, l *ledger.Ledger) (expect.Command, func(*ledger.State, []ledger.Result) []byte, error) {
		var d api.ExpectRaise
		if len(bytes.TrimSpace(body)) == 0 {
			body = []byte("{}")
		}
		if err := api.Decode("body", body, &d); err != nil {
			return nil, nil, err
		}
		old := r.PathValue("id")
		if d.Supersedes != "" && d.Supersedes != old {
			return nil, nil, rule.Invalidf("supersedes", "names "+strconv.Quote(d.Supersedes)+" but the path names "+strconv.Quote(old))
		}
		d.Supersedes = old
		c, err := d.Supersede()
		if err != nil {
			return nil, nil, err
		}
		return c, renderExpectation(c.Raise.ExpectationID), nil
	})
}

func (s *Server) expectWithdraw(w http.ResponseWriter, r *http.Request) {
	s.expectWrite(w, r, http.StatusOK, func(body []byte, _ *ledger.Ledger) (expect.Command, func(*ledger.State, []ledger.Result) []byte, error) {
		var d api.ExpectWithdraw
		if len(bytes.TrimSpace(body)) > 0 {
			if err := api.Decode("body", body, &d); err != nil {
				return nil, nil, err
			}
		}
		id := r.PathValue("id")
		return d.Command(id), renderExpectation(id), nil
	})
}

// factView is a fact as `tally fact --json` prints it.
type factView struct {
	FactKey string         `json:"factKey"`
	Subject expect.Subject `json:"subject"`
	At      time.Time      `json:"at"`
	By      string         `json:"by"`
}

func (s *Server) expectFact(w http.ResponseWriter, r *http.Request) {
	s.expectWrite(w, r, http.StatusCreated, func(body []byte, l *ledger.Ledger) (expect.Command, func(*ledger.State, []ledger.Result) []byte, error) {
		var d api.ExpectFact
		if err := api.Decode("body", body, &d); err != nil {
			return nil, nil, err
		}
		cmd, err := d.Command(api.ParseInstant)
		if err != nil {
			return nil, nil, err
		}
		if err := l.Refresh(); err != nil {
			return nil, nil, err
		}
		var open []string
		l.Read(func(st *ledger.State) {
			for _, v := range st.Expects.List(expect.Filter{State: "open"}) {
				if v.SatisfiedBy.FactKey == d.FactKey {
					open = append(open, v.ExpectationID)
				}
			}
		})
		render := func(st *ledger.State, res []ledger.Result) []byte {
			satisfied := []string{}
			for _, id := range open {
				if v, ok := st.Expects.Expectation(id); ok && v.State == "satisfied" {
					satisfied = append(satisfied, id)
				}
			}
			var fv factView
			if len(res) > 0 {
				if ev, err := expect.Decode(res[0].Line); err == nil && ev.Fact != nil {
					fv = factView{FactKey: ev.Fact.FactKey, Subject: ev.Fact.Subject, At: ev.Fact.At, By: ev.Fact.By}
				}
			}
			return expectDoc("seq", seqOf(res), "fact", fv, "satisfied", satisfied)
		}
		return cmd, render, nil
	})
}

func (s *Server) expectTaskOutcome(w http.ResponseWriter, r *http.Request) {
	s.expectWrite(w, r, http.StatusOK, func(body []byte, _ *ledger.Ledger) (expect.Command, func(*ledger.State, []ledger.Result) []byte, error) {
		var d api.ExpectTaskOutcome
		if err := api.Decode("body", body, &d); err != nil {
			return nil, nil, err
		}
		task := r.PathValue("task")
		render := func(_ *ledger.State, res []ledger.Result) []byte {
			withdrawn := []string{}
			for _, x := range res {
				if x.Type != expect.TypeWithdraw {
					continue
				}
				if ev, err := expect.Decode(x.Line); err == nil && ev.Withdraw != nil {
					withdrawn = append(withdrawn, ev.Withdraw.ExpectationID)
				}
			}
			return expectDoc("seq", seqOf(res), "task", map[string]string{"taskId": task, "outcome": d.Outcome}, "withdrawn", withdrawn)
		}
		return d.Command(task), render, nil
	})
}

func (s *Server) expectLapse(w http.ResponseWriter, r *http.Request) {
	s.expectWrite(w, r, http.StatusCreated, func(body []byte, _ *ledger.Ledger) (expect.Command, func(*ledger.State, []ledger.Result) []byte, error) {
		var d api.ExpectLapse
		if err := api.Decode("body", body, &d); err != nil {
			return nil, nil, err
		}
		cmd, err := d.Command()
		if err != nil {
			return nil, nil, err
		}
		return cmd, renderExpectation(d.ExpectationID), nil
	})
}

func (s *Server) expectList(w http.ResponseWriter, r *http.Request) {
	l, err := s.openRead(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	q := r.URL.Query()
	f := expect.Filter{State: q.Get("state"), Kind: q.Get("kind"), TaskID: q.Get("task"), ContextID: q.Get("context")}
	if f.State != "" {
		if _, ok := expect.ParseLife(f.State); !ok {
			s.writeError(w, rule.Invalidf("state", "must be open, satisfied, withdrawn or superseded"))
			return
		}
	}
	if sub := q.Get("subject"); sub != "" {
		t, id, ok := strings.Cut(sub, ":")
		if !ok || t == "" || id == "" {
			s.writeError(w, rule.Invalidf("subject", "must be TYPE:ID"))
			return
		}
		f.Subject = expect.Subject{Type: t, ID: id}
	}
	var vs []expect.View
	vs = l.Expectations(f)
	writeDoc(w, http.StatusOK, expectDoc("expectations", vs))
}

func (s *Server) expectShow(w http.ResponseWriter, r *http.Request) {
	l, err := s.openRead(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	id := r.PathValue("id")
	var v expect.View
	var ok bool
	v, ok = l.Expectation(id)
	if !ok {
		s.writeError(w, rule.NotFoundf("expectationId", "names no expectation in this ledger: "+id))
		return
	}
	writeDoc(w, http.StatusOK, expectDoc("expectation", v))
}

func (s *Server) expectLapses(w http.ResponseWriter, r *http.Request) {
	l, err := s.openRead(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	q := r.URL.Query()
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, err := instant.Parse("since", v)
		if err != nil {
			s.writeError(w, err)
			return
		}
		since = t
	}
	var ls []expect.LapseView
	ls = l.Lapses(since)
	out := []expect.LapseView{}
	for _, x := range ls {
		if e := q.Get("expectation"); e == "" || x.ExpectationID == e {
			out = append(out, x)
		}
	}
	writeDoc(w, http.StatusOK, expectDoc("lapses", out))
}
