package rest

import (
	"net/http/httptest"
	"testing"
	"time"

	"tally/service"
)

// The retryable answers: which may have committed, and Retry-After as a
// header of whole seconds and back.
func TestRetryableRefusals(t *testing.T) {
	for _, c := range []struct {
		ref                   *Refusal
		notCommitted, unknown bool
	}{
		{NewRetryable(service.CodeUnavailable, "m"), true, false},
		{NewRetryable(service.CodeMoved, "m"), true, false},
		{NewRetryable(service.CodeShuttingDown, "m"), true, false},
		{NewRetryable(service.CodeUnknownOutcome, "m"), false, true},
		{NewRefusal(500, service.CodeUnavailable, "m"), false, false},
		{NewRefusal(409, "conflict", "m"), false, false},
	} {
		if c.ref.NotCommitted() != c.notCommitted || c.ref.OutcomeUnknown() != c.unknown {
			t.Errorf("%d %s: not committed %v, unknown %v", c.ref.Status, c.ref.Code, c.ref.NotCommitted(), c.ref.OutcomeUnknown())
		}
	}
	rec := httptest.NewRecorder()
	WriteRefusal(rec, NewRetryable(service.CodeUnknownOutcome, "m"))
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" || rec.Body.String() != `{"schema_version":1,"error":"m","code":"UnknownOutcome"}`+"\n" {
		t.Errorf("%d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	for in, want := range map[time.Duration]string{time.Second: "1", 1500 * time.Millisecond: "2", time.Millisecond: "1", 0: "1"} {
		if got := RetryAfterHeader(in); got != want {
			t.Errorf("RetryAfterHeader(%v) = %s, want %s", in, got, want)
		}
	}
	for in, want := range map[string]time.Duration{"3": 3 * time.Second, "": 0, "-1": 0, "Wed, 21 Oct 2026 07:28:00 GMT": 0} {
		if got := ParseRetryAfter(in); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
	if service.RetryAdvice("") == service.RetryAdvice("k") || service.RetryAdvice("k") != `the write may have committed: retry it with the same request id "k", which answers it from its record if it did` {
		t.Errorf("advice: %q", service.RetryAdvice("k"))
	}
}
