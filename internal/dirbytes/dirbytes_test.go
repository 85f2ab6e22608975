package dirbytes

import (
	"os"
	"path/filepath"
	"testing"
)

// Of counts the regular files under a tree, nested ones too, and nothing
// for a directory that is not there.
func TestOf(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, size := range map[string]int{"x": 10, "a/y": 200, "a/b/z": 3000} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(dir, "a", "b", "z"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if got := Of(dir); got != 3210 {
		t.Fatalf("Of = %d, want 3210 (a link counts nothing)", got)
	}
	if got := Of(filepath.Join(dir, "none")); got != 0 {
		t.Fatalf("Of(missing) = %d, want 0", got)
	}
}
