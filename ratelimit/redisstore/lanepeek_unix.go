//go:build darwin || dragonfly || freebsd || netbsd || openbsd || solaris || illumos

package redisstore

import "syscall"

// peekFD peeks at up to len(b) bytes of socket fd without taking them or
// waiting.
func peekFD(fd uintptr, b []byte) (int, error) {
	n, _, err := syscall.Recvfrom(int(fd), b, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return n, err
}
