//go:build linux

package childproc

import (
	"os/exec"
	"syscall"
)

// bind sets Pdeathsig. The signal fires when the thread that forked the
// child exits; the Go runtime does not end its threads unless a goroutine
// exits while locked to one, which the test helpers never do.
func bind(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
