package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// warnHandler prints library warnings as one plain line on stderr:
// "warning: <message> (key=value, …)". A CLI user reads these; a log
// collector is the server's business.
type warnHandler struct {
	w     io.Writer
	attrs []slog.Attr
}

func (h *warnHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *warnHandler) Handle(_ context.Context, r slog.Record) error {
	var kv []string
	for _, a := range h.attrs {
		kv = append(kv, a.Key+"="+a.Value.String())
	}
	r.Attrs(func(a slog.Attr) bool {
		kv = append(kv, a.Key+"="+a.Value.String())
		return true
	})
	line := "warning: " + r.Message
	if len(kv) > 0 {
		line += " (" + strings.Join(kv, ", ") + ")"
	}
	_, err := fmt.Fprintln(h.w, line)
	return err
}

func (h *warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &warnHandler{w: h.w, attrs: append(append([]slog.Attr{}, h.attrs...), as...)}
}

func (h *warnHandler) WithGroup(string) slog.Handler { return h }
