package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"tally/claim"
	"tally/expect"
	"tally/jsonline"
	"tally/promise"
	"tally/refuse"
	"tally/service"
	"tally/store"
)

// ImportReport says what an import appended: the seam's document, which
// an import's answer is rendered from.
type ImportReport = service.ImportReport

// ImportError locates a line of an import that was refused.
type ImportError struct {
	Line int
	Err  error
}

func (e *ImportError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *ImportError) Unwrap() error { return e.Err }

// Import appends another tool's ledger lines (pinki's JSONL, or lines of a
// tally log, whose envelopes are dropped and made anew), keeping each
// record's bytes, ts and ids. Every line is checked before anything is
// written; one bad line refuses the whole import. All lines share one fsync.
func (l *Ledger) Import(ctx context.Context, lines [][]byte, opts WriteOptions) (ImportReport, error) {
	rep, _, _, err := l.ImportIdempotent(ctx, lines, opts, nil, nil)
	return rep, err
}

// ImportIdempotent is Import made safe to retry. With idem set (its Render
// is not used), render makes the response from the report, and it is
// recorded with the records in the same fsync: a retry with the same key
// and digest gets that response byte for byte and replayed true, appending
// nothing (the report is then empty); the same key with another digest is
// a service.IdempotencyError.
func (l *Ledger) ImportIdempotent(ctx context.Context, lines [][]byte, opts WriteOptions, idem *Idempotency, render func(ImportReport) []byte) (ImportReport, []byte, bool, error) {
	recs := make([]pending, 0, len(lines))
	var rep ImportReport
	for i, raw := range lines {
		line := bytes.TrimRight(raw, " \t\r\n")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if !jsonline.Valid(line) || !jsonline.IsObject(bytes.TrimSpace(line)) {
			return rep, nil, false, &ImportError{Line: i + 1, Err: errors.New("not a JSON object")}
		}
		if hasEnvelope(line) {
			body, err := store.StripEnvelope(line)
			if err != nil {
				return rep, nil, false, &ImportError{Line: i + 1, Err: fmt.Errorf("member %q is not a tally envelope: %v", promise.EnvelopeKey, err)}
			}
			line = body
		}
		if len(line)+512 > store.LineMax {
			return rep, nil, false, &ImportError{Line: i + 1, Err: fmt.Errorf("record over %d bytes", store.LineMax-512)}
		}
		p, known, err := importRecord(line)
		if err != nil {
			return rep, nil, false, &ImportError{Line: i + 1, Err: err}
		}
		if !known {
			rep.Unknown++
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("line %d: record type %q is not one tally folds; kept as is", i+1, p.typ))
		}
		recs = append(recs, p)
	}
	if len(recs) == 0 {
		return rep, nil, false, refuse.Invalidf("file", "holds no records")
	}
	req := &request{opts: opts, decide: func(st *State, now time.Time) ([]pending, []string, error) {
		return recs, nil, nil
	}}
	report := func(res []Result) ImportReport {
		r := rep
		r.Appended = len(res)
		if len(res) > 0 {
			r.FirstSeq, r.LastSeq = res[0].Seq, res[len(res)-1].Seq
		}
		return r
	}
	if idem != nil {
		k := *idem
		k.Render = func(_ *State, res []Result) []byte { return render(report(res)) }
		req.idem = &k
	}
	res, err := l.submit(ctx, req)
	if err != nil {
		return rep, nil, false, err
	}
	if req.replayed {
		return ImportReport{}, req.response, true, nil
	}
	return report(res), req.response, false, nil
}

// importRecord checks one imported record with the decoder of the family
// its type belongs to (the fold's dispatch), so a malformed record of any
// known type is refused, and only a type no family knows is kept with a
// warning (known false).
func importRecord(line []byte) (pending, bool, error) {
	typ, err := promise.PeekType(line)
	if err != nil {
		return pending{}, false, err
	}
	if typ == "" {
		return pending{}, false, errors.New("type: missing")
	}
	p := pending{typ: typ, body: append([]byte(nil), line...), import_: true}
	switch {
	case promise.Known(typ):
		ev, err := promise.Decode(line)
		if err != nil {
			return pending{}, false, err
		}
		p.ev, p.party = ev, ev.Party()
	case claim.Known(typ):
		if _, err := claim.Decode(line); err != nil {
			return pending{}, false, err
		}
	case expect.Known(typ):
		if _, err := expect.Decode(line); err != nil {
			return pending{}, false, err
		}
	case typ == TypeRequest:
		if err := (&State{}).applyRequest(store.Entry{Line: line}); err != nil {
			return pending{}, false, err
		}
	default:
		return p, false, nil
	}
	return p, true, nil
}

func hasEnvelope(line []byte) bool {
	found := false
	_ = jsonline.Object(line, func(key, _ []byte) error {
		if string(key) == promise.EnvelopeKey {
			found = true
		}
		return nil
	})
	return found
}

// Lines calls fn with every verified line of the log, in order. It reads
// the file afresh (not the checkpoint): export and verify see the log itself.
func (l *Ledger) Lines(fn func(store.Entry) error) (store.Position, *store.Torn, error) {
	return l.log.Scan(store.Position{}, fn)
}

// VerifyReport is the result of checking a whole log.
type VerifyReport struct {
	Lines   uint64
	Torn    *store.Torn
	Skipped map[string]*SkipCount
	Err     error // the first damage found, with its line number
}

// Whole reports whether the log is whole: every line verified and no torn tail.
func (r VerifyReport) Whole() bool { return r.Err == nil && r.Torn == nil }

// Bare is a session log opened without folding it, for verify.
type Bare struct{ log *store.Log }

// OpenBare opens the session log in dir without reading it.
func OpenBare(dir string) (*Bare, error) {
	lg, err := store.Open(dir, nil)
	if err != nil {
		return nil, err
	}
	return &Bare{log: lg}, nil
}

// Close releases the log.
func (b *Bare) Close() error { return b.log.Close() }

// Log is the underlying store.
func (b *Bare) Log() *store.Log { return b.log }

// Verify checks every line of the log.
func (b *Bare) Verify() VerifyReport { return verify(b.log, DefaultConfig()) }

// Verify checks every line of the log.
func (l *Ledger) Verify() VerifyReport { return verify(l.log, l.cfg) }

// verify checks every line: JSON, envelope, sequence, chain hash, and that
// each known record reads; it lists record types it does not know.
func verify(lg *store.Log, cfg Config) VerifyReport {
	st := newState(cfg)
	pos, torn, err := lg.Scan(store.Position{}, st.apply)
	if err == nil && torn != nil {
		// An incomplete last line may be a write in progress: look again
		// holding the writers' lock, when no write can be.
		if tx, lerr := lg.Begin(context.Background()); lerr == nil {
			pos, torn, err = lg.Scan(pos, st.apply)
			tx.Abort()
		}
	}
	return VerifyReport{Lines: pos.Seq, Torn: torn, Skipped: st.Skipped, Err: err}
}
