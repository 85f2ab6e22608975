package server

import (
	"bufio"
	"errors"
	"net/http"
	"strconv"
	"time"

	"tally/promise"
	"tally/refuse"
	"tally/store"
)

// events streams committed records as Server-Sent Events: each line after
// the client's sequence, with "id: <seq>" so a reconnect (Last-Event-ID or
// after=) resumes with no gap and no duplicate. The data is the log line as
// written (envelope included), so a client can verify the chain itself.
// A stream: it answers as the log grows, until the client leaves.
//
// It reads the log beside the Service, through the session cache, on
// purpose: the route is a replica route (its replica flag), so on a
// cluster node it streams the lines its own replica has applied, which no
// Service method offers; the seam's change feed (service.Feed) signals a
// change but carries no lines.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	l, err := s.sessionIn(r.Context(), r.PathValue("tenant"), r.PathValue("session"), false)
	if err != nil {
		s.writeError(w, err)
		return
	}
	after := uint64(0)
	v := r.URL.Query().Get("after")
	if v == "" {
		v = r.Header.Get("Last-Event-ID")
	}
	if v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			s.writeError(w, refuse.Invalidf("after", "must be a sequence number"))
			return
		}
		after = n
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.writeError(w, errors.New("streaming unsupported"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()

	bw := bufio.NewWriterSize(w, 64<<10)
	pos := store.Position{}
	ctx := r.Context()
	poll := time.NewTicker(s.cfg.StreamPoll)
	defer poll.Stop()
	for {
		changed := l.Changed()
		var err error
		// Only durable lines: a record is streamed once its writer is acknowledged.
		pos, _, err = l.Log().ScanUntil(pos, l.Durable().Offset, func(e store.Entry) error {
			if e.Env.Seq <= after {
				return nil
			}
			typ, _ := promise.PeekType(e.Line)
			bw.WriteString("id: ")
			bw.WriteString(strconv.FormatUint(e.Env.Seq, 10))
			bw.WriteString("\nevent: ")
			bw.WriteString(typ)
			bw.WriteString("\ndata: ")
			bw.Write(e.Line)
			bw.WriteString("\n\n")
			after = e.Env.Seq
			return nil
		})
		if err != nil {
			bw.WriteString("event: error\ndata: ")
			bw.WriteString(strconv.Quote(err.Error()))
			bw.WriteString("\n\n")
			bw.Flush()
			flusher.Flush()
			return
		}
		if bw.Buffered() > 0 {
			if bw.Flush() != nil {
				return
			}
			flusher.Flush()
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-poll.C:
			// Lines another process appended to the same directory.
			_ = l.Refresh()
			bw.WriteString(": keep-alive\n\n")
			if bw.Flush() != nil {
				return
			}
			flusher.Flush()
		}
	}
}
