package verb

import (
	"bytes"
	"context"
	"io"

	"tally/api"
	"tally/service"
)

// The log's verbs: the session's log as a whole.
const (
	SessionExport = "session.export"
	SessionVerify = "session.verify"
	Verify        = "verify"
	SessionImport = "session.import"
)

// ImportDoc is an import's request: the lines, as given (the body of the
// REST route). Stored in the raft log as its command document: do not
// rename the member.
type ImportDoc struct {
	Lines []byte `json:"lines"`
}

func logVerbs() []Verb {
	const fam = "log"
	return []Verb{
		read(Verb{Name: SessionVerify, Family: fam, Summary: "Check every line of the log and its hash chain: the report `tally verify --json` prints (whole, lines, error, torn, unknown)", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: SessionPath + "/verify"}, MCP: MCP{Tool: "tally_ledger", Action: "verify"}, CLI: "verify"},
			query(func(api.SessionQuery) struct{} { return struct{}{} }),
			func(svc service.Service, ctx context.Context, c service.Call, _ struct{}) (service.Verified, error) {
				return svc.Verify(ctx, c)
			}),
		read(Verb{Name: SessionExport, Family: fam, Summary: "The log as the CLI's export prints it: format=jsonl (lines with envelopes), pinki (promise records without envelopes) or json (states at now); acknowledged lines only", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: SessionPath + "/export", Stream: true}, MCP: MCP{Tool: "tally_ledger", Action: "export"}, CLI: "export"},
			query(func(q api.ExportQuery) string { return q.Format }), exportDoc),
		read(Verb{Name: Verify, Family: fam, Summary: "Check every session of the token's tenant (every tenant's in --insecure-dev) as session.verify does: the report `tally verify --json` prints without --session (whole, and each session's name, log and report)", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: "/v1/verify"}, CLI: "verify"},
			query(func(api.SessionQuery) struct{} { return struct{}{} }),
			func(svc service.Service, ctx context.Context, c service.Call, _ struct{}) (service.Verified, error) {
				return svc.VerifyAll(ctx, c)
			}),
		write(Verb{Name: SessionImport, Family: fam, Summary: "Append a pinki ledger or tally log lines (body: one JSON record a line, application/x-ndjson or text/plain), keeping each record's ts, ids and parties; admin role only; all or nothing; not idempotent by key", Effect: Write,
			HTTP: HTTP{Method: "POST", Path: SessionPath + "/import"}, CLI: "import", Command: service.MethodImport},
			func(svc service.Service, ctx context.Context, c service.Call, d ImportDoc) (service.Imported, error) {
				return svc.Import(ctx, c, d.Lines)
			}),
	}
}

// exported is an export's bytes as a result: its Doc holds them.
type exported struct{ service.Doc }

// exportDoc runs an export into memory: the bytes a binding that answers
// with a document (MCP, the table test) compares.
func exportDoc(svc service.Service, ctx context.Context, c service.Call, format string) (exported, error) {
	var b bytes.Buffer
	_, err := svc.Export(ctx, c, format, io.Writer(&b), nil)
	return exported{service.Doc{JSON: b.Bytes()}}, err
}
