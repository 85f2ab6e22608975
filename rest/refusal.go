// Package rest is what tally's HTTP binding and its client share: a
// refusal as HTTP carries it (status, code, message, the error document,
// Retry-After), the one map from an error and its refusal code to an HTTP
// status, and the reading of a server's answer back into a refusal. The
// server writes refusals with it and the client reads them, so the status
// of a code is listed once; the service seam itself holds no HTTP.
package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"tally/api"
	"tally/refuse"
	"tally/service"
)

// Refusal is a refusal or failure as a binding answers it: the HTTP status,
// the code and message, and the error document. From the client it is the
// server's answer, its document as the server sent it, so the CLI prints
// it byte for byte.
type Refusal struct {
	Status   int
	Code     string
	Message  string
	Document []byte
	// RetryAfter, when positive, is how long the caller should wait
	// before it sends the request again (the Retry-After header).
	RetryAfter time.Duration
}

func (r *Refusal) Error() string { return r.Message }

// Usage reports whether the refusal is the caller's to fix in its request
// (400, 413, 415): the CLI's exit code 2.
func (r *Refusal) Usage() bool {
	switch r.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return true
	}
	return false
}

// NewRefusal is the refusal of status with code and message, its document
// made from them.
func NewRefusal(status int, code, msg string) *Refusal {
	return NewRefusalWith(status, code, msg)
}

// NewRefusalWith is NewRefusal whose document carries more members after
// its error and code (a cluster's retryable answer names the group and its
// leader).
func NewRefusalWith(status int, code, msg string, members ...api.Member) *Refusal {
	doc := api.Doc(append([]api.Member{api.M("error", api.S(msg)), api.M("code", api.S(code))}, members...)...)
	return &Refusal{Status: status, Code: code, Message: msg, Document: doc}
}

// ReadRefusal reads a server's error document b, answered with status; a
// body that is not one is described by the status line.
func ReadRefusal(status int, statusText string, b []byte) *Refusal {
	var d struct {
		Error string `json:"error"`
		Code  string `json:"code"`
	}
	if json.Unmarshal(b, &d) == nil && d.Error != "" {
		return &Refusal{Status: status, Code: d.Code, Message: d.Error, Document: b}
	}
	return NewRefusal(status, "error", "server answered "+statusText)
}

// Refuser is an error that is its own refusal: a binding's own errors
// (a body cut short, a media type refused, a server shutting down).
type Refuser interface {
	error
	Refusal() *Refusal
}

// Refuse maps any error to the refusal every binding answers with: a
// rule's refusal by its code, an idempotency refusal, an error that names
// its own code (an unauthenticated request, a damaged log), a body over
// its bound, and anything else as an internal error (500, code "error").
func Refuse(err error) *Refusal {
	var ref *Refusal
	if errors.As(err, &ref) {
		return ref
	}
	var rf Refuser
	if errors.As(err, &rf) {
		return rf.Refusal()
	}
	if r, ok := refuse.As(err); ok {
		return NewRefusal(Status(string(r.Code)), string(r.Code), err.Error())
	}
	var ie *service.IdempotencyError
	var mbe *http.MaxBytesError
	var coded service.Coded
	switch {
	case errors.As(err, &ie):
		return NewRefusal(Status(ie.Code), ie.Code, err.Error())
	case errors.As(err, &mbe):
		return NewRefusal(http.StatusRequestEntityTooLarge, "invalid", fmt.Sprintf("body: at most %d bytes", mbe.Limit))
	case errors.As(err, &coded):
		return NewRefusal(Status(coded.RefusalCode()), coded.RefusalCode(), err.Error())
	}
	return NewRefusal(http.StatusInternalServerError, "error", err.Error())
}

// Status is the HTTP status of a refusal code that Refuse maps; any other
// code (a damaged copy, a damaged log) is an internal error.
func Status(code string) int {
	switch code {
	case string(refuse.Invalid):
		return http.StatusBadRequest
	case string(refuse.NotFound), string(service.CodeNoSuchSession):
		return http.StatusNotFound
	case string(refuse.Conflict), service.CodeIdempotencyConflict:
		return http.StatusConflict
	case service.CodeRequestHistoryExpired:
		return http.StatusGone
	case string(refuse.Forbidden):
		return http.StatusForbidden
	case string(service.CodeSessionQuotaExceeded):
		return http.StatusTooManyRequests
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusInternalServerError
}

// CodeUnauthenticated is the code of a request without a valid token
// (auth.ErrUnauthenticated names it; do not rename).
const CodeUnauthenticated = "unauthenticated"
