package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"tally/api"
)

// Logs is what works on a session's log as a whole: export, import and
// verify.
type Logs interface {
	// Export writes c's session to w as format: jsonl (each acknowledged
	// line with its envelope), pinki (the promise records without
	// envelopes) or json (the promises at c.Now, one document). warn, when
	// set, hears before the first byte is written which records the session
	// keeps but does not fold. An error after the first bytes leaves w cut
	// short.
	Export(ctx context.Context, c Call, format string, w io.Writer, warn func(string)) (Exported, error)
	// Import appends lines (one record a line: pinki's, or tally log lines
	// with their envelopes) to c's session, all or none, keeping each
	// record's ts, ids and parties. A bad line is refused as an invalid
	// field named after it.
	Import(ctx context.Context, c Call, lines []byte) (Imported, error)
	// Verify checks every line of c's session's log and its hash chain.
	Verify(ctx context.Context, c Call) (Verified, error)
	// VerifyAll checks every session of c.Tenant ("" every tenant; the
	// client's server decides by its token).
	VerifyAll(ctx context.Context, c Call) (Verified, error)
}

// Exported is what an export left out.
type Exported struct {
	// Torn is an incomplete last line, left by an interrupted write and not
	// exported.
	Torn *Torn
}

// Torn describes an incomplete last line: the bytes after the last
// newline, from Offset.
type Torn struct {
	Offset int64
	Size   int64
}

// Imported is an import's report and its response document.
type Imported struct {
	Doc
	Report ImportReport
}

// Verified is a verify report document: whole, and for one session the
// name of its log.
type Verified struct {
	Doc
	Log   string
	Whole bool
}

// The log methods' names, for request ids.
const MethodImport = "Import"

// ReadWhole reads whether a verify report document says whole.
func ReadWhole(doc Doc) (bool, error) {
	var m struct {
		Whole bool `json:"whole"`
	}
	if err := json.Unmarshal(doc.JSON, &m); err != nil {
		return false, fmt.Errorf("verify report: %w", err)
	}
	return m.Whole, nil
}

// ImportReport says what an import appended.
type ImportReport struct {
	Appended int
	Unknown  int // records of types this tally does not fold (kept)
	Ignored  int // promise records the fold will ignore (duplicate declarations, resolves after the first…)
	FirstSeq uint64
	LastSeq  uint64
	Warnings []string
}

// ReadImported reads an import's response document into its report.
func ReadImported(doc Doc) (Imported, error) {
	var m struct {
		Appended int      `json:"appended"`
		Unknown  int      `json:"unknown"`
		FirstSeq uint64   `json:"first_seq"`
		LastSeq  uint64   `json:"last_seq"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal(doc.JSON, &m); err != nil {
		return Imported{}, fmt.Errorf("import response: %w", err)
	}
	return Imported{Doc: doc, Report: ImportReport{Appended: m.Appended, Unknown: m.Unknown, FirstSeq: m.FirstSeq, LastSeq: m.LastSeq, Warnings: m.Warnings}}, nil
}

// ImportDoc is an import's report as `tally import --json` prints it; with
// warnings also the warnings the text form prints (the server's answer).
func ImportDoc(rep ImportReport, warnings bool) []byte {
	ms := []api.Member{
		api.M("appended", []byte(strconv.Itoa(rep.Appended))), api.M("unknown", []byte(strconv.Itoa(rep.Unknown))),
		api.M("first_seq", []byte(strconv.FormatUint(rep.FirstSeq, 10))), api.M("last_seq", []byte(strconv.FormatUint(rep.LastSeq, 10))),
	}
	if warnings {
		list := []byte{'['}
		for i, w := range rep.Warnings {
			if i > 0 {
				list = append(list, ',')
			}
			list = append(list, api.S(w)...)
		}
		ms = append(ms, api.M("warnings", append(list, ']')))
	}
	return api.Doc(ms...)
}
