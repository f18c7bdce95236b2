package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/tollgate/gateway/policy"
)

// errHeaderTimeout and errIdleTimeout end an upstream exchange that
// overran a route's budget. Both wrap context.DeadlineExceeded, which the
// error handler answers 504 while no response has begun.
var (
	errHeaderTimeout = fmt.Errorf("no response headers within the route's timeout: %w", context.DeadlineExceeded)
	errIdleTimeout   = fmt.Errorf("no response body bytes within the route's idle_timeout: %w", context.DeadlineExceeded)
)

// routeTransport returns the transport of one route: next, with the
// route's timeout bounding the wait for the response headers and its
// idle_timeout (when set) the wait for each read of the response body.
// Neither bounds the whole exchange: a long download, a server-sent event
// stream or an upgraded (WebSocket) connection runs until one side ends it.
func routeTransport(next http.RoundTripper, rt *policy.Route) http.RoundTripper {
	if rt.Timeout <= 0 && rt.IdleTimeout <= 0 {
		return next
	}
	t := &timeoutTransport{next: next, idle: rt.IdleTimeout}
	if rt.Timeout > 0 {
		t.headers = &deadlines{budget: rt.Timeout, now: time.Now}
	}
	return t
}

// timeoutTransport is routeTransport's RoundTripper.
type timeoutTransport struct {
	next    http.RoundTripper
	headers *deadlines    // nil: no budget for the headers
	idle    time.Duration // 0: no budget between body reads
}

// RoundTrip sends req with a context of its own, cancelled when the
// header budget runs out, when the body is idle too long, or when the
// body is closed (so that the context never outlives the exchange).
func (t *timeoutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	x := &exchange{cancel: cancel, idle: t.idle}
	if req.Body != nil {
		// ReverseProxy sends no body (nil) when the client sent none:
		// only then can an upload hold the exchange up.
		x.upload, _ = req.Context().Value(uploadKey{}).(*bodyReader)
	}
	if t.headers != nil {
		t.headers.add(x)
	}
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if t.headers != nil && t.headers.remove(x) {
		// The budget ran out, whatever RoundTrip returned.
		if resp != nil {
			resp.Body.Close()
		}
		cancel(errHeaderTimeout)
		return nil, errHeaderTimeout
	}
	if err != nil {
		cancel(err)
		return nil, err
	}
	if rwc, ok := resp.Body.(io.ReadWriteCloser); ok && resp.StatusCode == http.StatusSwitchingProtocols {
		// An upgraded connection: ReverseProxy needs the body to stay a
		// ReadWriteCloser, and a tunnel may be quiet for as long as its
		// ends like.
		resp.Body = &tunnelBody{ReadWriteCloser: rwc, cancel: cancel}
		return resp, nil
	}
	x.ReadCloser = resp.Body
	if t.idle > 0 {
		x.idleTimer = time.AfterFunc(t.idle, x.idleTimeout)
		x.idleTimer.Stop() // armed only while a read waits
	}
	resp.Body = x
	return resp, nil
}

// deadlines holds the exchanges of one route that wait for their response
// headers, oldest first, and ends those whose budget runs out. Every
// exchange of the route has the same budget, so the order of arrival is
// the order of the deadlines: one timer, armed for the oldest, serves
// them all. A timer per exchange cost every proxied request an
// allocation, a closure and two operations on the runtime's timer heap.
type deadlines struct {
	budget time.Duration
	now    func() time.Time

	mu         sync.Mutex
	head, tail *exchange   // waiting exchanges, by deadline
	timer      *time.Timer // nil until the first exchange
	// armed: the timer will fire at or before the head's deadline. Once
	// armed it stays so until it fires, even when the queue empties: a
	// later exchange's deadline is never earlier.
	armed bool
}

// add starts x's budget.
func (d *deadlines) add(x *exchange) {
	d.mu.Lock()
	defer d.mu.Unlock()
	x.deadline = d.now().Add(d.budget)
	x.prev, x.next = d.tail, nil
	if d.tail != nil {
		d.tail.next = x
	} else {
		d.head = x
	}
	d.tail = x
	x.waiting = true
	switch {
	case d.timer == nil:
		d.timer = time.AfterFunc(d.budget, d.expire)
		d.armed = true
	case !d.armed:
		d.timer.Reset(d.budget)
		d.armed = true
	}
}

// remove ends x's wait (its RoundTrip returned) and reports whether its
// budget had run out before. From then on, x's context and the client's
// connection are no longer touched here.
func (d *deadlines) remove(x *exchange) (expired bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !x.waiting {
		return x.expired
	}
	d.unlink(x)
	return false
}

func (d *deadlines) unlink(x *exchange) {
	if x.prev != nil {
		x.prev.next = x.next
	} else {
		d.head = x.next
	}
	if x.next != nil {
		x.next.prev = x.prev
	} else {
		d.tail = x.prev
	}
	x.prev, x.next, x.waiting = nil, nil, false
}

// expire ends every exchange whose deadline has passed and arms the timer
// for the next one.
func (d *deadlines) expire() {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	for x := d.head; x != nil && !x.deadline.After(now); x = d.head {
		d.unlink(x)
		x.expired = true
		x.cancel(errHeaderTimeout)
		if x.upload != nil {
			// The transport may be blocked reading the client's body:
			// only a read deadline on the client's connection frees it.
			x.upload.abort()
		}
	}
	d.armed = d.head != nil
	if d.armed {
		d.timer.Reset(d.head.deadline.Sub(now))
	}
}

// uploadKey is the context key of the client's request body (*bodyReader).
type uploadKey struct{}

// exchange is one upstream exchange under a route's budgets; once the
// headers are in, it is the response body the client is sent: Close
// releases the exchange's context; with an idle budget, each Read must see
// bytes (or the end) within it, the time the client takes to accept them
// not counting.
type exchange struct {
	io.ReadCloser // the upstream's response body
	cancel        context.CancelCauseFunc
	idle          time.Duration
	idleTimer     *time.Timer

	// upload is the client's request body, nil without one. When the
	// header budget runs out while the upstream still waits for it, the
	// transport is blocked reading it and only a read deadline on the
	// client's connection frees it.
	upload *bodyReader

	// The wait for the response headers, guarded by the route's
	// deadlines.mu: the place in its queue, the deadline, whether the
	// exchange is still queued and whether its budget ran out.
	prev, next *exchange
	deadline   time.Time
	waiting    bool
	expired    bool
}

func (x *exchange) idleTimeout() { x.cancel(errIdleTimeout) }

func (x *exchange) Read(p []byte) (int, error) {
	if x.idleTimer == nil {
		return x.ReadCloser.Read(p)
	}
	x.idleTimer.Reset(x.idle)
	n, err := x.ReadCloser.Read(p)
	if !x.idleTimer.Stop() && err != nil && !errors.Is(err, io.EOF) {
		err = errIdleTimeout
	}
	return n, err
}

func (x *exchange) Close() error {
	if x.idleTimer != nil {
		x.idleTimer.Stop()
	}
	err := x.ReadCloser.Close()
	x.cancel(nil)
	return err
}

// tunnelBody is the connection of an upgraded exchange; Close releases the
// exchange's context.
type tunnelBody struct {
	io.ReadWriteCloser
	cancel context.CancelCauseFunc
}

func (b *tunnelBody) Close() error {
	err := b.ReadWriteCloser.Close()
	b.cancel(nil)
	return err
}
