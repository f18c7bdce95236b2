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
	return &timeoutTransport{next: next, headers: rt.Timeout, idle: rt.IdleTimeout}
}

// timeoutTransport is routeTransport's RoundTripper.
type timeoutTransport struct {
	next    http.RoundTripper
	headers time.Duration // 0: no budget for the headers
	idle    time.Duration // 0: no budget between body reads
}

// RoundTrip sends req with a context of its own, cancelled when the
// header budget runs out, when the body is idle too long, or when the
// body is closed (so that the context never outlives the exchange).
func (t *timeoutTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	x := &exchange{cancel: cancel, idle: t.idle}
	x.upload, _ = req.Context().Value(uploadKey{}).(*bodyReader)
	var timer *time.Timer
	if t.headers > 0 {
		timer = time.AfterFunc(t.headers, x.headerTimeout)
	}
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if timer != nil && !timer.Stop() {
		// The budget ran out, whatever RoundTrip returned.
		x.finish()
		if resp != nil {
			resp.Body.Close()
		}
		cancel(errHeaderTimeout)
		return nil, errHeaderTimeout
	}
	x.finish()
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
	upload   *bodyReader
	mu       sync.Mutex
	finished bool // RoundTrip has returned: the client's connection is no longer ours to touch
}

// headerTimeout ends an exchange whose headers did not come in time.
func (x *exchange) headerTimeout() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.finished {
		return
	}
	x.cancel(errHeaderTimeout)
	if x.upload != nil {
		x.upload.abort()
	}
}

// finish marks RoundTrip as returned; a header timer firing from now on
// leaves the client's connection alone.
func (x *exchange) finish() {
	x.mu.Lock()
	x.finished = true
	x.mu.Unlock()
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
