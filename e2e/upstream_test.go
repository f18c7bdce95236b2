package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/testupstream"
)

// Request headers the test upstream obeys (see testupstream). They are
// ordinary end-to-end headers, so the gateway forwards them.
const (
	hSleep  = testupstream.HeaderSleep
	hStatus = testupstream.HeaderStatus
	hReset  = testupstream.HeaderReset
	hNoRead = testupstream.HeaderNoRead
)

// seen is what the upstream received for one request.
type seen struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	// RequestURI is the request target exactly as the upstream received
	// it (escapes and all), which Path (decoded) hides.
	RequestURI       string      `json:"request_uri"`
	RawQuery         string      `json:"raw_query"`
	Host             string      `json:"host"`
	Header           http.Header `json:"header"`
	Body             string      `json:"body"`
	BodyErr          string      `json:"body_err,omitempty"`
	ContentLength    int64       `json:"content_length"`
	TransferEncoding []string    `json:"transfer_encoding"`
	RemoteAddr       string      `json:"remote_addr"`
	// Cancelled is set when the request's context ended before the
	// upstream answered (the gateway cancelled the upstream request).
	Cancelled bool `json:"cancelled"`
}

// upstream is a real HTTP server that echoes each request as JSON and
// records it.
type upstream struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*seen
	arrived  chan *seen // every request, when it arrives (buffered)
	finished chan *seen // every request, when the handler returns (buffered)
}

// newUpstream starts an echo upstream, closed when the test ends.
func newUpstream(t testing.TB) *upstream {
	u := &upstream{arrived: make(chan *seen, 4096), finished: make(chan *seen, 4096)}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(func() {
		u.CloseClientConnections()
		u.Close()
	})
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	s := &seen{
		Method: r.Method, Path: r.URL.Path, RequestURI: r.RequestURI, RawQuery: r.URL.RawQuery, Host: r.Host,
		Header: r.Header.Clone(), ContentLength: r.ContentLength,
		TransferEncoding: r.TransferEncoding, RemoteAddr: r.RemoteAddr,
	}
	if r.Header.Get(hNoRead) == "" {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		s.Body = string(body)
		if err != nil {
			s.BodyErr = err.Error()
		}
	}
	u.mu.Lock()
	u.requests = append(u.requests, s)
	u.mu.Unlock()
	select {
	case u.arrived <- s:
	default:
	}
	defer func() {
		select {
		case u.finished <- s:
		default:
		}
	}()

	answer, cancelled := testupstream.Obey(w, r)
	if cancelled {
		u.mu.Lock()
		s.Cancelled = true
		u.mu.Unlock()
	}
	if !answer {
		return
	}
	status := testupstream.Status(r)
	u.mu.Lock()
	b, _ := json.Marshal(s)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Upstream", "echo")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// count is the number of requests the upstream received.
func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.requests)
}

// all returns copies of the requests received so far.
func (u *upstream) all() []seen {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]seen, len(u.requests))
	for i, s := range u.requests {
		out[i] = *s
	}
	return out
}

// waitArrived waits up to d for the next request to reach the upstream.
func (u *upstream) waitArrived(t testing.TB, d time.Duration) *seen {
	t.Helper()
	select {
	case s := <-u.arrived:
		return s
	case <-time.After(d):
		t.Fatalf("no request reached the upstream within %v", d)
		return nil
	}
}

// closedAddr returns a loopback URL where nothing listens.
func closedAddr(t testing.TB) string {
	return "http://" + freePort(t)
}
