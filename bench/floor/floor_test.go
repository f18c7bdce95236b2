package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tollgate/gateway/internal/policytest"
	"github.com/tollgate/gateway/internal/testupstream"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/telemetry"
	"github.com/tollgate/gateway/telemetry/sdkproducer"
)

// TestTransportMatchesTollgate keeps the floor's upstream transport the
// one Tollgate uses: a floor with other pooling or timeouts would measure
// another stack.
func TestTransportMatchesTollgate(t *testing.T) {
	a, b := newTransport(), proxy.NewTransport()
	type fields struct {
		proxy                                           bool
		maxIdle, maxIdlePerHost, maxPerHost             int
		idle, tlsHandshake, expectContinue, respHeaders time.Duration
		h2, noKeepAlive, noCompression                  bool
		readBuf, writeBuf                               int
	}
	get := func(t *http.Transport) fields {
		return fields{t.Proxy != nil, t.MaxIdleConns, t.MaxIdleConnsPerHost, t.MaxConnsPerHost,
			t.IdleConnTimeout, t.TLSHandshakeTimeout, t.ExpectContinueTimeout, t.ResponseHeaderTimeout,
			t.ForceAttemptHTTP2, t.DisableKeepAlives, t.DisableCompression, t.ReadBufferSize, t.WriteBufferSize}
	}
	if fa, fb := get(a), get(b); fa != fb {
		t.Errorf("floor transport %+v, Tollgate's %+v", fa, fb)
	}
}

