package ledgerservice

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

	"tally/api"
	"tally/ledger"
	"tally/promise"
	"tally/refuse"
	"tally/rest"
	"tally/service"
	"tally/store"
)

var _ service.Logs = (*Local)(nil)

// Export writes c's session as format.
func (s *Local) Export(ctx context.Context, c service.Call, format string, w io.Writer, warn func(string)) (service.Exported, error) {
	l, err := s.read(ctx, c)
	if err != nil {
		return service.Exported{}, err
	}
	if summary := l.SkippedSummary(); summary != "" && warn != nil {
		warn(summary)
	}
	switch format {
	case "", "jsonl", "pinki", "json":
	default:
		return service.Exported{}, refuse.Invalidf("format", "must be jsonl, json or pinki")
	}
	if format == "json" {
		now := s.at(c)
		_, err := w.Write(api.PromiseList(now, "promises", l.Promises(promise.Filter{State: "all"}, now)))
		return service.Exported{}, err
	}
	// Only acknowledged lines, as the event stream sends: a line still
	// being written is not the ledger's yet.
	end := l.Durable().Offset
	pos, err := ExportLines(w, format == "pinki", func(fn func(store.Entry) error) (store.Position, *store.Torn, error) {
		return l.Log().ScanUntil(store.Position{}, end, fn)
	})
	if err != nil {
		return service.Exported{}, s.relative(err)
	}
	// What follows the acknowledged lines is another writer's line being
	// written, or a torn tail an interrupted write left.
	_, torn, _ := l.Log().Scan(pos, func(store.Entry) error { return errFollowed })
	if torn == nil {
		return service.Exported{}, nil
	}
	return service.Exported{Torn: &service.Torn{Offset: torn.Offset, Size: torn.Size}}, nil
}

// errFollowed stops a scan at the first whole line.
var errFollowed = errors.New("a whole line follows")

