package cli

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"
)

// viaTabwriter is what text/tabwriter, as the CLI configures it, makes of s.
func viaTabwriter(s string) string {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	tw.Write([]byte(s))
	tw.Flush()
	return b.String()
}

// The table aligns what it is given exactly as text/tabwriter does, by
// itself for lines of one shape and through a tabwriter otherwise.
func TestTableAlignsAsTabwriter(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		uniform        bool
	}{
		{"ls rows", "ID\tSTATE\tPROMISE\npnk_1\topen\tship it\npnk_22\tsatisfied\tx\n",
			"ID      STATE      PROMISE\npnk_1   open       ship it\npnk_22  satisfied  x\n", true},
		{"runes count, not bytes", "a → b\tx\nab\ty\n", "a → b  x\nab     y\n", true},
		{"empty cells", "\t\tend\nx\t\t\n", "   ␣  end\nx  ␣  \n", true},
		{"escapes count as runes", "\x1b[31mopen\x1b[0m\tz\nok\tz\n", "\x1b[31mopen\x1b[0m  z\nok             z\n", true},
		{"one line", "k\tv\n", "k  v\n", true},
		{"shapes differ", "a\tb\tc\nlonger line without tabs\nd\te\n", "", false},
		{"no tabs", "plain\n", "", false},
		{"no final newline", "a\tb\nc\td", "", false},
		{"form feed", "a\tb\f\nc\td\n", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := strings.ReplaceAll(tc.want, "␣", "")
			var aligned bytes.Buffer
			ok, err := alignUniform(&aligned, []byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			out := aligned.Bytes()
			if !ok && len(out) > 0 {
				t.Fatalf("not aligned by itself, yet wrote %q", out)
			}
			if ok != tc.uniform {
				t.Fatalf("aligned by itself: %v, want %v", ok, tc.uniform)
			}
			if ok && string(out) != want {
				t.Fatalf("aligned\n%q\nwant\n%q", out, want)
			}
			if ok && want != viaTabwriter(tc.in) {
				t.Fatalf("the case's want %q is not the tabwriter's %q", want, viaTabwriter(tc.in))
			}
			var b bytes.Buffer
			tb := newTable(&b)
			tb.Write([]byte(tc.in))
			if err := tb.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != viaTabwriter(tc.in) {
				t.Fatalf("table wrote\n%q\nthe tabwriter\n%q", got, viaTabwriter(tc.in))
			}
		})
	}
}

// A list longer than one written chunk comes out whole and in order.
func TestTableAlignsALongList(t *testing.T) {
	var in strings.Builder
	for i := range 5000 {
		in.WriteString(strings.Repeat("x", i%13) + "\tπ" + strings.Repeat("y", i%7) + "\tpromise text\n")
	}
	var b bytes.Buffer
	tb := newTable(&b)
	tb.Grow(in.Len())
	tb.Write([]byte(in.String()))
	if err := tb.Flush(); err != nil {
		t.Fatal(err)
	}
	if want := viaTabwriter(in.String()); b.String() != want {
		t.Fatalf("a long list: %d bytes, the tabwriter's %d, and they differ", b.Len(), len(want))
	}
}
