package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"tally/api"
	"tally/refuse"
	"tally/service"
)

// exported is an export's bytes: a tool's text, with no document (and so
// no output schema).
type exported struct{ text string }

func (e exported) toolText() string { return e.text }

// exportMax bounds what an export answers with: a tool's answer is held
// whole in a host's context, a log is not.
const exportMax = 4 << 20

// logTools are the tools of the log as a whole.
func logTools(svc service.Service) []tool {
	return []tool{
		group("tally_ledger", "The log", "The session's log.", ledgerArgs(),
			read("verify", "", "Check its hash chain.",
				plain(func(*api.SessionQuery) struct{} { return struct{}{} }),
				func(svc service.Service, ctx context.Context, c service.Call, _ struct{}) (service.Verified, error) {
					return svc.Verify(ctx, c)
				}),
			read("export", "",
				fmt.Sprintf("The log as text, at most %d MiB.", exportMax>>20),
				plain(func(d *api.ExportQuery) string { return d.Format }), export),
		),
	}
}

// export runs Export into a bounded buffer.
func export(svc service.Service, ctx context.Context, c service.Call, format string) (exported, error) {
	if format == "" {
		format = "jsonl"
	}
	w := &limitWriter{left: exportMax}
	if _, err := svc.Export(ctx, c, format, w, nil); err != nil {
		if w.over {
			return exported{}, refuse.Invalidf("format", fmt.Sprintf("the export is over %d bytes: use tally export", exportMax))
		}
		return exported{}, err
	}
	return exported{text: w.b.String()}, nil
}

// limitWriter holds at most left bytes, failing the write past them.
type limitWriter struct {
	b    bytes.Buffer
	left int
	over bool
}

var errExportOver = errors.New("export over its bound")

func (w *limitWriter) Write(p []byte) (int, error) {
	if len(p) > w.left {
		w.over = true
		return 0, errExportOver
	}
	w.left -= len(p)
	return w.b.Write(p)
}