// ExportLines writes the lines scan yields as `tally export` prints them:
// each log line (jsonl), or each promise record without its envelope
// (pinki), and returns the position after the last. On an error what is
// still buffered is dropped, so a caller that has sent nothing yet can
// still refuse cleanly.
func ExportLines(w io.Writer, pinki bool, scan func(fn func(store.Entry) error) (store.Position, *store.Torn, error)) (store.Position, error) {
	bw := bufio.NewWriterSize(w, 1<<16)
	pos, _, err := scan(func(e store.Entry) error {
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
		return pos, err
	}
	return pos, bw.Flush()
}

// Import appends lines to c's session, all or none; with a request id the
// answer is recorded with the records (one log line), so a retry gets it
// byte for byte and appends nothing.
func (s *Local) Import(ctx context.Context, c service.Call, lines []byte) (service.Imported, error) {
	if len(c.RequestID) > service.RequestIDMax {
		return service.Imported{}, refuse.Invalidf("request_id", fmt.Sprintf("at most %d bytes", service.RequestIDMax))
	}
	l, err := s.sessions.Open(ctx, c.Tenant, c.Session, true)
	if err != nil {
		return service.Imported{}, err
	}
	split := bytes.Split(lines, []byte{'\n'})
	opts := ledger.WriteOptions{Actor: c.Actor, RequestID: c.RequestID}
	if c.RequestID == "" {
		rep, err := l.Import(ctx, split, opts)
		if err != nil {
			return service.Imported{}, ImportRefusal(err)
		}
		return service.Imported{Doc: service.Doc{JSON: service.ImportDoc(rep, true)}, Report: rep}, nil
	}
	digest, err := s.digest(service.MethodImport, lines)
	if err != nil {
		return service.Imported{}, err
	}
	idem := &ledger.Idempotency{Principal: c.Actor, Key: c.RequestID, Digest: digest}
	rep, resp, replayed, err := l.ImportIdempotent(ctx, split, opts, idem, recordedImportDoc)
	if err != nil {
		return service.Imported{}, ImportRefusal(err)
	}
	doc := service.Doc{JSON: append(resp[:len(resp):len(resp)], '\n'), Replayed: replayed}
	if replayed {
		return service.ReadImported(doc)
	}
	return service.Imported{Doc: doc, Report: rep}, nil
}

// recordedImportDoc is the answer to an import with a request id:
// ImportDoc, with at most ImportWarningsMax warnings (and a last one
// counting the rest), so that it fits the log line it is recorded in.
func recordedImportDoc(rep ledger.ImportReport) []byte {
	if n := len(rep.Warnings); n > ImportWarningsMax {
		rep.Warnings = append(rep.Warnings[:ImportWarningsMax:ImportWarningsMax], fmt.Sprintf("and %d more lines of types tally does not fold, kept as they are", n-ImportWarningsMax))
	}
	return service.ImportDoc(rep, true)
}

// ImportWarningsMax bounds the warnings a recorded import answer lists.
const ImportWarningsMax = 100

// ImportRefusal makes a refused import line a refusal of the input (the
// line is the field at fault), so a bad line is a usage error both ways:
// HTTP 400 from the server, exit 2 from a local import.
func ImportRefusal(err error) error {
	var ie *ledger.ImportError
	if !errors.As(err, &ie) {
		return err
	}
	if _, ok := refuse.As(err); ok {
		return err
	}
	return refuse.Invalidf("line "+strconv.Itoa(ie.Line), ie.Err.Error())
}

// Verify checks c's session's log.
func (s *Local) Verify(ctx context.Context, c service.Call) (service.Verified, error) {
	root, err := s.root()
	if err != nil {
		return service.Verified{}, err
	}
	dir, err := store.SessionDir(root, c.Tenant, c.Session)
	if err != nil {
		return service.Verified{}, rest.NewRefusal(http.StatusBadRequest, "invalid", err.Error())
	}
	rep, path, err := s.verifySession(ctx, c.Tenant, c.Session, dir)
	if err != nil {
		return service.Verified{}, err
	}
	rep.Err = s.relative(rep.Err)
	if s.relativeLogs {
		path = logName(root, path)
	}
	return service.Verified{Doc: service.Doc{JSON: VerifyDoc(rep)}, Log: path, Whole: rep.Whole()}, nil
}

// VerifyAll checks every session of c.Tenant, or of every tenant: the
// report `tally verify --json` prints without --session: whole (every
// session is), and each session's name, its log named relative to the
// ledger directory, and its report as VerifyDoc makes it.
func (s *Local) VerifyAll(ctx context.Context, c service.Call) (service.Verified, error) {
	root, err := s.root()
	if err != nil {
		return service.Verified{}, err
	}
	sessions, err := store.Sessions(root, c.Tenant)
	if err != nil {
		return service.Verified{}, err
	}
	whole := true
	list := []byte{'['}
	for i, ss := range sessions {
		dir, err := store.SessionDir(root, ss.Tenant, ss.Name)
		if err != nil {
			return service.Verified{}, err
		}
		rep, path, err := s.verifySession(ctx, ss.Tenant, ss.Name, dir)
		if err != nil {
			return service.Verified{}, fmt.Errorf("session %s: %w", ss, err)
		}
		rep.Err = relative(root, rep.Err)
		whole = whole && rep.Whole()
		if i > 0 {
			list = append(list, ',')
		}
		list = fmt.Appendf(list, `{"session":%s,"log":%s,"report":%s}`, api.S(ss.String()), api.S(logName(root, path)), bytes.TrimSpace(VerifyDoc(rep)))
	}
	list = append(list, ']')
	return service.Verified{Doc: service.Doc{JSON: api.Doc(api.M("whole", []byte(strconv.FormatBool(whole))), api.M("sessions", list))}, Whole: whole}, nil
}

// verifySession verifies a session's log: through its open ledger when
// the Sessions can hold one for the call (a session with no log is then
// its refusal), else, or when no ledger opens (a log too damaged to
// fold), on the bare file. It returns the log's path.
func (s *Local) verifySession(ctx context.Context, tenant, session, dir string) (ledger.VerifyReport, string, error) {
	if v, ok := s.sessions.(SessionVisitor); ok {
		var rep ledger.VerifyReport
		var path string
		err := v.Visit(ctx, tenant, session, func(l *ledger.Ledger) { rep, path = l.Verify(), l.Log().Path() })
		if err == nil {
			return rep, path, nil
		}
		if _, serr := os.Stat(store.LogPath(dir)); serr != nil {
			return ledger.VerifyReport{}, "", err // no log: nothing to verify, nothing made
		}
	}
	b, err := ledger.OpenBare(dir)
	if err != nil {
		return ledger.VerifyReport{}, "", fmt.Errorf("verify: %w", err)
	}
	defer b.Close()
	return b.Verify(), b.Log().Path(), nil
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
		unk = fmt.Appendf(unk, `{"type":%s,"count":%d,"first_line":%d,"reason":%s}`, api.S(t), sk.Count, sk.FirstLine, api.S(sk.Reason))
	}
	unk = append(unk, ']')
	errv := []byte("null")
	if rep.Err != nil {
		errv = api.S(rep.Err.Error())
	}
	torn := []byte("null")
	if rep.Torn != nil {
		torn = fmt.Appendf(nil, `{"offset":%d,"bytes":%d}`, rep.Torn.Offset, rep.Torn.Size)
	}
	return api.Doc(api.M("whole", []byte(strconv.FormatBool(rep.Whole()))), api.M("lines", []byte(strconv.FormatUint(rep.Lines, 10))),
		api.M("error", errv), api.M("torn", torn), api.M("unknown", unk))
}

// root is the ledger directory.
func (s *Local) root() (string, error) {
	if s.rootOf == nil {
		return "", errors.New("service: this Local has no ledger directory")
	}
	return s.rootOf()
}

// relative names a damaged log relative to the ledger directory, when
// Local names logs so.
func (s *Local) relative(err error) error {
	if !s.relativeLogs || err == nil {
		return err
	}
	root, rerr := s.root()
	if rerr != nil {
		return err
	}
	return relative(root, err)
}

// logName is a session's log path relative to the ledger directory.
func logName(root, path string) string {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return filepath.Base(path)
	}
	return filepath.ToSlash(rel)
}

func relative(root string, err error) error {
	var ce *store.CorruptError
	if !errors.As(err, &ce) {
		return err
	}
	return &store.CorruptError{Path: logName(root, ce.Path), Line: ce.Line, Reason: ce.Reason}
}
