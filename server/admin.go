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
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"tally/auth"
	"tally/jsondoc"
	"tally/ledger"
	"tally/promise"
	"tally/rule"
	"tally/store"
)

// ImportBodyMax bounds the body of an import. An import is read whole and
// checked line by line before anything is appended, so it is held in
// memory; other writes are bounded by Config.BodyMax.
const ImportBodyMax = 64 << 20

// ExportErrorTrailer carries the error document of an export that failed
// after its first bytes were sent, when the status can no longer say so.
const ExportErrorTrailer = "Tally-Error"

// LogHeader names the verified log, relative to the server's ledger
// directory, in a verify answer: the client's message for a torn tail
// names it as the local verb names its file.
const LogHeader = "Tally-Log"

// WarningHeader carries, on an export, the warning a local read prints on
// opening the ledger: the records it keeps but does not fold.
const WarningHeader = "Tally-Warning"

func (s *Server) adminRoutes() []route {
	return []route{
		{name: "session.export", method: "GET", pattern: sessionPath + "/export", summary: "The log as the CLI's export prints it: format=jsonl (lines with envelopes), pinki (promise records without envelopes) or json (states at now); acknowledged lines only", handle: s.export},
		{name: "session.verify", method: "GET", pattern: sessionPath + "/verify", summary: "Check every line of the log and its hash chain: the report `tally verify --json` prints (whole, lines, error, torn, unknown)", handle: s.verify},
		{name: "verify", method: "GET", pattern: "/v1/verify", summary: "Check every session of the token's tenant (every tenant's in --insecure-dev) as session.verify does: the report `tally verify --json` prints without --session (whole, and each session's name, log and report)", handle: s.verifyAll},
		{name: "session.import", method: "POST", pattern: sessionPath + "/import", summary: "Append a pinki ledger or tally log lines (body: one JSON record a line, application/x-ndjson or text/plain), keeping each record's ts, ids and parties; admin role only; all or nothing; not idempotent by key", write: true, bodyMax: ImportBodyMax, handle: s.importLog},
	}
}

// ExportLines writes the lines scan yields as `tally export` prints them:
// each log line (jsonl), or each promise record without its envelope
// (pinki). It returns the torn tail scan reports. On an error what is
// still buffered is dropped, so a caller that has sent nothing yet can
// still refuse cleanly.
func ExportLines(w io.Writer, pinki bool, scan func(fn func(store.Entry) error) (store.Position, *store.Torn, error)) (*store.Torn, error) {
	bw := bufio.NewWriterSize(w, 1<<16)
	_, torn, err := scan(func(e store.Entry) error {
		if !pinki {
			bw.Write(e.Line)
			return bw.WriteByte('\n')
		}
		typ, _ := promise.PeekType(e.Line)
		if !promise.Known(typ) {
			return nil
		}
		bw.Write(store.Body(e.Line))
		return bw.WriteByte('\n')
	})
	if err != nil {
		return torn, err
	}
	return torn, bw.Flush()
}

// VerifyDoc is a verify report as `tally verify --json` prints it.
func VerifyDoc(rep ledger.VerifyReport) []byte {
	types := make([]string, 0, len(rep.Skipped))
	for t := range rep.Skipped {
		types = append(types, t)
	}
	sort.Strings(types)
	unk := []byte{'['}
	for i, t := range types {
		if i > 0 {
			unk = append(unk, ',')
		}
		sk := rep.Skipped[t]
		unk = fmt.Appendf(unk, `{"type":%s,"count":%d,"first_line":%d,"reason":%s}`, jsondoc.S(t), sk.Count, sk.FirstLine, jsondoc.S(sk.Reason))
	}
	unk = append(unk, ']')
	errv := []byte("null")
	if rep.Err != nil {
		errv = jsondoc.S(rep.Err.Error())
	}
	torn := []byte("null")
	if rep.Torn != nil {
		torn = fmt.Appendf(nil, `{"offset":%d,"bytes":%d}`, rep.Torn.Offset, rep.Torn.Size)
	}
	return jsondoc.Doc(jsondoc.M("whole", []byte(strconv.FormatBool(rep.Whole()))), jsondoc.M("lines", []byte(strconv.FormatUint(rep.Lines, 10))),
		jsondoc.M("error", errv), jsondoc.M("torn", torn), jsondoc.M("unknown", unk))
}

