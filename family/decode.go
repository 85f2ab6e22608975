package family

import "errors"

// DecodeError says why a log line is not a well-formed record of a family:
// the member at fault (empty when the line as a whole is) and what is wrong
// with it. Every family's Decode returns one (wrapped where the family says
// more), so a reader of any family can tell a damaged line from a refusal.
type DecodeError struct {
	Field string
	Msg   string
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

// ErrUnknownType is returned (wrapped) by a family's Decode for a
// well-formed line whose type that family does not define. The log keeps
// such a line verbatim.
var ErrUnknownType = errors.New("unknown record type")
