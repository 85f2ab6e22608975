package vocab

import "tally/refuse"

// The refusal is refuse's; these keep code written against the old names
// compiling until it moves.

// Deprecated: use refuse.Code.
type Code = refuse.Code

// Deprecated: use refuse.Refusal.
type Refusal = refuse.Refusal

// Deprecated: use refuse.Invalid, refuse.NotFound, refuse.Conflict, refuse.Forbidden.
const (
	Invalid   = refuse.Invalid
	NotFound  = refuse.NotFound
	Conflict  = refuse.Conflict
	Forbidden = refuse.Forbidden
)

// Deprecated: use refuse.New.
func New(code Code, field, rule string) *Refusal { return refuse.New(code, field, rule) }

// Deprecated: use refuse.Invalidf.
func Invalidf(field, rule string) *Refusal { return refuse.Invalidf(field, rule) }

// Deprecated: use refuse.NotFoundf.
func NotFoundf(field, rule string) *Refusal { return refuse.NotFoundf(field, rule) }

// Deprecated: use refuse.Conflictf.
func Conflictf(field, rule string) *Refusal { return refuse.Conflictf(field, rule) }

// Deprecated: use refuse.Forbiddenf.
func Forbiddenf(field, rule string) *Refusal { return refuse.Forbiddenf(field, rule) }

// Deprecated: use refuse.As.
func As(err error) (*Refusal, bool) { return refuse.As(err) }
