package cli

import (
	"bufio"
	"io"
	"text/tabwriter"
	"unicode/utf8"
)

// table is the CLI's aligned table: a tabwriter whose output goes through
// a buffer, since a tabwriter writes each line with its own call, and a
// table of 10,000 promises was 10,000 writes to stdout. Flush writes both.
type table struct {
	*tabwriter.Writer
	buf *bufio.Writer
}

func newTable(w io.Writer) *table {
	buf := bufio.NewWriterSize(w, 64<<10)
	return &table{Writer: tabwriter.NewWriter(buf, 0, 0, 2, ' ', 0), buf: buf}
}

// Flush aligns and writes what the table holds.
func (t *table) Flush() error {
	if err := t.Writer.Flush(); err != nil {
		return err
	}
	return t.buf.Flush()
}

// appendClip appends clip(s, n), without allocating when s is already one
// line of single-spaced ASCII no longer than n, as most texts are.
func appendClip(b []byte, s string, n int) []byte {
	if len(s) <= n && singleSpaced(s) {
		return append(b, s...)
	}
	return append(b, clip(s, n)...)
}

// singleSpaced reports whether s is ASCII whose words are separated by
// single spaces with none at either end: what strings.Fields and a join
// with " " leave as it is.
func singleSpaced(s string) bool {
	space := true // a space before the first byte would be a leading one
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf, c == '\t', c == '\n', c == '\v', c == '\f', c == '\r':
			return false
		case c == ' ':
			if space {
				return false
			}
			space = true
		default:
			space = false
		}
	}
	return !space || s == ""
}
