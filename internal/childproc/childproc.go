// Package childproc keeps the processes a test starts (gateways, Redis
// servers) from outliving the test binary. Bind asks the kernel to kill the
// child when the test process dies, however it dies (a timeout panic, a
// SIGKILL from go test or from a user); KillAll, called at the end of
// TestMain, kills any child a test forgot to stop.
//
// Pdeathsig exists only on Linux; elsewhere Bind only records the child for
// KillAll.
package childproc

import (
	"os/exec"
	"sync"
)

var (
	mu   sync.Mutex
	cmds []*exec.Cmd
)

// Bind prepares cmd (before Start) so that the kernel sends it SIGKILL when
// the test process exits, and records it for KillAll.
func Bind(cmd *exec.Cmd) *exec.Cmd {
	bind(cmd)
	mu.Lock()
	cmds = append(cmds, cmd)
	mu.Unlock()
	return cmd
}

// KillAll sends SIGKILL to every bound process that was started and has not
// been waited for; it is meant for TestMain, after m.Run. Killing a process
// that already exited is a harmless error, ignored.
func KillAll() {
	mu.Lock()
	c := cmds
	cmds = nil
	mu.Unlock()
	for _, cmd := range c {
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
	}
}
