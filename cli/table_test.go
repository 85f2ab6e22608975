package cli

import (
	"strings"
	"testing"
)

// TestAppendClipAsClip: the fast path appends exactly what clip returns,
// for texts it takes and texts it leaves to clip.
func TestAppendClipAsClip(t *testing.T) {
	for _, s := range []string{
		"", "a", "hand back a reviewed schema", " leading", "trailing ", "two  spaces", "tab\there", "line\nbreak",
		"ünïcode text", "non\u00a0breaking", strings.Repeat("x", 60), strings.Repeat("x", 61), strings.Repeat("ab ", 30), " ",
	} {
		for _, n := range []int{1, 10, 60} {
			if got, want := string(appendClip([]byte("<"), s, n)), "<"+clip(s, n); got != want {
				t.Errorf("%q at %d: %q, clip %q", s, n, got, want)
			}
		}
	}
}
