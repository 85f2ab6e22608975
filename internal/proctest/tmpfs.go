package proctest

import (
	"os"
	"os/exec"
	"testing"
)

// Tmpfs mounts a tmpfs of size (as mount's size= takes it: "256k",
// "160m") at dir, made if need be, and unmounts it when the test ends: a
// small disk for a test that fills one. It skips the test where the mount
// cannot be made, but never under CI, which runs as root.
func Tmpfs(t testing.TB, dir, size string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount a tmpfs (CI runs as root): %v: %s", err, out)
		}
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}
