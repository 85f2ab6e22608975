package textcheck

import (
	"strings"
	"testing"
)

func TestIdentifierFault(t *testing.T) {
	for _, s := range []string{"desk/ship-91", "pnk_02ed50", "https://example.org/reviews/91?x=1#y", "café", "検査", "a\u200db"} {
		if f := IdentifierFault(s); f != "" {
			t.Errorf("%q refused: %s", s, f)
		}
	}
	for s, want := range map[string]string{
		"a\x00b": "U+0000", "a\x01": "U+0001", "\x1b[2J": "U+001B", "a\x7f": "U+007F", "a\u0085": "U+0085", "a\u009b": "U+009B",
		"abc\u202egpj.exe": "U+202E", "a\u202ab": "U+202A", "a\u2066b": "U+2066", "a\u2069": "U+2069",
	} {
		if f := IdentifierFault(s); !strings.Contains(f, want) {
			t.Errorf("%q: got %q, want it to name %s", s, f, want)
		}
	}
}

func TestTextFault(t *testing.T) {
	for _, s := range []string{"hand back a reviewed schema", "line one\nline two\ttabbed", "שלום \u202b", "ls -la"} {
		if f := TextFault(s); f != "" {
			t.Errorf("%q refused: %s", s, f)
		}
	}
	for s, want := range map[string]string{"a\x00b": "U+0000", "done\x1b]0;pwned\x07": "U+001B", "\x1b[2J": "ESC"} {
		if f := TextFault(s); !strings.Contains(f, want) {
			t.Errorf("%q: got %q, want it to name %s", s, f, want)
		}
	}
	if err := Text("promise", "a\x1bb"); err == nil || !strings.HasPrefix(err.Error(), "promise: must not hold U+001B") {
		t.Errorf("Text: %v", err)
	}
	if err := Identifier("id", "ok"); err != nil {
		t.Errorf("Identifier: %v", err)
	}
}
