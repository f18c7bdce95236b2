package telemetry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/topk"
)

func testLimit(t testing.TB, name string, shadow bool) *ratelimit.Limit {
	t.Helper()
	l := &ratelimit.Limit{Name: name, Algorithm: ratelimit.FixedWindow,
		Rates: []ratelimit.Rate{{Limit: 10, Window: time.Second}}, Shadow: shadow}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	return l
}

// testReader reads a collection: the meter's instruments from an SDK
// manual reader, the histograms from the Metrics that aggregates them.
type testReader struct {
	rd *sdkmetric.ManualReader
	m  *Metrics // nil: no histograms
}

// newTestMetrics returns Metrics on an SDK meter with a manual reader.
func newTestMetrics(t testing.TB, o MetricsOptions) (*Metrics, *testReader) {
	t.Helper()
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := NewMetrics(mp.Meter("test"), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, &testReader{rd, m}
}

// collected is a flat view of one collection: "name{k=v,...}" → value
// (sum for counters, count for histograms, last value for gauges).
type collected map[string]float64

func collect(t *testing.T, r *testReader) (collected, map[string]float64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out, sums := collected{}, map[string]float64{}
	key := func(name string, set attribute.Set) string {
		s := name + "{"
		for i, kv := range set.ToSlice() {
			if i > 0 {
				s += ","
			}
			s += string(kv.Key) + "=" + kv.Value.String()
		}
		return s + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			switch d := md.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[key(md.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[key(md.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out[key(md.Name, p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[key(md.Name, p.Attributes)] = float64(p.Count)
					sums[key(md.Name, p.Attributes)] = p.Sum
				}
			default:
				t.Fatalf("unexpected data type %T for %s", md.Data, md.Name)
			}
		}
	}
	for _, h := range r.m.Histograms() {
		for _, p := range h.Points {
			out[key(h.Name, p.Attributes)] = float64(p.Count)
			sums[key(h.Name, p.Attributes)] = p.Sum
		}
	}
	return out, sums
}

func TestMetricsObserve(t *testing.T) {
	keys := int64(42)
	m, rd := newTestMetrics(t, MetricsOptions{LiveKeys: func() int64 { return keys }, Evictions: func() int64 { return 5 }})
	perClient, search, tight := testLimit(t, "per-client", false), testLimit(t, "search", false), testLimit(t, "tight", true)

	// 1: forwarded, both enforced limits allow, search nearly exhausted,
	//    the shadow limit would deny → shadow_limited.
	m.Observe(&proxy.Event{Route: "search", Method: "GET", Status: 200, Outcome: proxy.OutcomeForwarded,
		Hits:         []ratelimit.Hit{{Limit: perClient}, {Limit: search}, {Limit: tight}},
		Decisions:    []ratelimit.Decision{{Allowed: true, Limit: 10, Remaining: 5}, {Allowed: true, Limit: 10, Remaining: 1}, {Allowed: false, Limit: 10}},
		StoreLatency: 2 * time.Millisecond, Duration: 30 * time.Millisecond})
	// 2: limited by search.
	m.Observe(&proxy.Event{Route: "search", Method: "GET", Status: 429, Outcome: proxy.OutcomeLimited,
		Hits:         []ratelimit.Hit{{Limit: perClient}, {Limit: search}},
		Decisions:    []ratelimit.Decision{{Allowed: true, Limit: 10, Remaining: 4}, {Allowed: false, Limit: 10, RetryAfter: time.Second}},
		StoreLatency: time.Millisecond, Duration: 2 * time.Millisecond})
	// 3: store timed out; 503.
	m.Observe(&proxy.Event{Route: "search", Method: "get", Status: 503, Outcome: proxy.OutcomeStoreError,
		StoreErr: fmt.Errorf("redis: %w", context.DeadlineExceeded), StoreLatency: 50 * time.Millisecond, Duration: 51 * time.Millisecond})
	// 4: no route.
	m.Observe(&proxy.Event{Method: "POST", Status: 404, Outcome: proxy.OutcomeNoRoute, Duration: time.Millisecond})
	m.Begin()
	m.Begin()
	m.End()
	m.Upstream("search", 20*time.Millisecond)
	m.Upstream("search", 40*time.Millisecond)
	m.ClientIPFallback()
	m.Reload(true)
	m.Reload(false)
	m.Reload(false)

	got, sums := collect(t, rd)
	want := collected{
		"http.server.request.duration{http.request.method=GET,http.route=search,tollgate.outcome=shadow_limited}": 1,
		"http.server.request.duration{http.request.method=GET,http.route=search,tollgate.outcome=limited}":        1,
		"http.server.request.duration{http.request.method=_OTHER,http.route=search,tollgate.outcome=store_error}": 1,
		"http.server.request.duration{http.request.method=POST,http.route=,tollgate.outcome=no_route}":            1,
		"http.server.active_requests{}": 1,
		"tollgate.decisions{tollgate.decision=allowed,tollgate.limit=per-client,tollgate.mode=enforce}": 2,
		"tollgate.decisions{tollgate.decision=allowed,tollgate.limit=search,tollgate.mode=enforce}":     1,
		"tollgate.decisions{tollgate.decision=denied,tollgate.limit=search,tollgate.mode=enforce}":      1,
		"tollgate.decisions{tollgate.decision=denied,tollgate.limit=tight,tollgate.mode=shadow}":        1,
		"tollgate.near_limit{tollgate.limit=search}":                                                    1,
		"tollgate.store.duration{}":                        3,
		"tollgate.store.errors{error.type=timeout}":        1,
		"tollgate.upstream.duration{http.route=search}":    2,
		"tollgate.client_ip_fallback{}":                    1,
		"tollgate.config.reloads{tollgate.result=success}": 1,
		"tollgate.config.reloads{tollgate.result=failure}": 2,
		"tollgate.store.memory.keys{}":                     42,
		"tollgate.store.memory.evictions{}":                5,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected series %s = %v", k, got[k])
		}
	}
	if s := sums["tollgate.upstream.duration{http.route=search}"]; s < 0.0599 || s > 0.0601 {
		t.Errorf("upstream duration sum = %v s, want 0.06", s)
	}
	if s := sums["tollgate.store.duration{}"]; s < 0.0529 || s > 0.0531 {
		t.Errorf("store duration sum = %v s, want 0.053", s)
	}
}

func TestMetricsNil(t *testing.T) {
	var m *Metrics
	m.Observe(&proxy.Event{})
	m.Begin()
	m.End()
	m.Upstream("r", time.Second)
	m.ClientIPFallback()
	m.Reload(true)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestStoreErrKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{context.DeadlineExceeded, "timeout"},
		{fmt.Errorf("x: %w", context.Canceled), "canceled"},
		{fmt.Errorf("%w: connection refused", ratelimit.ErrStore), "store"},
		{errors.New("other"), "store"},
		{fmt.Errorf("%w: WRONGPASS invalid username-password pair or user is disabled.", ratelimit.ErrStore), "auth"},
		{fmt.Errorf("%w: NOAUTH Authentication required.", ratelimit.ErrStore), "auth"},
		{fmt.Errorf("%w: READONLY You can't write against a read only replica.", ratelimit.ErrStore), "readonly"},
		{fmt.Errorf("%w: OOM command not allowed when used memory > 'maxmemory'.", ratelimit.ErrStore), "oom"},
		{fmt.Errorf("%w: circuit breaker open", ratelimit.ErrStore), "circuit_open"},
	} {
		if got := storeErrNames[storeErrKind(tc.err)]; got != tc.want {
			t.Errorf("storeErrKind(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestMethodClass(t *testing.T) {
	for in, want := range map[string]string{"GET": "GET", "PATCH": "PATCH", "get": "_OTHER", "PROPFIND": "_OTHER", "": "_OTHER"} {
		if got := MethodClass(in); got != want {
			t.Errorf("MethodClass(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestObserveAllocs checks the hot path allocates nothing once the label
// combinations have been seen.
func TestObserveAllocs(t *testing.T) {
	m, _ := newTestMetrics(t, MetricsOptions{})
	ev := benchEvent(t)
	m.Observe(ev)
	if n := testing.AllocsPerRun(100, func() { m.Observe(ev); m.Begin(); m.End() }); n != 0 {
		t.Errorf("Observe allocates %v times per call, want 0", n)
	}
}

func benchEvent(t testing.TB) *proxy.Event {
	perClient, search := testLimit(t, "per-client", false), testLimit(t, "search", false)
	return &proxy.Event{Route: "search", Method: "GET", Status: 200, Outcome: proxy.OutcomeForwarded,
		Hits:         []ratelimit.Hit{{Limit: perClient}, {Limit: search}},
		Decisions:    []ratelimit.Decision{{Allowed: true, Limit: 10, Remaining: 5}, {Allowed: true, Limit: 10, Remaining: 1}},
		StoreLatency: 20 * time.Microsecond, Duration: 300 * time.Microsecond}
}

func BenchmarkObserve(b *testing.B) {
	b.Run("sdk", func(b *testing.B) {
		m, _ := newTestMetrics(b, MetricsOptions{})
		ev := benchEvent(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Observe(ev)
			}
		})
	})
	b.Run("noop", func(b *testing.B) {
		m, err := NewMetrics(noop.NewMeterProvider().Meter("test"), MetricsOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ev := benchEvent(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m.Observe(ev)
			}
		})
	})
}

// BenchmarkTopObserve is the top-clients observer's cost per request of
// one decision, as the request path pays it: allowed, and denied for a
// client among many (the sketch replaces its smallest entry).
func BenchmarkTopObserve(b *testing.B) {
	l := &ratelimit.Limit{Name: "api", ID: "api"}
	o := Top{T: topk.New(topk.DefaultK, nil)}
	clients := make([]string, 4096)
	for i := range clients {
		clients[i] = "10.0.0." + strconv.Itoa(i)
	}
	for _, denied := range []bool{false, true} {
		name := "allowed"
		if denied {
			name = "denied"
		}
		b.Run(name, func(b *testing.B) {
			ev := &proxy.Event{Start: time.Unix(1_700_000_000, 0), ClientKind: "ip",
				Hits: []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}, Decisions: []ratelimit.Decision{{Allowed: !denied, Limit: 100, Remaining: 50}}}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ev.Client = clients[i&4095]
				o.Observe(ev)
			}
		})
	}
}
