//go:build unix

package distill

import (
	"os/exec"
	"syscall"
)

// killGroup makes cmd run in its own process group and kills the whole
// group when its context ends, so a trainer's children die with it.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if cmd.Process == nil {
			return nil
		}
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
