// Package refuse holds the refusal: what every family's pure core (and the
// layers above it) returns when a command breaks one of its rules. A refusal
// names the field and the rule, so every mode (CLI, server, cluster) reports
// the same words and the same code. It does no I/O and imports only errors.
package refuse

import "errors"

// Code is a refusal's stable machine-readable class. Stored in --json error
// output and in HTTP problem bodies: do not rename.
type Code string

const (
	// Invalid: the command is malformed on its own (a usage error: exit 2).
	Invalid Code = "invalid"
	// NotFound: the command names a record the ledger does not hold.
	NotFound Code = "not_found"
	// Conflict: the command contradicts the ledger's state (duplicate id,
	// already resolved, terms immutable).
	Conflict Code = "conflict"
	// Forbidden: the acting identity may not do this.
	Forbidden Code = "forbidden"
)

// Refusal is returned by a pure core's Decide functions. Nothing is appended
// for a refused command.
type Refusal struct {
	Code  Code
	Field string // the field at fault, as named on the wire ("until", "evidence")
	Rule  string // the rule broken, in words ("must be RFC 3339 or a duration")
}

func (r *Refusal) Error() string { return r.Field + ": " + r.Rule }

// Usage reports whether the refusal is a usage error (exit 2) rather than a
// refusal by the ledger's state (exit 1).
func (r *Refusal) Usage() bool { return r.Code == Invalid }

// New returns a refusal of the given code.
func New(code Code, field, rule string) *Refusal {
	return &Refusal{Code: code, Field: field, Rule: rule}
}

// Invalidf and friends are short forms for the common codes.
func Invalidf(field, rule string) *Refusal   { return New(Invalid, field, rule) }
func NotFoundf(field, rule string) *Refusal  { return New(NotFound, field, rule) }
func Conflictf(field, rule string) *Refusal  { return New(Conflict, field, rule) }
func Forbiddenf(field, rule string) *Refusal { return New(Forbidden, field, rule) }

// As extracts a refusal from an error chain.
func As(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}
