package proxy_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// TestShadowLogRateLimited checks that a shadow limit that keeps denying
// logs one line a second, not one per request, and counts the rest.
func TestShadowLogRateLimited(t *testing.T) {
	p := compile(t, func(c *config.Config) {
		l := limit("candidate", "fixed_window", "1/hour")
		l.Mode = "shadow"
		c.Limits = []config.LimitConfig{l}
		rt := route("demo", "/", "", "candidate")
		rt.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
		c.Routes = []config.RouteConfig{rt}
	})
	h, log := newLogged(t, p, proxy.Options{Store: memstore.New(memstore.Options{})})
	serve := func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
		if w.Code != 200 {
			t.Fatalf("status %d, want 200", w.Code)
		}
	}
	serve() // allowed by the shadow limit too
	for range 10 {
		serve() // would be denied: the first one logs
		log.advance(10 * time.Millisecond)
	}
	log.advance(time.Second)
	serve() // a second later: logs again, counting the 9 in between
	lines := log.lines()
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if !strings.Contains(lines[1], `"also_denied_since_last_line":9`) {
		t.Errorf("second line does not count the 9 suppressed denials: %s", lines[1])
	}
}

// clockedLog is a handler's JSON log and its clock, both in the test's
// hands: the clock moves only by advance.
type clockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
	now time.Time
}

func (l *clockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *clockedLog) advance(d time.Duration) { l.now = l.now.Add(d) }

// lines returns the lines logged so far.
func (l *clockedLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSpace(l.buf.String()), "\n")
}

// newLogged builds the handler of p with opts, logging JSON to the
// returned log and reading its clock (from 2026-01-01 UTC).
func newLogged(t *testing.T, p *policy.Policy, opts proxy.Options) (*proxy.Handler, *clockedLog) {
	t.Helper()
	log := &clockedLog{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	opts.Logger = slog.New(slog.NewJSONHandler(log, nil))
	opts.Now = func() time.Time { return log.now }
	h, err := proxy.New(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h, log
}

func TestStoreErrorsLoggedOncePerSecond(t *testing.T) {
	p := compile(t, func(c *config.Config) {
		c.Store.OnError = "allow"
		c.Limits = []config.LimitConfig{limit("api", "fixed_window", "2/minute")}
		rt := route("demo", "/", "", "api")
		rt.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
		c.Routes = []config.RouteConfig{rt}
	})
	h, log := newLogged(t, p, proxy.Options{Store: &failingStore{}})
	for range 5 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
		log.advance(100 * time.Millisecond)
	}
	log.advance(time.Second)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
	lines := log.lines()
	if len(lines) != 2 || !strings.Contains(lines[0], "connection refused") || !strings.Contains(lines[1], `"also_failed_since_last_line":4`) {
		t.Fatalf("want 2 lines, the second counting 4 failures in between; got:\n%s", strings.Join(lines, "\n"))
	}
}

// TestUpstreamErrorLogThrottled: an upstream that cannot be reached fails
// every request (502 each), but the log gets one line a second, the next
// one counting the failures in between.
func TestUpstreamErrorLogThrottled(t *testing.T) {
	p := compile(t, func(c *config.Config) {
		c.Routes = []config.RouteConfig{route("api", "/", "http://127.0.0.1:1")}
	})
	h, log := newLogged(t, p, proxy.Options{Store: memstore.New(memstore.Options{})})
	serve := func() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
		if w.Code != http.StatusBadGateway {
			t.Fatalf("status %d, want 502", w.Code)
		}
	}
	for range 10 {
		serve() // the first one logs
		log.advance(10 * time.Millisecond)
	}
	log.advance(time.Second)
	serve() // a second later: logs again, counting the 9 in between
	lines := log.lines()
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if !strings.Contains(lines[1], `"also_failed_since_last_line":9`) {
		t.Fatalf("second line does not count the 9 failures in between: %s", lines[1])
	}
}
