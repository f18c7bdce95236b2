// Package testupstream is the upstream that tests and benchmarks put behind
// the gateway, in one copy: request headers that make it sleep, fail or
// reset the connection (the gateway forwards them like any end-to-end
// header), a fixed-body server for benchmarks, and a ResponseWriter that
// discards the body for in-process benchmarks.
package testupstream

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// Request headers the upstream obeys.
const (
	// HeaderSleep makes the upstream wait this long (a Go duration) before
	// answering, or until the request is cancelled.
	HeaderSleep = "X-Upstream-Sleep"
	// HeaderStatus makes the upstream answer with this status code.
	HeaderStatus = "X-Upstream-Status"
	// HeaderReset makes the upstream reset the connection (RST) without
	// answering.
	HeaderReset = "X-Upstream-Reset"
	// HeaderNoRead makes the upstream answer without reading the body.
	HeaderNoRead = "X-Upstream-No-Read"
)

// Obey carries out what r's headers ask before an answer: it sleeps for
// HeaderSleep (ending early if r is cancelled) and resets the connection for
// HeaderReset. answer is false when the handler must not answer: the
// request was cancelled (cancelled is then true) or the connection reset.
func Obey(w http.ResponseWriter, r *http.Request) (answer, cancelled bool) {
	if v := r.Header.Get(HeaderSleep); v != "" {
		d, _ := time.ParseDuration(v)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return false, true
		}
	}
	if r.Header.Get(HeaderReset) != "" {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // RST, not FIN
				}
				conn.Close()
			}
		}
		return false, false
	}
	return true, false
}

// Status returns the status HeaderStatus asks for, or 200.
func Status(r *http.Request) int {
	if v := r.Header.Get(HeaderStatus); v != "" {
		if s, err := strconv.Atoi(v); err == nil {
			return s
		}
	}
	return http.StatusOK
}

// Handler obeys the headers and answers body with contentType.
func Handler(contentType string, body []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if answer, _ := Obey(w, r); !answer {
			return
		}
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(Status(r))
		_, _ = w.Write(body)
	})
}

// Fixed starts a loopback server that answers every request with body as
// application/json, with a Content-Length and nothing else (the benchmark
// upstream: as cheap as a standard-library server gets), closed when tb
// ends.
func Fixed(tb testing.TB, body []byte) *httptest.Server {
	tb.Helper()
	length := strconv.Itoa(len(body))
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{length}
		_, _ = w.Write(body)
	}))
	tb.Cleanup(up.Close)
	return up
}

// Discard is a reusable http.ResponseWriter for in-process benchmarks: it
// keeps the headers and the first status (200 once a body is written) and
// drops the body. Like net/http's own writer it has WriteString, so
// io.WriteString costs no conversion.
type Discard struct {
	H      http.Header
	Status int
}

// NewDiscard returns a Discard with an empty header map.
func NewDiscard() *Discard { return &Discard{H: http.Header{}} }

// Reset forgets the status (the headers are the caller's to clear).
func (w *Discard) Reset() { w.Status = 0 }

// Header implements http.ResponseWriter.
func (w *Discard) Header() http.Header { return w.H }

// WriteHeader implements http.ResponseWriter: the first status stays.
func (w *Discard) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
}

// Write implements http.ResponseWriter.
func (w *Discard) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return len(b), nil
}

// WriteString implements io.StringWriter.
func (w *Discard) WriteString(s string) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return len(s), nil
}

// EchoTunnel takes over w's connection as an upstream that accepted a
// WebSocket upgrade would: it answers 101 Switching Protocols and then
// echoes each line it reads as "echo <line>" until the client closes.
// Tests of upgrades put it behind the gateway to see whether a tunnel
// opened.
func EchoTunnel(w http.ResponseWriter) {
	conn, rw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprint(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	rw.Flush()
	for {
		line, err := rw.ReadString('\n')
		if err != nil {
			return
		}
		rw.WriteString("echo " + line)
		rw.Flush()
	}
}
