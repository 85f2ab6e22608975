package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"tally/ledger"
	"tally/store"
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
	Torn *store.Torn
}

// Imported is an import's report and its response document.
type Imported struct {
	Doc
	Report ledger.ImportReport
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

// SessionVisitor is a Sessions that can hold a session for one call and
// release it at once (the server's cache, whose open bound a verify of
// every session must keep). Local verifies through such a session's open
// ledger; through any other Sessions it verifies a log bare, unfolded, so a
// log too damaged to open is reported rather than refused.
type SessionVisitor interface {
	Visit(ctx context.Context, tenant, session string, fn func(*ledger.Ledger)) error
}

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
