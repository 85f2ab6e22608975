package service

import (
	"fmt"

	"tally/refuse"
)

// Error codes of a session's opening (HTTP problem bodies; do not rename).
const (
	// CodeNoSuchSession: a read named a session that has no log. Reads
	// never create sessions; the first accepted write does.
	CodeNoSuchSession refuse.Code = "NoSuchSession"
	// CodeSessionQuotaExceeded: a write would create a session beyond the
	// tenant's quota.
	CodeSessionQuotaExceeded refuse.Code = "SessionQuotaExceeded"
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

// CodeDamaged is the error code of a stored copy whose bytes no longer
// match its digest.
const CodeDamaged refuse.Code = "damaged"

// Idempotency codes, as clients see them. Do not rename.
const (
	CodeIdempotencyConflict   = "IdempotencyConflict"
	CodeRequestHistoryExpired = "RequestHistoryExpired"
)

// IdempotencyError refuses a retried request: its request id was used for
// a different command, or it is older than the retained history (and so is
// never executed a second time). The ledger returns it, and a binding that
// finds the conflict itself (the CLI's check run) returns the same.
type IdempotencyError struct {
	Code string
	Key  string
}

func (e *IdempotencyError) Error() string {
	if e.Code == CodeIdempotencyConflict {
		return fmt.Sprintf("request id %q was already used for a different command", e.Key)
	}
	return fmt.Sprintf("request id %q is older than the retained request history; it is not executed again", e.Key)
}

// Coded is an error of a package beneath the seam that names its refusal
// code itself (store's damaged log: "corrupt"; auth's missing token:
// "unauthenticated"), so that a binding maps it without importing that
// package.
type Coded interface {
	error
	RefusalCode() string
}
