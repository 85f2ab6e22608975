package proctest

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"regexp"
	"testing"
	"time"
)

// listening matches the line `tally serve` prints once it listens.
var listening = regexp.MustCompile(`on (http://127\.0\.0\.1:\d+)`)

// Serve runs `bin serve --addr 127.0.0.1:0 args…` with env and its stderr
// to errw, and returns its URL once its stdout says where it listens; the
// process is killed when the test ends.
func Serve(t testing.TB, bin string, env []string, errw io.Writer, args ...string) (string, *exec.Cmd) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = env
	cmd.Stderr = errw
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
				break
			}
		}
		// Drain the rest so the server never blocks writing to stdout.
		io.Copy(io.Discard, out)
	}()
	select {
	case url := <-addr:
		return url, cmd
	case <-time.After(15 * time.Second):
		t.Fatal("tally serve did not say where it listens within 15s")
	}
	return "", nil
}
