package cli

import (
	"bufio"
	"bytes"
	"io"
	"slices"
	"text/tabwriter"
	"unicode/utf8"
)

// table is the CLI's aligned table, as text/tabwriter aligns it (minimum
// width 0, padding 2 spaces): it holds what is written until Flush. When
// every line has the same number of tab-ended cells (every list the CLI
// prints), Flush aligns them itself in two passes over the bytes, each
// column as wide as its widest cell in runes plus two, which is what the
// tabwriter makes of such lines; anything else goes through a tabwriter.
// The tabwriter kept every cell of a 10,000-row list in structures of its
// own and was most of `tally ls`'s time after the fold.
type table struct {
	w   io.Writer
	buf []byte
}

func newTable(w io.Writer) *table { return &table{w: w} }

// Grow makes room for n more bytes of cells, so a long list is not copied
// as it grows.
func (t *table) Grow(n int) { t.buf = slices.Grow(t.buf, n) }

// Write adds p to the table.
func (t *table) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	return len(p), nil
}

// Flush aligns and writes what the table holds.
func (t *table) Flush() error {
	b := t.buf
	t.buf = t.buf[:0]
	if len(b) == 0 {
		return nil
	}
	if ok, err := alignUniform(t.w, b); ok {
		return err
	}
	bw := bufio.NewWriterSize(t.w, 64<<10)
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', 0)
	if _, err := tw.Write(b); err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

// alignUniform writes to w lines that each end in a newline and hold the
// same number (at least one) of tab-ended cells, aligned as text/tabwriter
// aligns them with minimum width 0 and padding 2 spaces. It writes nothing
// and returns false for anything else, including the bytes the tabwriter
// gives meaning to ('\v', '\f', 0xff).
func alignUniform(w io.Writer, b []byte) (ok bool, err error) {
	if b[len(b)-1] != '\n' {
		return false, nil
	}
	var widths []int
	for rest, first := b, true; len(rest) > 0; first = false {
		nl := bytes.IndexByte(rest, '\n')
		line := rest[:nl]
		rest = rest[nl+1:]
		col := 0
		for {
			tab := bytes.IndexByte(line, '\t')
			if tab < 0 {
				break
			}
			n := utf8.RuneCount(line[:tab])
			switch {
			case first:
				widths = append(widths, n)
			case col >= len(widths):
				return false, nil
			case n > widths[col]:
				widths[col] = n
			}
			line = line[tab+1:]
			col++
		}
		if col != len(widths) || col == 0 {
			return false, nil
		}
	}
	if bytes.ContainsAny(b, "\v\f") || bytes.IndexByte(b, 0xff) >= 0 {
		return false, nil
	}
	// Written in chunks: a whole list aligned in memory first was
	// megabytes to allocate and clear.
	const chunk = 64 << 10
	out := make([]byte, 0, chunk+4096)
	for rest := b; len(rest) > 0; {
		nl := bytes.IndexByte(rest, '\n')
		line := rest[:nl]
		rest = rest[nl+1:]
		for col := range widths {
			tab := bytes.IndexByte(line, '\t')
			cell := line[:tab]
			out = append(out, cell...)
			for pad := widths[col] + 2 - utf8.RuneCount(cell); pad > 0; pad-- {
				out = append(out, ' ')
			}
			line = line[tab+1:]
		}
		out = append(append(out, line...), '\n')
		if len(out) >= chunk {
			if _, err := w.Write(out); err != nil {
				return true, err
			}
			out = out[:0]
		}
	}
	_, err = w.Write(out)
	return true, err
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
