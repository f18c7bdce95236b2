//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd || solaris || illumos)

package redisstore

import "net"

// prober checks nothing where a socket cannot be peeked at without
// blocking (go-redis's pool does not either): a lane's connection closed
// by the server fails the call that finds it, and is then replaced.
type prober struct{}

// check reports nothing.
func (p *prober) check(*net.Conn) error { return nil }
