package limittest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// Result is the outcome of a run.
type Result struct {
	// Cases is the number of cases run; Requests the number of requests
	// sent.
	Cases, Requests int
	// Failures lists every step whose responses differed from its
	// expectation, in file order.
	Failures []Failure
	// Passed names the cases that passed, in file order.
	Passed []string
}

// OK reports whether every case passed.
func (r *Result) OK() bool { return len(r.Failures) == 0 }

// Failure is one step whose responses differed from its expectation.
type Failure struct {
	Case    string
	Step    int           // index in the case's steps
	At      time.Duration // the step's offset
	Request string        // "GET /demo ×5"
	// Diffs are the differences, one a line: what was wanted, what came.
	Diffs []string
}

// Run runs every case of f through a request handler serving p. Each case
// gets a fresh in-memory store and its own virtual clock; upstream routes
// are answered by a stub in the process (upstreamStub), so nothing
// reaches the network. A run is deterministic.
func Run(ctx context.Context, p *policy.Policy, f *File) (*Result, error) {
	res := &Result{}
	for i := range f.Cases {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		n, err := runCase(ctx, p, &f.Cases[i], res)
		res.Requests += n
		if err != nil {
			return res, fmt.Errorf("case %q: %w", f.Cases[i].Name, err)
		}
		res.Cases++
	}
	return res, nil
}

// clock is a case's virtual clock.
type clock struct{ now atomic.Int64 }

func (c *clock) Now() time.Time { return time.Unix(0, c.now.Load()) }

func runCase(ctx context.Context, p *policy.Policy, c *Case, res *Result) (int, error) {
	store := memstore.New(memstore.Options{MaxKeys: 1 << 16, MaxBytes: 64 << 20})
	defer store.Close()
	clk := &clock{}
	clk.now.Store(c.start.UnixNano())
	h, err := proxy.New(p, proxy.Options{
		Store:     store,
		Local:     store,
		Now:       clk.Now,
		WallNow:   clk.Now,
		Transport: upstreamStub{},
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return 0, err
	}
	sent := 0
	failed := false
	for j := range c.Steps {
		s := &c.Steps[j]
		clk.now.Store(c.start.Add(s.at).UnixNano())
		var diffs []string
		var last *httptest.ResponseRecorder
		for k := 0; k < s.Request.Count; k++ {
			if err := ctx.Err(); err != nil {
				return sent, err
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, s.Request.build(ctx))
			sent++
			last = rec
			if want, ok := s.Expect.statusAt(k); ok && rec.Code != want {
				diffs = append(diffs, fmt.Sprintf("request %d of %d: status: want %d, got %d%s",
					k+1, s.Request.Count, want, rec.Code, because(rec)))
			}
		}
		diffs = append(diffs, s.Expect.checkLast(last.Result().Header, s.Request.Count)...)
		if len(diffs) > 0 {
			failed = true
			res.Failures = append(res.Failures, Failure{Case: c.Name, Step: j, At: s.at, Request: s.Request.describe(), Diffs: diffs})
		}
	}
	if !failed {
		res.Passed = append(res.Passed, c.Name)
	}
	return sent, nil
}

// because is the detail of a problem response, to say why a status came:
// ` (limit "per-client": ...)`.
func because(rec *httptest.ResponseRecorder) string {
	if rec.Code < 400 || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/problem+json") {
		return ""
	}
	b := rec.Body.String()
	if i := strings.Index(b, `"detail":`); i >= 0 {
		d := b[i+len(`"detail":`):]
		if uq, err := strconv.QuotedPrefix(d); err == nil {
			if s, err := strconv.Unquote(uq); err == nil {
				return " (" + s + ")"
			}
		}
	}
	return ""
}

// statusAt is the status request k must get, if one is expected.
func (e *Expect) statusAt(k int) (int, bool) {
	switch len(e.Status) {
	case 0:
		return 0, false
	case 1:
		return e.Status[0], true
	default:
		return e.Status[k], true
	}
}

// checkLast compares the last response's headers with the expectation.
func (e *Expect) checkLast(h http.Header, count int) []string {
	var diffs []string
	which := "response"
	if count > 1 {
		which = fmt.Sprintf("request %d of %d", count, count)
	}
	got := func(name string) string {
		if v, ok := h[http.CanonicalHeaderKey(name)]; ok {
			return strconv.Quote(strings.Join(v, ", "))
		}
		return "no such header"
	}
	if e.RetryAfter != nil {
		if want := strconv.Itoa(*e.RetryAfter); h.Get("Retry-After") != want {
			diffs = append(diffs, fmt.Sprintf("%s: Retry-After: want %q, got %s", which, want, got("Retry-After")))
		}
	}
	for _, name := range sortedKeys(e.Headers) {
		want := e.Headers[name]
		v, ok := h[http.CanonicalHeaderKey(name)]
		if !ok || strings.Join(v, ", ") != want {
			diffs = append(diffs, fmt.Sprintf("%s: header %s: want %q, got %s", which, name, want, got(name)))
		}
	}
	for _, name := range e.AbsentHeaders {
		if _, ok := h[http.CanonicalHeaderKey(name)]; ok {
			diffs = append(diffs, fmt.Sprintf("%s: header %s: want none, got %s", which, name, got(name)))
		}
	}
	return diffs
}

// build makes the step's request.
func (r *Request) build(ctx context.Context) *http.Request {
	var body *strings.Reader
	if r.Body != "" {
		body = strings.NewReader(r.Body)
	}
	var req *http.Request
	if body != nil {
		req = httptest.NewRequestWithContext(ctx, r.Method, "http://"+r.Host+r.Path, body)
	} else {
		req = httptest.NewRequestWithContext(ctx, r.Method, "http://"+r.Host+r.Path, nil)
	}
	req = req.WithContext(context.WithValue(req.Context(), upstreamStatus{}, r.UpstreamStatus))
	req.RemoteAddr = remoteAddr(r.RemoteAddr)
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	if v, ok := r.Headers["Host"]; ok {
		req.Host = v
	}
	return req
}

// remoteAddr adds a port to a bare IP, as net/http's RemoteAddr has one.
func remoteAddr(s string) string {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 41000).String()
	}
	return s
}

// upstreamStub answers every upstream request in the process with the
// step's upstream_status (200 by default) and an empty body: a limit test
// checks the gateway's decisions, not an upstream's.
type upstreamStub struct{}

// upstreamStatus carries a step's upstream_status to the stub.
type upstreamStatus struct{}

func (upstreamStub) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
	code := http.StatusOK
	if c, ok := r.Context().Value(upstreamStatus{}).(int); ok {
		code = c
	}
	return &http.Response{
		Status: strconv.Itoa(code) + " " + http.StatusText(code), StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Length": {"0"}}, Body: http.NoBody, Request: r, ContentLength: 0,
	}, nil
}