// tollgate is Tollgate's handler in the peer benchmark's configuration:
// identity from X-API-Key or the IP, one per-client sliding-window-counter
// limit, ietf headers.
func tollgate(t testing.TB, upstream, rate string, opts proxy.Options) http.Handler {
	t.Helper()
	p := policytest.Compile(t, func(c *config.Config) {
		c.Identity.Sources = []string{"api_key", "ip"}
		l := config.DefaultLimit()
		l.Name, l.Rates, l.Algorithm = "per-client", []string{rate}, "sliding_window_counter"
		c.Limits = []config.LimitConfig{l}
		c.Gateway.Limits = []string{"per-client"}
		rt := config.DefaultRoute()
		rt.Name, rt.Upstream = "upstream", upstream
		c.Routes = []config.RouteConfig{rt}
	})
	store := memstore.New(memstore.Options{})
	t.Cleanup(func() { store.Close() })
	opts.Store, opts.Local = store, store
	h, err := proxy.New(p, opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// digits stands for every number in a header value or body: the two
// programs count on different clocks and windows.
var digits = regexp.MustCompile(`[0-9]+`)

// hexID is a generated request id: 128 bits in hex.
var hexID = regexp.MustCompile(`^[0-9a-f]{32}$`)

type answer struct {
	status int
	header map[string]string
	body   string
}

func get(t *testing.T, h http.Handler) answer {
	t.Helper()
	r := httptest.NewRequest("GET", "http://gateway/x", nil)
	r.Header.Set("X-API-Key", "k1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	res := w.Result()
	body, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, header: map[string]string{}, body: digits.ReplaceAllString(string(body), "N")}
	for k, v := range res.Header {
		if k == "Date" {
			continue
		}
		a.header[k] = digits.ReplaceAllString(strings.Join(v, ","), "N")
		if k == "X-Request-Id" {
			// A fresh id per answer: only its shape can match.
			a.header[k] = hexID.ReplaceAllString(strings.Join(v, ","), "ID")
		}
	}
	return a
}

// TestAnswersMatchTollgate sends the same two requests to the floor and to
// Tollgate, both under a limit of one request per hour: the allowed
// answer and the 429 must carry the same headers and a body of the same
// shape, so that the benchmark compares the same work on the wire.
func TestAnswersMatchTollgate(t *testing.T) {
	up := testupstream.Fixed(t, []byte("ok\n"))
	tg := tollgate(t, up.URL, "1/hour", proxy.Options{})
	fl, err := newHandler(up.URL, "round_robin", "per-client", 1, time.Hour, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	for i, what := range []string{"allowed", "denied"} {
		a, b := get(t, fl), get(t, tg)
		if want := []int{200, 429}[i]; a.status != want || b.status != want {
			t.Fatalf("%s: floor %d, tollgate %d, want %d", what, a.status, b.status, want)
		}
		ka, kb := keys(a.header), keys(b.header)
		if !slices.Equal(ka, kb) {
			t.Errorf("%s: floor headers %v, tollgate %v", what, ka, kb)
		}
		for _, k := range kb {
			if a.header[k] != b.header[k] {
				t.Errorf("%s: %s: floor %q, tollgate %q", what, k, a.header[k], b.header[k])
			}
		}
		if a.body != b.body {
			t.Errorf("%s: floor body %q, tollgate %q", what, a.body, b.body)
		}
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestLimiter checks the fixed window against a hand-computed sequence.
func TestLimiter(t *testing.T) {
	l := &limiter{rate: 2, per: time.Second, windows: map[string]*window{}}
	t0 := time.Unix(1000, 0)
	steps := []struct {
		key       string
		at        time.Duration
		ok        bool
		remaining int64
		reset     time.Duration
	}{
		{"a", 0, true, 1, time.Second},
		{"a", 100 * time.Millisecond, true, 0, 900 * time.Millisecond},
		{"a", 999 * time.Millisecond, false, 0, time.Millisecond},
		{"b", 999 * time.Millisecond, true, 1, time.Second},
		{"a", time.Second, true, 1, time.Second},
	}
	for i, s := range steps {
		rem, reset, ok := l.take(s.key, t0.Add(s.at))
		if ok != s.ok || rem != s.remaining || reset != s.reset {
			t.Errorf("step %d: got (%d, %s, %v), want (%d, %s, %v)", i, rem, reset, ok, s.remaining, s.reset, s.ok)
		}
	}
}

// withMetrics returns options whose observer is Tollgate's metrics on the
// OpenTelemetry SDK read by the Prometheus exporter, as the gateway wires
// them (metrics are always on in the gateway).
func withMetrics(tb testing.TB) proxy.Options {
	tb.Helper()
	var hist sdkproducer.Source
	exp, err := otelprom.New(otelprom.WithRegisterer(prometheus.NewRegistry()), otelprom.WithoutScopeInfo(),
		otelprom.WithProducer(hist.Producer("github.com/tollgate/gateway", metricdata.CumulativeTemporality)))
	if err != nil {
		tb.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	tb.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := telemetry.NewMetrics(mp.Meter("github.com/tollgate/gateway"), telemetry.MetricsOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	hist.Set(m)
	return proxy.Options{Observer: m}
}

// BenchmarkFloor puts the floor's handler beside Tollgate's (without and
// with metrics) on the peer benchmark's two paths, called in process:
// "allow" forwards to an upstream over loopback under a limit that never
// denies, "deny" answers the hot key's 429 with no I/O at all.
//
//	go test -run '^$' -bench Floor -benchmem -count 6 ./bench/floor
func BenchmarkFloor(b *testing.B) {
	up := testupstream.Fixed(b, []byte(`{"ok":true,"service":"bench-upstream"}`+"\n"))
	for _, path := range []struct {
		name, rate string
		n          int64
		per        time.Duration
		status     int
	}{
		{"allow", "1000000000/second", 1000000000, time.Second, http.StatusOK},
		{"deny", "1/hour", 1, time.Hour, http.StatusTooManyRequests},
	} {
		fl, err := newHandler(up.URL, "round_robin", "per-client", path.n, path.per, time.Now)
		if err != nil {
			b.Fatal(err)
		}
		for _, gw := range []struct {
			name string
			h    func(b *testing.B) http.Handler
		}{
			{"floor", func(*testing.B) http.Handler { return fl }},
			{"tollgate", func(b *testing.B) http.Handler { return tollgate(b, up.URL, path.rate, proxy.Options{}) }},
			{"tollgate-metrics", func(b *testing.B) http.Handler { return tollgate(b, up.URL, path.rate, withMetrics(b)) }},
		} {
			b.Run(path.name+"/"+gw.name, func(b *testing.B) {
				h := gw.h(b)
				r := httptest.NewRequest("GET", "/v1/items", nil)
				r.RemoteAddr = "127.0.0.1:40000"
				r.Header.Set("X-API-Key", "hot-key")
				w := testupstream.NewDiscard()
				h.ServeHTTP(w, r) // the deny path's one allowed request
				b.ReportAllocs()
				for b.Loop() {
					clear(w.H)
					w.Reset()
					h.ServeHTTP(w, r)
					if w.Status != path.status {
						b.Fatalf("status %d, want %d", w.Status, path.status)
					}
				}
			})
		}
	}
}

// TestFloorBalances: with two upstreams, each balance spreads requests
// over both (round robin exactly in turn).
func TestFloorBalances(t *testing.T) {
	var hits [2]atomic.Int64
	var urls []string
	for i := range hits {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits[i].Add(1) }))
		defer up.Close()
		urls = append(urls, up.URL)
	}
	for _, bal := range []string{"round_robin", "least_request"} {
		hits[0].Store(0)
		hits[1].Store(0)
		fl, err := newHandler(strings.Join(urls, ","), bal, "per-client", 0, time.Second, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		for range 40 {
			w := httptest.NewRecorder()
			fl.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
			if w.Code != 200 {
				t.Fatalf("%s: status %d", bal, w.Code)
			}
		}
		a, b := hits[0].Load(), hits[1].Load()
		if a+b != 40 || bal == "round_robin" && a != 20 || a == 0 || b == 0 {
			t.Fatalf("%s: %d and %d requests", bal, a, b)
		}
	}
	if _, err := newHandler(strings.Join(urls, ","), "random", "x", 0, time.Second, time.Now); err == nil {
		t.Fatal("an unknown balance was accepted")
	}
}
