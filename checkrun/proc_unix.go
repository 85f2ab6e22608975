//go:build unix

package checkrun

import (
	"os/exec"
	"syscall"
)

// killGroup runs the command in its own process group and kills the whole
// group on cancel, so a shell's children do not outlive a timeout.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
