package redisstore

import (
	"syscall"
	"unsafe"
)

// peekFD peeks at up to len(b) bytes of socket fd without taking them or
// waiting. It never blocks (MSG_DONTWAIT), so it is a raw system call:
// without the scheduler's bookkeeping around a blocking one, which cost
// more than the peek itself on every use of a lane.
func peekFD(fd uintptr, b []byte) (int, error) {
	n, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
