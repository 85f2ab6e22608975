package server

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"tally/rest"
)

// Error codes of malformed request bodies (HTTP problem bodies; do not
// rename).
const (
	// CodeBodyIncomplete: the body ended before its Content-Length, or
	// stopped coming for longer than the body timeout. The client's fault.
	CodeBodyIncomplete = "BodyIncomplete"
	// CodeUnsupportedMediaType: the body's Content-Type is not the route's.
	CodeUnsupportedMediaType = "UnsupportedMediaType"
)

// The media types of request bodies.
const (
	mediaJSON  = "application/json"
	mediaBytes = "application/octet-stream"
)

// mediaType is the media type the route's body must have, or "" when the
// handler checks it itself (an import takes several, JSON-RPC answers in
// its own envelope).
func (rt route) mediaType() string {
	switch {
	case rt.media != "":
		return rt.media
	case rt.body == "Bytes":
		return mediaBytes
	case rt.body != "":
		return mediaJSON
	}
	return ""
}

// mediaTypeError refuses a body of another media type than its route's.
type mediaTypeError struct {
	got      string
	accepted []string
}

func (e *mediaTypeError) Error() string {
	got := "none"
	if e.got != "" {
		got = strconv.Quote(e.got)
	}
	return fmt.Sprintf("Content-Type: must be %s (got %s)", strings.Join(e.accepted, " or "), got)
}

// requireContentType checks that a request with a body declares one of
// the accepted media types; parameters (charset=utf-8) are allowed. A
// request without a body (Content-Length: 0) needs none. The refusal is
// answered 415 UnsupportedMediaType.
func requireContentType(r *http.Request, accepted ...string) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" && r.ContentLength == 0 {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !slices.Contains(accepted, mt) {
		return &mediaTypeError{got: ct, accepted: accepted}
	}
	return nil
}

// bodyIncomplete is a body that did not arrive whole: shorter than its
// Content-Length (the client closed), or stalled past the body timeout.
type bodyIncomplete struct {
	timeout time.Duration // set when the body stalled
	err     error
}

// Error is the read's failure as io reports it ("unexpected EOF"), or the
// timeout; describe is the sentence of a problem body.
func (e *bodyIncomplete) Error() string {
	if e.timeout > 0 {
		return fmt.Sprintf("body: did not arrive whole within %v (the body timeout)", e.timeout)
	}
	return e.err.Error()
}

func (e *bodyIncomplete) describe() error {
	if e.timeout > 0 {
		return e
	}
	return fmt.Errorf("body: ended before its Content-Length (%w)", e.err)
}

func (e *bodyIncomplete) Unwrap() error { return e.err }

func (e *bodyIncomplete) Refusal() *rest.Refusal {
	return rest.NewRefusal(http.StatusBadRequest, CodeBodyIncomplete, e.describe().Error())
}

func (e *mediaTypeError) Refusal() *rest.Refusal {
	return rest.NewRefusal(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, e.Error())
}

// checkedBody is the body of a route that takes one, bounded by limit: its
// first read checks the media type and the length the request declares
// (so a request is authenticated before its body is judged, and refused
// before a byte of it is used); its reads are bounded in time
// (Config.BodyTimeout), and a read that fails is the client's fault
// (bodyIncomplete). Once the body has ended the deadline is lifted, so a
// handler that takes longer than the timeout keeps its connection.
func (s *Server) checkedBody(w http.ResponseWriter, r *http.Request, media string, limit int64, body io.ReadCloser) io.ReadCloser {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout)) != nil {
		rc = nil // a writer without deadlines (tests' recorders)
	}
	b := &checkedBodyReader{body: body, rc: rc, timeout: s.cfg.BodyTimeout}
	if media != "" {
		b.refused = requireContentType(r, media)
	}
	if b.refused == nil && r.ContentLength > limit {
		b.refused = &http.MaxBytesError{Limit: limit}
	}
	if media == mediaBytes {
		b.artifact = true
		if b.refused != nil && r.ContentLength > limit {
			b.refused = &artifactTooLarge{limit: limit, declared: r.ContentLength}
		}
	}
	return b
}

type checkedBodyReader struct {
	body    io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration
	// refused is returned by every read: the body is of another type, or
	// declares more bytes than its bound.
	refused error
	done    bool
	// artifact: the body is an artifact's bytes, whose bound is
	// refused as ArtifactTooLarge.
	artifact bool
}

func (b *checkedBodyReader) Read(p []byte) (int, error) {
	if b.refused != nil {
		return 0, b.refused
	}
	n, err := b.body.Read(p)
	switch {
	case err == nil:
	case err == io.EOF:
		b.lift()
	default:
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) && b.artifact {
			return n, &artifactTooLarge{limit: mbe.Limit, declared: -1}
		}
		if errors.As(err, &mbe) {
			return n, err
		}
		// The deadline stays: what is left of the body is not waited for.
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return n, &bodyIncomplete{timeout: b.timeout, err: err}
		}
		return n, &bodyIncomplete{err: err}
	}
	return n, err
}

func (b *checkedBodyReader) lift() {
	if b.rc != nil && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
}

func (b *checkedBodyReader) Close() error { return b.body.Close() }
