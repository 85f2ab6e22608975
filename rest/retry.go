package rest

import (
	"net/http"
	"strconv"
	"time"

	"tally/api"
	"tally/service"
)

// RetryAfter is the Retry-After of every retryable answer: about an
// election's length, after which a group has a leader again.
const RetryAfter = time.Second

// NewRetryable is a 503 answer with code, message and members that
// carries RetryAfter.
func NewRetryable(code, msg string, members ...api.Member) *Refusal {
	r := NewRefusalWith(http.StatusServiceUnavailable, code, msg, members...)
	r.RetryAfter = RetryAfter
	return r
}

// NotCommitted reports whether r refuses a request before anything of it
// was proposed: sending it again is safe, whatever it is.
func (r *Refusal) NotCommitted() bool {
	if r.Status != http.StatusServiceUnavailable {
		return false
	}
	switch r.Code {
	case service.CodeUnavailable, service.CodeMoved, service.CodeMoving, service.CodeShuttingDown, service.CodeCustodyPending:
		return true
	}
	return false
}

// OutcomeUnknown reports whether r answers a write that may have
// committed: sending it again is safe only under the same request id.
func (r *Refusal) OutcomeUnknown() bool {
	return r.Status == http.StatusServiceUnavailable && r.Code == service.CodeUnknownOutcome
}

// WriteRefusal answers r over HTTP: its Retry-After, when it has one, its
// status and its document.
func WriteRefusal(w http.ResponseWriter, r *Refusal) {
	if r.RetryAfter > 0 {
		w.Header().Set("Retry-After", RetryAfterHeader(r.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.Status)
	w.Write(r.Document)
}

// RetryAfterHeader is d as a Retry-After header's whole seconds, at least 1.
func RetryAfterHeader(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(s, 1), 10)
}

// ParseRetryAfter reads a Retry-After header of whole seconds; anything
// else (none, an HTTP date) is 0.
func ParseRetryAfter(v string) time.Duration {
	s, err := strconv.ParseInt(v, 10, 32)
	if err != nil || s < 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}
