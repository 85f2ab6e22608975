package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"tally/api"
	"tally/service"
	"tally/vocab"
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
		{name: "expect.raise", method: "POST", pattern: e, summary: "Raise an expectation as the authenticated identity", body: "ExpectRaise", write: true, serve: apiWrite(s, http.StatusCreated, docRule[api.ExpectRaise]{}, s.expectRaise)},
		{name: "expect.list", method: "GET", pattern: e, summary: "List expectations (state, kind, subject=TYPE:ID, task, context)", serve: s.expectList},
		{name: "expect.show", method: "GET", pattern: e + "/{id}", summary: "One expectation: state, projected, current and actual times, lapses, lineage", serve: s.expectShow},
		{name: "expect.withdraw", method: "POST", pattern: e + "/{id}/withdraw", summary: "Withdraw an open expectation (its raiser or a person)", body: "ExpectWithdraw", write: true, serve: apiWrite(s, http.StatusOK, docRule[api.ExpectWithdraw]{empty: true}, s.expectWithdraw)},
		{name: "expect.supersede", method: "POST", pattern: e + "/{id}/supersede", summary: "Extend an expectation: terms not given are inherited (past the lineage bound: person role only)", body: "ExpectRaise", write: true, serve: apiWrite(s, http.StatusCreated, docRule[api.ExpectRaise]{empty: true}, s.expectSupersede)},
		{name: "expect.fact", method: "POST", pattern: sessionPath + "/facts", summary: "Record an observed fact; expectations with its key are satisfied", body: "ExpectFact", write: true, serve: apiWrite(s, http.StatusCreated, docRule[api.ExpectFact]{}, s.expectFact)},
		{name: "expect.task.outcome", method: "POST", pattern: sessionPath + "/tasks/{task}/outcome", summary: "Record an origin task's outcome (cancelled or failed withdraws its expectations)", body: "ExpectTaskOutcome", write: true, serve: apiWrite(s, http.StatusOK, docRule[api.ExpectTaskOutcome]{}, s.expectTaskOutcome)},
		{name: "expect.task", method: "GET", pattern: sessionPath + "/tasks/{task}", summary: "An origin task: its outcome once recorded and the expectations raised on it", serve: s.expectTaskOrigin},
		{name: "expect.lapses", method: "GET", pattern: sessionPath + "/lapses", summary: "Recorded lapses in log order (since=RFC 3339, expectation=ID)", serve: s.expectLapses},
		{name: "expect.lapse", method: "POST", pattern: sessionPath + "/lapses", summary: "Commit a lapse (timekeeper role only)", body: "ExpectLapse", write: true, serve: apiWrite(s, http.StatusCreated, docRule[api.ExpectLapse]{}, s.expectLapse)},
	}
}

// expectDoc is a --json document of the expect verbs: schema_version, then
// each name/value pair with its value encoded by encoding/json.
func expectDoc(pairs ...any) []byte {
	var b bytes.Buffer
	b.WriteString(`{"schema_version":`)
	b.WriteString(strconv.Itoa(api.SchemaVersion))
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

// checkReplyToDoc refuses, at raise time, a document's replyTo whose host
// the lapse allow-list refuses (as the A2A binding does).
func (s *Server) checkReplyToDoc(d *api.ExpectRaise) error {
	rt, err := api.ParseReplyTo("replyTo", d.ReplyTo)
	if err != nil {
		return err
	}
	return s.checkReplyTo("replyTo", rt)
}

// The write routes: each runs its service method on the decoded document.

func (s *Server) expectRaise(r *http.Request, c service.Call, d *api.ExpectRaise) (service.Doc, error) {
	if d.Supersedes != "" {
		return service.Doc{}, vocab.Invalidf("supersedes", "extend an expectation with POST …/expectations/{id}/supersede")
	}
	if err := s.checkReplyToDoc(d); err != nil {
		return service.Doc{}, err
	}
	res, err := s.local.RaiseExpectation(r.Context(), c, *d)
	return res.Doc, err
}

func (s *Server) expectSupersede(r *http.Request, c service.Call, d *api.ExpectRaise) (service.Doc, error) {
	if err := s.checkReplyToDoc(d); err != nil {
		return service.Doc{}, err
	}
	res, err := s.local.SupersedeExpectation(r.Context(), c, r.PathValue("id"), *d)
	return res.Doc, err
}

func (s *Server) expectWithdraw(r *http.Request, c service.Call, d *api.ExpectWithdraw) (service.Doc, error) {
	res, err := s.local.WithdrawExpectation(r.Context(), c, r.PathValue("id"), *d)
	return res.Doc, err
}

func (s *Server) expectFact(r *http.Request, c service.Call, d *api.ExpectFact) (service.Doc, error) {
	res, err := s.local.RecordFact(r.Context(), c, *d)
	return res.Doc, err
}

func (s *Server) expectTaskOutcome(r *http.Request, c service.Call, d *api.ExpectTaskOutcome) (service.Doc, error) {
	res, err := s.local.RecordTaskOutcome(r.Context(), c, r.PathValue("task"), *d)
	return res.Doc, err
}

func (s *Server) expectLapse(r *http.Request, c service.Call, d *api.ExpectLapse) (service.Doc, error) {
	res, err := s.local.CommitLapse(r.Context(), c, *d)
	return res.Doc, err
}

// expectRead answers a read route with the document read makes on the
// Call of the path's session.
func expectRead(r *http.Request, read func(c service.Call) (service.Doc, error)) (int, any, error) {
	doc, err := read(sessionCall(r))
	return http.StatusOK, doc.JSON, err
}

func (s *Server) expectList(r *http.Request) (int, any, error) {
	return expectRead(r, func(c service.Call) (service.Doc, error) {
		var q api.ExpectQuery
		if err := api.DecodeQuery(r.URL.Query(), &q); err != nil {
			return service.Doc{}, err
		}
		res, err := s.local.ListExpectations(r.Context(), c, q.Filter())
		return res.Doc, err
	})
}

func (s *Server) expectShow(r *http.Request) (int, any, error) {
	return expectRead(r, func(c service.Call) (service.Doc, error) {
		res, err := s.local.Expectation(r.Context(), c, r.PathValue("id"))
		return res.Doc, err
	})
}

func (s *Server) expectTaskOrigin(r *http.Request) (int, any, error) {
	return expectRead(r, func(c service.Call) (service.Doc, error) {
		res, err := s.local.TaskOrigin(r.Context(), c, r.PathValue("task"))
		return res.Doc, err
	})
}

func (s *Server) expectLapses(r *http.Request) (int, any, error) {
	return expectRead(r, func(c service.Call) (service.Doc, error) {
		var q api.LapsesQuery
		if err := api.DecodeQuery(r.URL.Query(), &q); err != nil {
			return service.Doc{}, err
		}
		f, err := service.LapsesOf(q)
		if err != nil {
			return service.Doc{}, err
		}
		res, err := s.local.Lapses(r.Context(), c, f)
		return res.Doc, err
	})
}
