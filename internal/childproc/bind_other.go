//go:build !linux

package childproc

import "os/exec"

// bind does nothing: only Linux can tie a child's life to its parent's.
func bind(*exec.Cmd) {}
