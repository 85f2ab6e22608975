package server

// The log itself over HTTP: export, verify and import, so the CLI's
// `tally export`, `tally verify` and `tally import` work as clients and
// print what they print on a local ledger directory.
//
// Who may do what: export and verify are reads, open to every token of the
// tenant, as ls, show and the event stream are (the event stream already
// sends each log line with its envelope, so the raw log reveals nothing a
// reader cannot see). Import is restricted to the admin role: it appends
// records as the parties they name (each record keeps its own by, to and
// observer), which no other route lets a token do.
//
// Paths in answers are the log's path relative to the server's ledger
// directory (sessions/TENANT/SESSION/log.jsonl): a client learns which
// session's file is damaged, not where the server keeps it.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"tally/api"
	"tally/auth"
	"tally/refuse"
	"tally/rest"
	"tally/service"
)

// ImportBodyMax bounds the body of an import. An import is read whole and
// checked line by line before anything is appended, so it is held in
// memory; other writes are bounded by Config.BodyMax.
const ImportBodyMax = 64 << 20

// The headers of the log routes (api's, named here too for the server's
// callers).
const (
	ExportErrorTrailer = api.ExportErrorTrailer
	LogHeader          = api.LogHeader
	WarningHeader      = api.WarningHeader
)

func (s *Server) verifyAll(r *http.Request) (int, any, error) {
	res, err := s.local.VerifyAll(r.Context(), service.Call{Tenant: callerOf(r).tenant})
	return http.StatusOK, res.JSON, err
}

// countingWriter remembers whether anything reached the response.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// export is a stream: the log goes out as it is read, and an error after
// the first bytes is a trailer, the status having been sent.
func (s *Server) export(w http.ResponseWriter, r *http.Request) {
	c, err := s.readCall(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	var q api.ExportQuery
	if err := api.DecodeQuery(r.URL.Query(), &q); err != nil {
		s.writeError(w, err)
		return
	}
	format := q.Format
	if format == "json" {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Trailer", ExportErrorTrailer)
	}
	cw := &countingWriter{w: w}
	_, err = s.local.Export(r.Context(), c, format, cw, func(warn string) { w.Header().Set(WarningHeader, warn) })
	if err == nil {
		return
	}
	if cw.n == 0 {
		w.Header().Del("Trailer")
		w.Header().Del("Content-Type")
		s.writeError(w, err)
		return
	}
	s.cfg.Logger.Error("export failed after its first bytes", "err", err)
	w.Header().Set(ExportErrorTrailer, string(bytes.TrimSpace(rest.Refuse(err).Document)))
}

func (s *Server) verify(r *http.Request) (int, any, error) {
	res, err := s.local.Verify(r.Context(), sessionCall(r))
	return http.StatusOK, withHeader{LogHeader, res.Log, res.JSON}, err
}

// importTypes are the media types an import takes: lines of JSON, or
// bytes not described further.
var importTypes = []string{"application/x-ndjson", "application/jsonl", "text/plain", mediaBytes}

func (s *Server) importLog(r *http.Request) (int, any, error) {
	p := callerOf(r)
	if p.role != auth.RoleAdmin {
		return 0, nil, refuse.Forbiddenf("role", "only an admin-role token imports: an import appends records as the parties they name, and this token acts as "+p.actor+" with role "+p.role)
	}
	if err := requireContentType(r, importTypes...); err != nil {
		return 0, nil, err
	}
	key, err := requestID(r)
	if err != nil {
		return 0, nil, err
	}
	if r.ContentLength > ImportBodyMax {
		// Refused before reading a byte; a body of unknown length is
		// bounded as it is read.
		return 0, nil, &http.MaxBytesError{Limit: ImportBodyMax}
	}
	body, err := readImport(r)
	if err != nil {
		return 0, nil, err
	}
	c := sessionCall(r)
	c.Actor, c.RequestID = p.actor, key
	res, err := s.local.Import(r.Context(), c, body)
	return http.StatusOK, res.Doc, err
}

// readImport reads an import's body: into one allocation of its declared
// length, else growing as it comes (bounded by the route's bodyMax).
func readImport(r *http.Request) ([]byte, error) {
	if r.ContentLength <= 0 {
		return io.ReadAll(r.Body)
	}
	b := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, b); err != nil {
		return nil, fmt.Errorf("read import body: %w", err)
	}
	return b, nil
}
