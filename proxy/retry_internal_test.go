package proxy

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/tollgate/gateway/internal/policytest"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// Which requests may be tried again at all, whatever their body: the
// idempotent methods, without an upgrade or Expect: 100-continue.
func TestRetryable(t *testing.T) {
	for _, c := range []struct {
		method string
		hdr    http.Header
		want   bool
	}{
		{"GET", nil, true},
		{"HEAD", nil, true},
		{"OPTIONS", nil, true},
		{"PUT", nil, true},
		{"DELETE", nil, true},
		{"POST", nil, false},
		{"PATCH", nil, false},
		{"TRACE", nil, false},
		{"CONNECT", nil, false},
		{"get", nil, false}, // methods are case-sensitive
		{"GET", http.Header{"Upgrade": {"websocket"}, "Connection": {"Upgrade"}}, false},
		{"GET", http.Header{"Expect": {"100-continue"}}, false},
		{"PUT", http.Header{"Expect": {" 100-Continue "}}, false},
		{"PUT", http.Header{"Expect": {"something-else"}}, true},
	} {
		r := &http.Request{Method: c.method, Header: c.hdr}
		if r.Header == nil {
			r.Header = http.Header{}
		}
		if got := retryable(r); got != c.want {
			t.Errorf("%s %v: retryable %v, want %v", c.method, c.hdr, got, c.want)
		}
	}
}

// No target left: 503 with Retry-After: 1 and a problem naming the
// route.
func TestNoTargetAnswer(t *testing.T) {
	h := &Handler{log: slog.New(slog.DiscardHandler)}
	q := &request{rt: &policy.Route{Name: "api"}}
	rec := httptest.NewRecorder()
	q.w = statusWriter{ResponseWriter: rec, q: q}
	h.upstreamError(&q.w, httptest.NewRequest("GET", "/", nil), errNoTarget)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("status %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	var p struct{ Detail string }
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || !strings.Contains(p.Detail, `"api"`) {
		t.Fatalf("body %s (%v)", rec.Body, err)
	}
}

// The target's base path joined to the forwarded path as SetURL joins
// them, escapes kept.
func TestJoinURLPath(t *testing.T) {
	for _, c := range []struct {
		base, path, raw   string
		wantPath, wantRaw string
	}{
		{"", "/x", "", "/x", ""},
		{"/", "/x", "", "/x", ""},
		{"/v2", "/x", "", "/v2/x", ""},
		{"/v2/", "/x/y", "", "/v2/x/y", ""},
		{"/v2", "/a/b", "/a%2Fb", "/v2/a/b", "/v2/a%2Fb"},
		{"/p%20q", "/x", "", "/p q/x", ""},
		{"/p%2Fq", "/x", "", "/p/q/x", "/p%2Fq/x"},
	} {
		u, err := url.Parse("http://h" + c.base)
		if err != nil {
			t.Fatal(err)
		}
		p, raw := joinURLPath(u, c.path, c.raw)
		if p != c.wantPath || raw != c.wantRaw {
			t.Errorf("join(%q, %q, %q) = %q, %q; want %q, %q", c.base, c.path, c.raw, p, raw, c.wantPath, c.wantRaw)
		}
		// SetURL's own join, the reference.
		in := httptest.NewRequest("GET", "/", nil)
		in.URL.Path, in.URL.RawPath = c.path, c.raw
		out := in.Clone(in.Context())
		pr := &httputil.ProxyRequest{In: in, Out: out}
		pr.SetURL(u)
		if out.URL.Path != p || out.URL.RawPath != raw {
			t.Errorf("join(%q, %q, %q) = %q, %q; SetURL makes %q, %q", c.base, c.path, c.raw, p, raw, out.URL.Path, out.URL.RawPath)
		}
	}
}

// The transports of https target names are kept while a route names
// them: a reload that names others drops them (with their idle
// connections), so that names changing at every reload do not pile up.
func TestNamedTransportsPruned(t *testing.T) {
	cfgWith := func(name string) *policy.Policy {
		return policytest.Compile(t, func(cfg *config.Config) {
			rt := config.DefaultRoute()
			rt.Name, rt.PathPrefix = "api", "/"
			rt.Upstreams = []config.TargetConfig{{URL: "https://" + name + ":8443", Weight: 1}, {URL: "http://10.0.0.1", Weight: 1}}
			cfg.Routes = []config.RouteConfig{rt}
		})
	}
	h, err := New(cfgWith("v0.example"), Options{Store: memstore.New(memstore.Options{}), Transport: NewTransport()})
	if err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		h.named.Range(func(any, any) bool { n++; return true })
		return n
	}
	for i := range 50 {
		name := fmt.Sprintf("v%d.example", i)
		if err := h.Swap(cfgWith(name)); err != nil {
			t.Fatal(err)
		}
		h.namedTransport(name) // a request to the name's address
	}
	if n := count(); n != 1 {
		t.Fatalf("after 50 reloads, each naming another https target, %d named transports are kept, want 1", n)
	}
	if _, ok := h.named.Load("v49.example"); !ok {
		t.Fatal("the name in force lost its transport")
	}
}

// Retry bodies are buffered within maxRetryBuffered in all: a body that
// finds no room is streamed intact and its request not retried; the
// room a body held is given back, and a chunked body holds only its
// length once read.
func TestRetryBufferBound(t *testing.T) {
	h := &Handler{}
	put := func(body string, chunked bool) *http.Request {
		r := httptest.NewRequest("PUT", "/", strings.NewReader(body))
		if chunked {
			r.ContentLength = -1
		}
		return r
	}
	b, retries, held, err := h.bufferBody(put("hello", true), 1<<20, 2)
	if err != nil || string(b) != "hello" || retries != 2 || held != 5 || h.retryBuffered.Load() != 5 {
		t.Fatalf("chunked body: %q, %d retries, held %d, total %d, %v", b, retries, held, h.retryBuffered.Load(), err)
	}
	h.retryBuffered.Add(-held)
	h.retryBuffered.Store(maxRetryBuffered - 3)
	r := put("hello", false)
	b, retries, held, err = h.bufferBody(r, 1<<20, 2)
	if err != nil || b != nil || retries != 0 || held != 0 || h.retryBuffered.Load() != maxRetryBuffered-3 {
		t.Fatalf("no room: %q, %d retries, held %d, total %d, %v", b, retries, held, h.retryBuffered.Load(), err)
	}
	if rest, _ := io.ReadAll(r.Body); string(rest) != "hello" {
		t.Fatalf("the unbuffered body reads %q, want it intact", rest)
	}
	// Too large after all (chunked, beyond the limit): the room is given back.
	h.retryBuffered.Store(0)
	r = put("0123456789", true)
	if b, retries, _, _ = h.bufferBody(r, 4, 2); b != nil || retries != 0 || h.retryBuffered.Load() != 0 {
		t.Fatalf("beyond the limit: %q, %d retries, total %d", b, retries, h.retryBuffered.Load())
	}
	if rest, _ := io.ReadAll(r.Body); string(rest) != "0123456789" {
		t.Fatalf("the body beyond the limit reads %q, want it intact", rest)
	}
}
