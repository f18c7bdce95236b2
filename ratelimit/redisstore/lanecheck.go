//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd || solaris || illumos

package redisstore

import (
	"io"
	"net"
	"syscall"
)

// prober checks a lane's connection before a use, as go-redis's pool
// checks a pooled one before handing it out: a peek at the socket
// without blocking, which finds a connection closed by the server (end
// of stream) or holding bytes no call asked for. It keeps the raw
// connection and its callback from one check to the next, so that a
// check allocates nothing; and it reads no deadline (Control, not Read),
// so a deadline left by the last call does not fail it.
type prober struct {
	of  net.Conn
	raw syscall.RawConn
	fn  func(fd uintptr)
	buf [1]byte
	err error
}

// check reports why *nc cannot be used, nil when it can (or when it is
// not a socket whose descriptor can be peeked at: TLS, whose records
// the pool does not peek at either).
func (p *prober) check(nc *net.Conn) error {
	if nc == nil {
		return nil
	}
	if *nc != p.of {
		p.of, p.raw = *nc, nil
		if sc, ok := (*nc).(syscall.Conn); ok {
			p.raw, _ = sc.SyscallConn()
		}
		if p.fn == nil {
			p.fn = p.peek
		}
	}
	if p.raw == nil {
		return nil
	}
	if err := p.raw.Control(p.fn); err != nil {
		return err
	}
	return p.err
}

// peek looks at the next byte of fd without taking it or waiting.
func (p *prober) peek(fd uintptr) {
	n, err := peekFD(fd, p.buf[:])
	switch {
	case n == 0 && err == nil:
		p.err = io.EOF
	case n > 0:
		p.err = errOutOfStep
	case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
		p.err = nil
	default:
		p.err = err
	}
}
