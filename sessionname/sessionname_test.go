package sessionname

import (
	"regexp"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	for _, ok := range []string{"default", "acme-1", "a.b_c"} {
		if Check("tenant", ok) != nil {
			t.Errorf("refused %q", ok)
		}
	}
	for _, bad := range []string{"", "..", ".hidden", "a/b", "a b", strings.Repeat("x", 65)} {
		if Check("tenant", bad) == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestNamesAsTheExpression: the hand-written check accepts exactly what the
// expression it replaced accepts, over every short name of an alphabet with
// each class of byte, and at the length limit.
func TestNamesAsTheExpression(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	alphabet := []byte("aZ09._-/ \x00\xff")
	var walk func(prefix []byte)
	walk = func(prefix []byte) {
		name := string(prefix)
		if got, want := validName(name), re.MatchString(name); got != want {
			t.Fatalf("%q: valid %v, the expression %v", name, got, want)
		}
		if len(prefix) == 3 {
			return
		}
		for _, c := range alphabet {
			walk(append(prefix, c))
		}
	}
	walk(nil)
	for _, name := range []string{strings.Repeat("a", 64), strings.Repeat("a", 65), "a" + strings.Repeat("-", 63), "-" + strings.Repeat("a", 63)} {
		if got, want := validName(name), re.MatchString(name); got != want {
			t.Errorf("%d bytes %q…: valid %v, the expression %v", len(name), name[:2], got, want)
		}
	}
}
