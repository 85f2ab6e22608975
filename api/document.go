// The response documents' writer: every --json output and every HTTP
// response body is one object carrying schema_version first, with members
// in a fixed order, so the CLI and the server print the same bytes.

package api

import (
	"strconv"

	"tally/jsonline"
)

// SchemaVersion is carried by every document.
const SchemaVersion = 1

// Member is one encoded "name":value pair.
type Member string

// M encodes a member whose value is raw JSON.
func M(name string, value []byte) Member {
	return Member(string(jsonline.AppendString(nil, name)) + ":" + string(value))
}

// S encodes a string value.
func S(s string) []byte { return jsonline.AppendString(nil, s) }

// U encodes an unsigned integer value.
func U(n uint64) []byte { return strconv.AppendUint(nil, n, 10) }

// Doc returns {"schema_version":1,<members>} and a newline.
func Doc(members ...Member) []byte {
	n := 32
	for _, m := range members {
		n += len(m) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"schema_version":`...)
	b = strconv.AppendInt(b, SchemaVersion, 10)
	for _, m := range members {
		b = append(b, ',')
		b = append(b, m...)
	}
	return append(b, '}', '\n')
}

// Error is the document of a refusal or failure.
func Error(msg, code string) []byte { return Doc(M("error", S(msg)), M("code", S(code))) }