// ImportDoc is an import's report as `tally import --json` prints it; with
// warnings also the warnings the text form prints (the server's answer).
func ImportDoc(rep ledger.ImportReport, warnings bool) []byte {
	ms := []jsondoc.Member{
		jsondoc.M("appended", []byte(strconv.Itoa(rep.Appended))), jsondoc.M("unknown", []byte(strconv.Itoa(rep.Unknown))),
		jsondoc.M("first_seq", []byte(strconv.FormatUint(rep.FirstSeq, 10))), jsondoc.M("last_seq", []byte(strconv.FormatUint(rep.LastSeq, 10))),
	}
	if warnings {
		list := []byte{'['}
		for i, w := range rep.Warnings {
			if i > 0 {
				list = append(list, ',')
			}
			list = append(list, jsondoc.S(w)...)
		}
		ms = append(ms, jsondoc.M("warnings", append(list, ']')))
	}
	return jsondoc.Doc(ms...)
}

// ImportRefusal makes a refused import line a refusal of the input (the
// line is the field at fault), so a bad line is a usage error both ways:
// HTTP 400 from the server, exit 2 from a local import.
func ImportRefusal(err error) error {
	var ie *ledger.ImportError
	if !errors.As(err, &ie) {
		return err
	}
	if _, ok := rule.As(err); ok {
		return err
	}
	return rule.Invalidf("line "+strconv.Itoa(ie.Line), ie.Err.Error())
}

// logName is a session's log path relative to the ledger directory.
func (s *Server) logName(path string) string { return logName(s.cfg.Root, path) }

func logName(root, path string) string {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return filepath.Base(path)
	}
	return filepath.ToSlash(rel)
}

// relative names a damaged log by logName instead of its path on the server.
func (s *Server) relative(err error) error { return relative(s.cfg.Root, err) }

func relative(root string, err error) error {
	var ce *store.CorruptError
	if !errors.As(err, &ce) {
		return err
	}
	return &store.CorruptError{Path: logName(root, ce.Path), Line: ce.Line, Reason: ce.Reason}
}

// VerifyAll verifies, with verify, every session of the ledger at root
// that has a log (of tenant, or of every tenant when it is empty) and
// returns the report `tally verify --json` prints without --session:
// whole (every session is), and each session's name, its log named
// relative to root, and its report as VerifyDoc makes it. Local and remote
// verify print it alike.
func VerifyAll(root, tenant string, verify func(store.Session, string) (ledger.VerifyReport, string, error)) ([]byte, error) {
	sessions, err := store.Sessions(root, tenant)
	if err != nil {
		return nil, err
	}
	whole := true
	list := []byte{'['}
	for i, ss := range sessions {
		dir, err := store.SessionDir(root, ss.Tenant, ss.Name)
		if err != nil {
			return nil, err
		}
		rep, path, err := verify(ss, dir)
		if err != nil {
			return nil, fmt.Errorf("session %s: %w", ss, err)
		}
		rep.Err = relative(root, rep.Err)
		whole = whole && rep.Whole()
		if i > 0 {
			list = append(list, ',')
		}
		list = fmt.Appendf(list, `{"session":%s,"log":%s,"report":%s}`, jsondoc.S(ss.String()), jsondoc.S(logName(root, path)), bytes.TrimSpace(VerifyDoc(rep)))
	}
	list = append(list, ']')
	return jsondoc.Doc(jsondoc.M("whole", []byte(strconv.FormatBool(whole))), jsondoc.M("sessions", list)), nil
}

func (s *Server) verifyAll(w http.ResponseWriter, r *http.Request) {
	p, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	doc, err := VerifyAll(s.cfg.Root, p.tenant, func(ss store.Session, dir string) (ledger.VerifyReport, string, error) {
		return s.verifySession(r.Context(), ss.Tenant, ss.Name, dir)
	})
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, doc)
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

