package redisstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// lane is one of the coalescer's connections to Redis, held by one call
// or one batch at a time (whoever took the lane from the coalescer).
//
// A call through the client's pool paid, on every call, for the pool's
// turn, its metrics and its health check of the connection (the socket's
// deadline cleared, a syscall and three allocations): an eighth of the
// gateway's own work for a decision in process (BENCHMARKS.md "Lanes own
// their connections"). A lane instead pins one connection (a redis.Conn, whose
// Get is a channel receive) of a client of its own: one connection
// dialed with the options of the Store's client, so to the same server
// (Sentinel's master of the moment), with the same credentials, TLS and
// timeouts. The lane sees that connection as it is dialed, so it does the
// pool's check itself, without its costs, before each use: a connection
// the server closed (a restart, CLIENT KILL, its idle timeout, Sentinel
// reconfiguring a demoted master) is found before anything is written to
// it, and replaced, as the pool would have. A connection that failed a
// call (a timeout, a reset, a lost reply) is never used again: the next
// use pins a fresh one through the lane's client, whose pool checks and
// dials.
//
// A lane unused for idleWorker (up to twice that) gives its client back
// (the coalescer's reaper), so that a Store dropped without Close leaves
// no connection behind for long; Close releases them all.
type lane struct {
	// client is the lane's own client; nil until the lane is first used,
	// and again once the reaper or Close gave it back.
	client *redis.Client
	// conn is pinned on client; nil: pin one at the next use.
	conn *redis.Conn
	// dialed is the connection client dialed last, which conn holds (the
	// client has one connection: a new one is dialed only when the old
	// one is gone). Each client records into its own, so that a dial
	// finishing late for a client already given back records nothing
	// here.
	dialed *atomic.Pointer[net.Conn]
	// probe checks the connection before each use (lanecheck*.go).
	probe prober
	// used is set (under the coalescer's lock) each time the lane is
	// given back, and cleared by the reaper, which gives back the client
	// of a lane it finds not used since its last round: without a clock
	// read per call, a lane idle for between one and two rounds.
	used bool
}

// laneCaller is what a lane's holder sends on: a call alone, or a
// pipeline for a batch.
type laneCaller interface {
	caller
	Pipeline() redis.Pipeliner
}

// errOutOfStep is a connection the lane's check found holding bytes no
// call asked for (a reply out of step): never used again.
var errOutOfStep = errors.New("redisstore: lane connection holds bytes no call asked for")

// pin returns what l's holder sends on: its pinned connection, checked,
// or the Store's client when lanes cannot have their own (a client other
// than *redis.Client, no NewLaneClient) or the Store is closed.
func (c *coalescer) pin(l *lane) laneCaller {
	if c.closed.Load() {
		return c.client
	}
	if l.client == nil {
		if l.client = c.laneClient(l); l.client == nil {
			return c.client
		}
		c.armReaper()
	}
	if l.conn != nil && l.probe.check(l.dialed.Load()) != nil {
		c.s.stats.laneRedials.Add(1)
		_ = l.conn.Close()
		l.conn = nil
	}
	if l.conn == nil {
		l.conn = l.client.Conn()
	}
	return l.conn
}

// after notes the outcome of a call or batch sent on l: a connection
// that failed at the connection level (not an answer of Redis) is given
// up, so that the next use pins another.
func (l *lane) after(err error) {
	if l.conn == nil || !givesUpConn(err) {
		return
	}
	_ = l.conn.Close()
	l.conn = nil
}

// givesUpConn reports whether a call's error means its connection must
// not be used again: a failure at the connection level (a timeout, a
// reset, a lost reply), or READONLY, an answer of a server that is no
// longer the master. A pooled connection to a demoted master is closed by
// the client when Sentinel announces the switch; a lane's is not, and
// dialed again it reaches the master of the moment. Any other answer of
// Redis leaves the connection in step and usable.
func givesUpConn(err error) bool {
	if err == nil {
		return false
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return strings.HasPrefix(rerr.Error(), "READONLY ")
	}
	return true
}

// drop closes l's connection and client, if any; l's holder (or the
// coalescer, l being free, under its lock) calls it.
func (l *lane) drop() (func(), bool) {
	if l.client == nil {
		return nil, false
	}
	conn, client := l.conn, l.client
	l.conn, l.client, l.dialed = nil, nil, nil
	l.probe = prober{}
	return func() {
		if conn != nil {
			_ = conn.Close()
		}
		_ = client.Close()
	}, true
}

// laneClient returns a client of one connection dialed with the options
// of the Store's client, recording in l each connection it dials; nil
// when the Store's client is not a *redis.Client (its options unknown) or
// the Store was given no NewLaneClient.
func (c *coalescer) laneClient(l *lane) *redis.Client {
	base, ok := c.client.(*redis.Client)
	if !ok || c.s.opts.NewLaneClient == nil {
		return nil
	}
	o := *base.Options()
	dial := o.Dialer
	if dial == nil {
		return nil
	}
	dialed := new(atomic.Pointer[net.Conn])
	o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := dial(ctx, network, addr)
		if err == nil {
			dialed.Store(&nc)
		}
		return nc, err
	}
	l.dialed = dialed
	// One connection, dialed when pinned; pipelines on it too.
	o.PoolSize, o.MinIdleConns, o.MaxIdleConns, o.MaxActiveConns = 1, 0, 1, 1
	o.PipelinePoolSize = -1
	lc := c.s.opts.NewLaneClient(&o)
	if lc == nil {
		return nil
	}
	for _, h := range c.hooks {
		lc.AddHook(h)
	}
	return lc
}

// armReaper starts the reaper unless it runs.
func (c *coalescer) armReaper() {
	c.mu.Lock()
	if !c.reaping && !c.closed.Load() {
		c.reaping = true
		c.reaper.Reset(c.idleFor)
	}
	c.mu.Unlock()
}

// reap gives back the clients of the free lanes not used since its last
// round (idleFor ago), and runs again while any lane holds one.
func (c *coalescer) reap() {
	var closes []func()
	c.mu.Lock()
	held := false
	for _, l := range c.all {
		if !c.isFree(l) {
			// In use: its holder alone reads and writes it now.
			held = true
			continue
		}
		if l.client == nil {
			continue
		}
		if l.used {
			l.used = false
			held = true
			continue
		}
		if f, ok := l.drop(); ok {
			closes = append(closes, f)
		}
	}
	c.reaping = held && !c.closed.Load()
	if c.reaping {
		c.reaper.Reset(c.idleFor)
	}
	c.mu.Unlock()
	for _, f := range closes {
		f()
	}
}

// isFree reports whether l is among the free lanes; c.mu must be held.
func (c *coalescer) isFree(l *lane) bool {
	for _, f := range c.free {
		if f == l {
			return true
		}
	}
	return false
}

// close releases the lanes' connections: the free ones now, the others
// when their holders give them back; later calls go through the Store's
// client.
func (c *coalescer) close() {
	c.mu.Lock()
	c.closed.Store(true)
	c.reaper.Stop()
	c.reaping = false
	closes := c.dropFree()
	c.mu.Unlock()
	for _, f := range closes {
		f()
	}
}

// dropFree drops the connections and clients of the free lanes (c.mu
// held) and returns what closes them, to run once c.mu is released.
func (c *coalescer) dropFree() []func() {
	var closes []func()
	for _, l := range c.free {
		if f, ok := l.drop(); ok {
			closes = append(closes, f)
		}
	}
	return closes
}
