// Package jsonline reads and writes the JSON lines of tally's log without
// reflection. Every family decodes its records through it, so the fold reads
// a line in one validating pass and extracts only the fields it knows.
//
// The scanner accepts exactly RFC 8259 JSON (one object per line) with valid
// UTF-8 strings; it never repairs input.
package jsonline

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxDepth bounds nesting inside a value, so a hostile line cannot exhaust
// the stack.
const MaxDepth = 64

// SyntaxError locates a malformed byte in a line.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.Offset, e.Msg)
}

func errAt(off int, msg string) error { return &SyntaxError{Offset: off, Msg: msg} }

// Object calls fn for each top-level member of the JSON object in line, with
// the raw key (still escaped, without quotes) and the raw, validated value
// span. If fn returns an error, Object stops and returns it as is. Leading and trailing whitespace is
// allowed; anything else after the object is an error.
func Object(line []byte, fn func(key, value []byte) error) error {
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return errAt(i, "expected an object")
	}
	i = skipSpace(line, i+1)
	if i < len(line) && line[i] == '}' {
		i = skipSpace(line, i+1)
		if i != len(line) {
			return errAt(i, "data after the object")
		}
		return nil
	}
	for {
		if i >= len(line) || line[i] != '"' {
			return errAt(i, "expected a member name")
		}
		end, err := scanString(line, i)
		if err != nil {
			return err
		}
		key := line[i+1 : end-1]
		i = skipSpace(line, end)
		if i >= len(line) || line[i] != ':' {
			return errAt(i, "expected ':'")
		}
		i = skipSpace(line, i+1)
		vend, err := scanValue(line, i, 0)
		if err != nil {
			return err
		}
		if err := fn(key, line[i:vend]); err != nil {
			return err
		}
		i = skipSpace(line, vend)
		if i >= len(line) {
			return errAt(i, "unterminated object")
		}
		if line[i] == ',' {
			i = skipSpace(line, i+1)
			continue
		}
		if line[i] != '}' {
			return errAt(i, "expected ',' or '}'")
		}
		i = skipSpace(line, i+1)
		if i != len(line) {
			return errAt(i, "data after the object")
		}
		return nil
	}
}

// Valid reports whether b is exactly one JSON value (surrounding whitespace allowed).
func Valid(b []byte) bool { return Check(b) == nil }

// Check is Valid with the reason: nil, or a *SyntaxError locating the
// first byte at fault.
func Check(b []byte) error {
	i := skipSpace(b, 0)
	end, err := scanValue(b, i, 0)
	if err != nil {
		return err
	}
	if end = skipSpace(b, end); end != len(b) {
		return errAt(end, "data after the value")
	}
	return nil
}

// errTooDeep names the nesting limit.
var errTooDeep = fmt.Sprintf("nesting deeper than %d levels (the limit)", MaxDepth)

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanContainer returns the end offset of the object (members: a name,
// ':' and a value) or the array (values) whose opening bracket is at i.
func scanContainer(b []byte, i, depth int, object bool) (int, error) {
	closing, unterminated, expected := byte(']'), "unterminated array", "expected ',' or ']'"
	if object {
		closing, unterminated, expected = '}', "unterminated object", "expected ',' or '}'"
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == closing {
		return i + 1, nil
	}
	for {
		var err error
		if object {
			if i >= len(b) || b[i] != '"' {
				return i, errAt(i, "expected a member name")
			}
			end, err := scanString(b, i)
			if err != nil {
				return end, err
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return i, errAt(i, "expected ':'")
			}
			i = skipSpace(b, i+1)
		}
		if i, err = scanValue(b, i, depth+1); err != nil {
			return i, err
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, errAt(i, unterminated)
		}
		if b[i] == closing {
			return i + 1, nil
		}
		if b[i] != ',' {
			return i, errAt(i, expected)
		}
		i = skipSpace(b, i+1)
	}
}

// scanValue returns the end offset of the value starting at i.
func scanValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, errAt(i, "expected a value")
	}
	switch c := b[i]; {
	case c == '"':
		return scanString(b, i)
	case c == '{' || c == '[':
		if depth >= MaxDepth {
			return i, errAt(i, errTooDeep)
		}
		return scanContainer(b, i, depth, c == '{')
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(b, i)
	default:
		return i, errAt(i, "unexpected character")
	}
}

func literal(b []byte, i int, word string) (int, error) {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return i, errAt(i, "invalid literal")
	}
	return i + len(word), nil
}

func scanNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return i, errAt(i, "invalid number")
	}
	if b[i] == '0' {
		i++
	} else if b[i] >= '1' && b[i] <= '9' {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	} else {
		return i, errAt(start, "invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return i, errAt(i, "invalid number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return i, errAt(i, "invalid number")
		}
	}
	return i, nil
}

