package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// The probes of plain http:// targets.
//
// http.Transport serves each connection with a read and a write goroutine
// of its own, so a request on a kept connection is three goroutine
// hand-offs around its two system calls; at 200 probes a second that was
// most of what health checks cost besides the system calls
// (docs/benchmarks/health-checks.md). A plain HTTP/1.1 probe needs none
// of it: the probe's goroutine writes the request on the target's kept
// connection and reads the answer with http.ReadResponse. h2c and https
// targets stay on http.Transport (HTTP/2 framing, TLS).

// h1Conn is a target's kept connection. r counts what one probe may read:
// headers and the body bound, so a target cannot make a probe buffer more.
type h1Conn struct {
	c  net.Conn
	r  *countingReader
	br *bufio.Reader
}

type countingReader struct {
	r    io.Reader
	left int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

var errTooLarge = errors.New("answer larger than the probe reads (headers over 64 KiB)")

// h1Conns keeps the connections of one Pool's plain-HTTP targets between
// probes. A probe takes its target's connection and gives it back when
// the exchange left it reusable (a target has one probe in flight, so a
// connection has one user).
type h1Conns struct {
	mu    sync.Mutex
	conns map[*Target]*h1Conn
}

func (h *h1Conns) take(t *Target) *h1Conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.conns[t]
	delete(h.conns, t)
	return c
}

func (h *h1Conns) put(t *Target, c *h1Conn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conns == nil {
		h.conns = map[*Target]*h1Conn{}
	}
	h.conns[t] = c
}

// prune closes the kept connections of targets not in keep (gone from
// the Pool: a DNS answer that changed); nil keep closes all.
func (h *h1Conns) prune(keep []*Target) {
	in := make(map[*Target]bool, len(keep))
	for _, t := range keep {
		in[t] = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for t, c := range h.conns {
		if !in[t] {
			c.c.Close()
			delete(h.conns, t)
		}
	}
}

// probeH1 is probe for a plain http:// target, over its kept connection
// (dialled when there is none). A kept connection that fails before any
// answer (the target closed it while idle) is replaced by a fresh one
// once, as http.Transport retries an idempotent request.
func probeH1(ctx context.Context, conns *h1Conns, t *Target, hc *HealthCheck) error {
	ctx, cancel := context.WithTimeout(ctx, hc.Timeout)
	defer cancel()
	req := "GET " + hc.Path + " HTTP/1.1\r\nHost: " + t.Host + "\r\nUser-Agent: " + probeUserAgent + "\r\n\r\n"
	c := conns.take(t)
	for attempt := 0; ; attempt++ {
		reused := c != nil
		if c == nil {
			nc, err := GuardedDial(&net.Dialer{KeepAlive: 30 * time.Second})(ctx, "tcp", t.URL.Host)
			if err != nil {
				return timeoutOr(ctx, hc, err)
			}
			cr := &countingReader{r: nc}
			c = &h1Conn{c: nc, r: cr, br: bufio.NewReaderSize(cr, 4<<10)}
		}
		keep, answered, err := exchange(ctx, c, req)
		if keep && err == nil {
			conns.put(t, c)
		} else {
			c.c.Close()
		}
		if err != nil && reused && !answered && attempt == 0 && ctx.Err() == nil {
			c = nil
			continue
		}
		if err != nil {
			return timeoutOr(ctx, hc, err)
		}
		return nil
	}
}

// exchange sends req on c and reads the answer: its status decides, the
// body is read up to probeBodyLimit. keep reports whether c may carry the
// next probe; answered whether any of the answer arrived.
func exchange(ctx context.Context, c *h1Conn, req string) (keep, answered bool, err error) {
	deadline, _ := ctx.Deadline()
	c.c.SetDeadline(deadline)
	// A Pool that stops cancels ctx: the read ends at once.
	stop := context.AfterFunc(ctx, func() { c.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c.r.left = probeHeaderLimit + 2*probeBodyLimit // the body's chunk framing too
	if _, err := io.WriteString(c.c, req); err != nil {
		return false, false, err
	}
	if _, err := c.br.Peek(1); err != nil {
		return false, false, err
	}
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return false, true, err
	}
	n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, probeBodyLimit+1))
	if err == nil && n > probeBodyLimit {
		// Past the bound the connection is closed rather than drained.
		err = errBodyBound
	}
	resp.Body.Close()
	keep = err == nil && !resp.Close && c.br.Buffered() == 0
	if resp.StatusCode < 200 || resp.StatusCode > 399 {
		return keep, true, errStatus(resp.StatusCode)
	}
	if err == errBodyBound {
		return false, true, nil // the status passed; the rest is not read
	}
	if err != nil {
		return false, true, fmt.Errorf("reading the body: %w", err)
	}
	return keep, true, nil
}

var errBodyBound = errors.New("body beyond the probe's bound")

// timeoutOr names a probe that ran out of time by its timeout.
func timeoutOr(ctx context.Context, hc *HealthCheck, err error) error {
	var ne net.Error
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("no answer within %s", hc.Timeout)
	}
	return err
}
