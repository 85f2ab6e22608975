package checkrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"tally/claim"
)

// Command runs a shell command (sh -c) with the artifact materialised: the
// working directory is Input.Dir and TALLY_ARTIFACT names the file. Exit 0
// → pass; another exit status → fail; a command that cannot start (no
// shell, exit 126 or 127 from the shell: not executable, not found), is
// killed by a signal, or outlives its timeout → error.
type Command struct{}

func (Command) Name() string    { return "command" }
func (Command) Version() string { return "1" }

func (Command) Run(ctx context.Context, in Input) Outcome {
	if strings.TrimSpace(in.Command) == "" {
		return errorf(nil, "the command validator needs a command (--command)")
	}
	res := runShell(ctx, in)
	if res.startErr != nil {
		return errorf(res.log, "cannot start: %v", res.startErr)
	}
	if res.timedOut {
		return errorf(res.log, "timed out after %v", res.timeout)
	}
	switch res.exit {
	case 0:
		return Outcome{Result: claim.Pass, Note: "exit 0", Log: res.log}
	case 126, 127:
		return errorf(res.log, "cannot start: the shell exited %d (command not executable or not found)", res.exit)
	case -1:
		return errorf(res.log, "killed: %v", res.waitErr)
	}
	return Outcome{Result: claim.Fail, Note: fmt.Sprintf("exit %d", res.exit), Log: res.log}
}

type shellResult struct {
	stdout   []byte // standard output alone
	log      []byte // stdout and stderr interleaved, bounded
	exit     int
	startErr error
	waitErr  error
	timedOut bool
	timeout  time.Duration
}

// boundedBuffer keeps the first max bytes and counts the rest.
type boundedBuffer struct {
	buf     bytes.Buffer
	max     int
	dropped int64
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	room := b.max - b.buf.Len()
	if room >= len(p) {
		return b.buf.Write(p)
	}
	if room > 0 {
		b.buf.Write(p[:room])
	}
	b.dropped += int64(len(p) - max(room, 0))
	return len(p), nil
}

func (b *boundedBuffer) bytes() []byte {
	out := b.buf.Bytes()
	if b.dropped > 0 {
		out = fmt.Appendf(out, "\ntally: log cut, %d more bytes dropped\n", b.dropped)
	}
	return out
}

// runShell runs in.Command under sh in in.Dir, bounded by the timeout.
func runShell(ctx context.Context, in Input) shellResult {
	timeout := in.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	r := shellResult{timeout: timeout}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		r.startErr = err
		return r
	}
	cmd := exec.CommandContext(ctx, sh, "-c", in.Command)
	cmd.Dir = in.Dir
	cmd.Env = append(append(os.Environ(), "TALLY_ARTIFACT="+in.Path), in.Env...)
	cmd.Stdin = nil
	killGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	logBuf := &boundedBuffer{max: MaxLog}
	outBuf := &boundedBuffer{max: 64 << 20}
	cmd.Stdout = multi{outBuf, logBuf}
	cmd.Stderr = logBuf
	if err := cmd.Start(); err != nil {
		r.startErr = err
		return r
	}
	err = cmd.Wait()
	r.stdout, r.log = outBuf.buf.Bytes(), logBuf.bytes()
	r.waitErr = err
	if ctx.Err() == context.DeadlineExceeded {
		r.timedOut = true
		return r
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.exit = ee.ExitCode() // -1 when killed by a signal
	default:
		r.exit = -1
	}
	return r
}

// multi writes to both buffers (they never fail).
type multi [2]*boundedBuffer

func (m multi) Write(p []byte) (int, error) {
	m[0].Write(p)
	m[1].Write(p)
	return len(p), nil
}
