package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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
	var timer *time.Timer
	if t.headers > 0 {
		timer = time.AfterFunc(t.headers, func() { cancel(errHeaderTimeout) })
	}
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if timer != nil && !timer.Stop() {
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
	b := &streamBody{ReadCloser: resp.Body, cancel: cancel, idle: t.idle}
	if t.idle > 0 {
		b.timer = time.AfterFunc(t.idle, func() { cancel(errIdleTimeout) })
		b.timer.Stop() // armed only while a read waits
	}
	resp.Body = b
	return resp, nil
}

// streamBody is an upstream response body: Close releases the exchange's
// context; with an idle budget, each Read must see bytes (or the end)
// within it, the time the client takes to accept them not counting.
type streamBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
	idle   time.Duration
	timer  *time.Timer
}

func (b *streamBody) Read(p []byte) (int, error) {
	if b.timer == nil {
		return b.ReadCloser.Read(p)
	}
	b.timer.Reset(b.idle)
	n, err := b.ReadCloser.Read(p)
	if !b.timer.Stop() && err != nil && !errors.Is(err, io.EOF) {
		err = errIdleTimeout
	}
	return n, err
}

func (b *streamBody) Close() error {
	if b.timer != nil {
		b.timer.Stop()
	}
	err := b.ReadCloser.Close()
	b.cancel(nil)
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
