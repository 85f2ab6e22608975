package jsonline

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestSyntaxWhereNamesTheSameSpotForBothDecoders(t *testing.T) {
	b := []byte("{\"a\":1,\n  \"b\" 2}")
	var v any
	jerr := json.Unmarshal(b, &v)
	werr := Check(b)
	for _, err := range []error{jerr, werr} {
		msg, ok := SyntaxWhere(b, err)
		if !ok || msg[:len("invalid JSON at byte offset 14 (line 2, column 7)")] != "invalid JSON at byte offset 14 (line 2, column 7)" {
			t.Errorf("%T: %q", err, msg)
		}
	}
	if _, ok := SyntaxWhere(b, errors.New("other")); ok {
		t.Error("a non-syntax error described as one")
	}
}
