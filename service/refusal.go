package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"tally/api"
	"tally/auth"
	"tally/ledger"
	"tally/store"
	"tally/vocab"
)

// Error codes of a session's opening (HTTP problem bodies; do not rename).
const (
	// CodeNoSuchSession: a read named a session that has no log. Reads
	// never create sessions; the first accepted write does.
	CodeNoSuchSession vocab.Code = "NoSuchSession"
	// CodeSessionQuotaExceeded: a write would create a session beyond the
	// tenant's quota.
	CodeSessionQuotaExceeded vocab.Code = "SessionQuotaExceeded"
)

// Error codes of an artifact's bytes (HTTP problem bodies; do not rename).
const (
	// CodeArtifactTooLarge (413): the bytes are over the server's limit
	// (serve --max-artifact-bytes), declared or as they came; nothing of
	// them is kept.
	CodeArtifactTooLarge = "ArtifactTooLarge"
	// CodeInsufficientStorage (507): the node's disk filled while it
	// staged the bytes; nothing of them is kept and the node serves on.
	CodeInsufficientStorage = "InsufficientStorage"
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
// rule's refusal by its code, an idempotency refusal, an unauthenticated
// request, a body over its bound, a damaged log, and anything else as an
// internal error (500, code "error").
func Refuse(err error) *Refusal {
	var ref *Refusal
	if errors.As(err, &ref) {
		return ref
	}
	var rf Refuser
	if errors.As(err, &rf) {
		return rf.Refusal()
	}
	if r, ok := vocab.As(err); ok {
		return NewRefusal(ruleStatus(r.Code), string(r.Code), err.Error())
	}
	var ie *ledger.IdempotencyError
	var mbe *http.MaxBytesError
	var ce *store.CorruptError
	switch {
	case errors.As(err, &ie):
		status := http.StatusConflict
		if ie.Code == ledger.CodeRequestHistoryExpired {
			status = http.StatusGone
		}
		return NewRefusal(status, ie.Code, err.Error())
	case errors.Is(err, auth.ErrUnauthenticated):
		return NewRefusal(http.StatusUnauthorized, "unauthenticated", err.Error())
	case errors.As(err, &mbe):
		return NewRefusal(http.StatusRequestEntityTooLarge, "invalid", fmt.Sprintf("body: at most %d bytes", mbe.Limit))
	case errors.As(err, &ce):
		return NewRefusal(http.StatusInternalServerError, "corrupt", err.Error())
	}
	return NewRefusal(http.StatusInternalServerError, "error", err.Error())
}

// ruleStatus is the HTTP status of a rule's refusal code.
func ruleStatus(c vocab.Code) int {
	switch c {
	case vocab.Invalid:
		return http.StatusBadRequest
	case vocab.NotFound, CodeNoSuchSession:
		return http.StatusNotFound
	case vocab.Conflict:
		return http.StatusConflict
	case vocab.Forbidden:
		return http.StatusForbidden
	case CodeSessionQuotaExceeded:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}
