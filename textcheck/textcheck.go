// Package textcheck holds the characters every family refuses in what it
// is asked to record, in one place so that the CLI, REST and A2A refuse the
// same. They apply to commands being decided, never to records already in
// a log: a log written before a rule was added still folds.
package textcheck

import (
	"fmt"

	"tally/refuse"
)

// IdentifierFault says what an identifier or a reference (a promise, claim,
// artifact or expectation id, a check name, an evidence reference) holds
// that it may not, as a rule's words, or "" when it holds nothing so: NUL
// and every other C0 or C1 control character, DEL, and the bidirectional
// overrides and isolates U+202A–U+202E and U+2066–U+2069, which make a
// name display in another order than it is stored, so one id can pose as
// another.
func IdentifierFault(s string) string {
	for _, r := range s {
		switch {
		case r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f:
			return fmt.Sprintf("must not hold %U (a control character)", r)
		case r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069:
			return fmt.Sprintf("must not hold %U (a bidirectional override, which shows text in another order than it is stored)", r)
		}
	}
	return ""
}

// TextFault says what free text (a promise's text, a reason, a note) holds
// that it may not, or "": NUL, and ESC, which starts a terminal escape
// sequence, so that a terminal showing a record cannot be driven by it.
func TextFault(s string) string {
	for _, r := range s {
		switch r {
		case 0:
			return "must not hold U+0000 (NUL)"
		case 0x1b:
			return "must not hold U+001B (ESC, which starts a terminal escape sequence)"
		}
	}
	return ""
}

// Identifier refuses s as field (Invalid) when IdentifierFault finds
// something in it.
func Identifier(field, s string) error {
	if f := IdentifierFault(s); f != "" {
		return refuse.Invalidf(field, f)
	}
	return nil
}

// Text refuses s as field (Invalid) when TextFault finds something
// in it.
func Text(field, s string) error {
	if f := TextFault(s); f != "" {
		return refuse.Invalidf(field, f)
	}
	return nil
}
