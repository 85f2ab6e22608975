package service

// The retryable answers, and which of them a caller may send again. A
// request a server could not serve is answered 503 with one of two kinds
// of code: it was refused before anything was proposed (not committed:
// Unavailable, Moved, unavailable), so sending it again is safe with or
// without a request id; or the write was handed on and its fate is not
// known (UnknownOutcome: it may have committed), so only the same request
// id makes a second send safe, since a write that did commit is then
// answered from its record.

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"time"

	"tally/internal/tick"
)

// Codes of the retryable answers (HTTP 503; do not rename).
const (
	// CodeUnavailable: a cluster node cannot take the request now (no
	// leader, not a member, too busy, the group's leader elsewhere): it
	// was not proposed, nothing of it committed.
	CodeUnavailable = "Unavailable"
	// CodeMoved: the session's group has fenced it for a move; the
	// command was refused, nothing of it committed.
	CodeMoved = "Moved"
	// CodeMoving: the session is being moved to another group and its
	// group refuses its writes for the moment of the cut-over; nothing of
	// the write was proposed. Its reads are served.
	CodeMoving = "Moving"
	// CodeShuttingDown: a server refused the request while it stops,
	// before running it (lower case, as `tally serve` has always sent it).
	CodeShuttingDown = "unavailable"
	// CodeUnknownOutcome: the write was proposed and its fate is not known
	// (the group's leader changed while it waited, a timeout, the node
	// stopping): it may have committed. Retry it with the same request id.
	CodeUnknownOutcome = "UnknownOutcome"
	// CodeCustodyPending: an evaluation of an artifact may not begin
	// until every copy its group requires holds a custody receipt at the
	// current placement epoch; the answer names the nodes still missing.
	// Nothing was proposed.
	CodeCustodyPending = "CustodyPending"
)

// RetryAdvice is what an answer of unknown outcome tells its caller to
// do: retry under the request id it names, or, without one, find out
// whether the write committed before sending it again.
func RetryAdvice(requestID string) string {
	if requestID == "" {
		return "the write may have committed; it carried no request id, so look whether it did before sending it again"
	}
	return fmt.Sprintf("the write may have committed: retry it with the same request id %q, which answers it from its record if it did", requestID)
}

// Retry bounds how one request is sent again after a retryable answer: a
// 503 refused before anything was proposed (Refusal.NotCommitted), a
// write of unknown outcome under its request id (the client's, a lost
// connection's too). Zero members take the defaults below.
type Retry struct {
	// Attempts is the most sends of one request, the first included.
	Attempts int
	// Within bounds the time from the first send to the start of the last.
	Within time.Duration
	// Pause is the first pause between sends, doubled after each up to
	// RetryPauseMax, and never shorter than the answer's Retry-After.
	Pause time.Duration
}

// The defaults of Retry: a group elects a new leader in about a second,
// so eight sends over up to 20 s ride out a failover and a frozen leader
// without holding a caller much past its own timeout.
const (
	RetryAttemptsMax = 8
	RetryWithin      = 20 * time.Second
	RetryPause       = 100 * time.Millisecond
	RetryPauseMax    = 2 * time.Second
)

// WithDefaults is r with the defaults in place of its zero members.
func (r Retry) WithDefaults() Retry {
	if r.Attempts <= 0 {
		r.Attempts = RetryAttemptsMax
	}
	if r.Within <= 0 {
		r.Within = RetryWithin
	}
	if r.Pause <= 0 {
		r.Pause = RetryPause
	}
	return r
}

// Wait is how long to wait before send number attempt+1: the backoff,
// jittered down to half so writers that failed together do not come back
// together, and at least the answer's Retry-After.
func (r Retry) Wait(attempt int, retryAfter time.Duration) time.Duration {
	d := r.Pause
	for i := 1; i < attempt && d < RetryPauseMax; i++ {
		d *= 2
	}
	d = min(d, RetryPauseMax)
	d = d/2 + rand.N(d/2+1)
	return max(d, retryAfter)
}

// Sleep waits d, or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) error { return tick.Sleep(ctx, d) }

// NewRequestID is a request id of a caller's own for a write its user gave
// none: 128 random bits, in the form --request-id and Idempotency-Key
// take.
func NewRequestID() string {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		panic("service: no randomness: " + err.Error())
	}
	return "req-" + hex.EncodeToString(b[:])
}
