package jsonline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"tally/refuse"
)

// SyntaxWhere describes a JSON syntax error in b, from tally's scanner
// (this package) or encoding/json, with the byte offset, line and column where the
// input went wrong (the offending byte, or the end when it ended early),
// so a client can find it: "invalid JSON at byte offset 16 (line 1,
// column 17): unexpected end of JSON input". ok is false when err is no
// syntax error.
func SyntaxWhere(b []byte, err error) (msg string, ok bool) {
	var we *SyntaxError
	var je *json.SyntaxError
	var pos int
	switch {
	case errors.As(err, &we):
		pos, msg = we.Offset, we.Msg
	case errors.As(err, &je):
		pos, msg = int(je.Offset)-1, je.Error() // Offset counts the bytes read, the bad one included
	default:
		return "", false
	}
	pos = min(max(pos, 0), len(b))
	line := bytes.Count(b[:pos], []byte("\n")) + 1
	col := pos - bytes.LastIndexByte(b[:pos], '\n')
	return fmt.Sprintf("invalid JSON at byte offset %d (line %d, column %d): %s", pos, line, col, msg), true
}

// CheckSyntax refuses b, as the field where, unless it is one JSON value
// within tally's nesting limit, saying where it goes wrong.
func CheckSyntax(where string, b []byte) error {
	if err := Check(b); err != nil {
		msg, _ := SyntaxWhere(b, err)
		return refuse.Invalidf(where, msg)
	}
	return nil
}