func (s *Server) export(w http.ResponseWriter, r *http.Request) {
	l, err := s.openRead(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if warn := l.SkippedSummary(); warn != "" {
		w.Header().Set(WarningHeader, warn)
	}
	format := r.URL.Query().Get("format")
	switch format {
	case "json":
		now, err := s.readNow(r)
		if err != nil {
			s.writeError(w, err)
			return
		}
		vs := l.Promises(promise.Filter{State: "all"}, now)
		writeDoc(w, http.StatusOK, jsondoc.PromiseList(now, "promises", vs))
		return
	case "", "jsonl", "pinki":
	default:
		s.writeError(w, rule.Invalidf("format", "must be jsonl, json or pinki"))
		return
	}
	// Only acknowledged lines, as the event stream sends: a line still
	// being written is not the ledger's yet.
	end := l.Durable().Offset
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Trailer", ExportErrorTrailer)
	cw := &countingWriter{w: w}
	_, err = ExportLines(cw, format == "pinki", func(fn func(store.Entry) error) (store.Position, *store.Torn, error) {
		return l.Log().ScanUntil(store.Position{}, end, fn)
	})
	if err == nil {
		return
	}
	err = s.relative(err)
	if cw.n == 0 {
		w.Header().Del("Trailer")
		s.writeError(w, err)
		return
	}
	s.cfg.Logger.Error("export failed after its first bytes", "err", err)
	w.Header().Set(ExportErrorTrailer, string(bytes.TrimSpace(jsondoc.Error(err.Error(), errorCode(err)))))
}

// errorCode is the problem code of a failure that ends a stream.
func errorCode(err error) string {
	var ce *store.CorruptError
	if errors.As(err, &ce) {
		return "corrupt"
	}
	return "error"
}

func (s *Server) verify(w http.ResponseWriter, r *http.Request) {
	if _, err := s.authenticate(r); err != nil {
		s.writeError(w, err)
		return
	}
	dir, err := store.SessionDir(s.cfg.Root, r.PathValue("tenant"), r.PathValue("session"))
	if err != nil {
		s.writeError(w, badRequest{err.Error()})
		return
	}
	rep, path, err := s.verifySession(r.Context(), r.PathValue("tenant"), r.PathValue("session"), dir)
	if err != nil {
		s.writeError(w, err)
		return
	}
	rep.Err = s.relative(rep.Err)
	w.Header().Set(LogHeader, s.logName(path))
	writeDoc(w, http.StatusOK, VerifyDoc(rep))
}

// verifySession verifies the session's log through its open ledger, or,
// when no ledger opens (a log too damaged to fold), on the bare file, as
// the local verb does. It returns the log's path.
// A session with no log is NoSuchSession; one with an empty log is
// verified bare. Each session is released once verified, so verifying
// every session keeps the open bound.
func (s *Server) verifySession(ctx context.Context, tenant, session, dir string) (ledger.VerifyReport, string, error) {
	e, err := s.acquire(ctx, tenant, session, false)
	if err == nil {
		defer s.release(e)
		return e.l.Verify(), e.l.Log().Path(), nil
	}
	if _, serr := os.Stat(store.LogPath(dir)); serr != nil {
		return ledger.VerifyReport{}, "", err // no log: nothing to verify, nothing made
	}
	b, err := ledger.OpenBare(dir)
	if err != nil {
		return ledger.VerifyReport{}, "", fmt.Errorf("verify: %w", err)
	}
	defer b.Close()
	return b.Verify(), b.Log().Path(), nil
}

// importTypes are the media types an import takes: lines of JSON, or
// bytes not described further.
var importTypes = []string{"application/x-ndjson", "application/jsonl", "text/plain", mediaBytes}

func (s *Server) importLog(w http.ResponseWriter, r *http.Request) {
	p, err := s.authenticate(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if p.role != auth.RoleAdmin {
		s.writeError(w, rule.Forbiddenf("role", "only an admin-role token imports: an import appends records as the parties they name, and this token acts as "+p.actor+" with role "+p.role))
		return
	}
	if err := requireContentType(r, importTypes...); err != nil {
		s.writeError(w, err)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if len(key) > 256 {
		s.writeError(w, rule.Invalidf("Idempotency-Key", "at most 256 bytes"))
		return
	}
	l, err := s.sessionIn(r.Context(), r.PathValue("tenant"), r.PathValue("session"), true)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if r.ContentLength > ImportBodyMax {
		// Refused before reading a byte; a body of unknown length is
		// bounded as it is read.
		s.writeError(w, &http.MaxBytesError{Limit: ImportBodyMax})
		return
	}
	body, err := readImport(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	lines := bytes.Split(body, []byte{'\n'})
	if key == "" {
		rep, err := l.Import(r.Context(), lines, ledger.WriteOptions{Actor: p.actor})
		if err != nil {
			s.writeError(w, ImportRefusal(err))
			return
		}
		writeDoc(w, http.StatusOK, ImportDoc(rep, true))
		return
	}
	// With a key the answer is recorded with the records (one log line), so
	// a retry gets it byte for byte and appends nothing.
	idem := &ledger.Idempotency{Principal: p.actor, Key: key, Digest: s.commandDigest(r, body)}
	_, resp, replayed, err := l.ImportIdempotent(r.Context(), lines, ledger.WriteOptions{Actor: p.actor, RequestID: key}, idem, recordedImportDoc)
	if err != nil {
		s.writeError(w, ImportRefusal(err))
		return
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeDoc(w, http.StatusOK, append(resp[:len(resp):len(resp)], '\n'))
}

// recordedImportDoc is the answer to an import with a key: ImportDoc, with
// at most importWarningsMax warnings (and a last one counting the rest), so
// that it fits the log line it is recorded in.
func recordedImportDoc(rep ledger.ImportReport) []byte {
	if n := len(rep.Warnings); n > importWarningsMax {
		rep.Warnings = append(rep.Warnings[:importWarningsMax:importWarningsMax], fmt.Sprintf("and %d more lines of types tally does not fold, kept as they are", n-importWarningsMax))
	}
	return ImportDoc(rep, true)
}

// importWarningsMax bounds the warnings a recorded import answer lists.
const importWarningsMax = 100

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
