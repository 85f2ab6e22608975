package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"tally/api"
	"tally/refuse"
	"tally/service"
)

// The expectations family over HTTP. A raise body is the draft's document,
// as `tally expect raise -` reads it (times RFC 3339 UTC, durations ISO 8601).
// Who raised, withdrew or observed is the authenticated identity; a
// person-role token may extend past the lineage bound; only the
// timekeeper-role token commits lapses. Responses are the documents the CLI
// prints with --json.

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
		return service.Doc{}, refuse.Invalidf("supersedes", "extend an expectation with POST …/expectations/{id}/supersede")
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