// scanString validates the string starting at the quote at i and returns the
// offset just past its closing quote.
func scanString(b []byte, i int) (int, error) {
	i++
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return i, errAt(i, "unterminated escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(b)-i < 6 || !isHex4(b[i+2:i+6]) {
					return i, errAt(i, "invalid \\u escape")
				}
				i += 6
			default:
				return i, errAt(i, "invalid escape")
			}
		case c < 0x20:
			return i, errAt(i, "control character in string")
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, errAt(i, "invalid UTF-8 in string")
			}
			i += size
		}
	}
	return i, errAt(i, "unterminated string")
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// ErrNotString is returned when a value expected to be a string is not one.
var ErrNotString = errors.New("not a string")

// String decodes a validated JSON string value span (with quotes).
func String(v []byte) (string, error) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", ErrNotString
	}
	body := v[1 : len(v)-1]
	for _, c := range body {
		if c == '\\' {
			return unescape(body)
		}
	}
	return string(body), nil
}

func unescape(body []byte) (string, error) {
	out := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		c := body[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch body[i+1] {
		case '"', '\\', '/':
			out = append(out, body[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hexRune(body[i+2 : i+6])
			i += 6
			if r >= 0xD800 && r < 0xDC00 {
				// A high surrogate must pair with a following low one;
				// otherwise it decodes to U+FFFD, as encoding/json does.
				if i+6 <= len(body) && body[i] == '\\' && body[i+1] == 'u' {
					if lo := hexRune(body[i+2 : i+6]); lo >= 0xDC00 && lo < 0xE000 {
						r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
						i += 6
						out = utf8.AppendRune(out, r)
						continue
					}
				}
				r = utf8.RuneError
			} else if r >= 0xDC00 && r < 0xE000 {
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", errAt(i, "invalid escape")
		}
		i += 2
	}
	return string(out), nil
}

func hexRune(h []byte) rune {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// Strings decodes a validated JSON array of strings.
func Strings(v []byte) ([]string, error) {
	if len(v) < 2 || v[0] != '[' {
		return nil, errors.New("not an array")
	}
	var out []string
	i := skipSpace(v, 1)
	if v[i] == ']' {
		return []string{}, nil
	}
	for {
		if v[i] != '"' {
			return nil, errors.New("array element is not a string")
		}
		end, err := scanString(v, i)
		if err != nil {
			return nil, err
		}
		s, err := String(v[i:end])
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		i = skipSpace(v, end)
		if v[i] == ']' {
			return out, nil
		}
		i = skipSpace(v, i+1) // the validated span guarantees a ','
	}
}

// Uint decodes a validated JSON number that must be a non-negative integer.
func Uint(v []byte) (uint64, error) {
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a non-negative integer: %s", v)
	}
	return n, nil
}

// IsObject reports whether a validated value span is an object.
func IsObject(v []byte) bool { return len(v) > 0 && v[0] == '{' }

// IsNull reports whether a validated value span is null.
func IsNull(v []byte) bool { return string(v) == "null" }

// KeyIs compares a raw (escaped) key with a plain name. Keys written with
// escapes never match: tally's own fields are plain ASCII.
func KeyIs(key []byte, name string) bool { return string(key) == name }

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. It escapes only what JSON
// requires (quote, backslash, control characters), like serde_json and
// unlike encoding/json, so lines written by pinki and by tally agree byte
// for byte. Invalid UTF-8 is written as U+FFFD.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\ufffd"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendEscaped appends the valid JSON value v with every string in it,
// member names included, written again by AppendString, and everything else
// as it is. A value encoding/json wrote then reads as tally's lines are
// written: encoding/json escapes U+2028, U+2029 and invalid UTF-8
// (\u2028, \ufffd), which AppendString, like serde_json, writes as they are.
func AppendEscaped(dst, v []byte) ([]byte, error) {
	start := 0
	for i := 0; i < len(v); {
		if v[i] != '"' {
			i++
			continue
		}
		end, err := scanString(v, i)
		if err != nil {
			return dst, err
		}
		s, err := String(v[i:end])
		if err != nil {
			return dst, err
		}
		dst = append(dst, v[start:i]...)
		dst = AppendString(dst, s)
		i, start = end, end
	}
	return append(dst, v[start:]...), nil
}

// Field is a member of a record that its family does not know, kept with
// its value's compacted bytes so that re-encoding the record drops nothing.
// Every family keeps its unknown members in this one type.
type Field struct {
	Key   string
	Value json.RawMessage
}

// AppendFields appends each field as a further member of an object being
// written: a comma, the key, a colon and the value's bytes.
func AppendFields(dst []byte, fields []Field) []byte {
	for _, f := range fields {
		dst = append(dst, ',')
		dst = AppendString(dst, f.Key)
		dst = append(dst, ':')
		dst = append(dst, f.Value...)
	}
	return dst
}

// AppendStrings appends a JSON array of strings.
func AppendStrings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, s)
	}
	return append(dst, ']')
}
