package telemetry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
)

func newTestTracing(t testing.TB) (*Tracing, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return NewTracing(tp, nil), exp
}

func attrMap(kvs []attribute.KeyValue) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value.String()
	}
	return m
}

func TestTracingRequest(t *testing.T) {
	tr, exp := newTestTracing(t)
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	r := httptest.NewRequest("GET", "/v1/search?q=1", nil)
	r.Header.Set("Traceparent", parent)

	ctx, end := tr.StartRequest(r.Context(), r)
	_, endStore := tr.StartStore(ctx, 2)
	endStore(context.DeadlineExceeded)
	up := http.Header{"Traceparent": {"00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01"}}
	tr.Inject(ctx, up)
	perClient, search, tight := testLimit(t, "per-client", false), testLimit(t, "search", false), testLimit(t, "tight", true)
	end(&proxy.Event{Route: "search", Method: "GET", Status: 429, Outcome: proxy.OutcomeLimited,
		Hits: []ratelimit.Hit{{Limit: perClient}, {Limit: search}, {Limit: tight}},
		Decisions: []ratelimit.Decision{{Allowed: false, RetryAfter: time.Second}, {Allowed: false, RetryAfter: 7 * time.Second},
			{Allowed: false}}})

	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want 2", len(spans))
	}
	store, server := spans[0], spans[1]
	if server.Name != "GET search" || server.SpanKind != trace.SpanKindServer {
		t.Errorf("server span = %q kind %v, want \"GET search\" server", server.Name, server.SpanKind)
	}
	if got := server.Parent.TraceID().String(); got != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("server span parent trace = %s, want the client's", got)
	}
	a := attrMap(server.Attributes)
	for k, v := range map[attribute.Key]string{AttrRoute: "search", AttrStatus: "429", AttrOutcome: "limited",
		AttrDecision: "denied", AttrLimit: "search", AttrShadowDenied: `["tight"]`, AttrMethod: "GET", AttrPath: "/v1/search"} {
		if a[k] != v {
			t.Errorf("server span %s = %q, want %q", k, a[k], v)
		}
	}
	if server.Status.Code == codes.Error {
		t.Errorf("a 429 must not mark the server span as an error")
	}
	if store.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Errorf("store span is not a child of the server span")
	}
	if store.Status.Code != codes.Error || attrMap(store.Attributes)[AttrErrorType] != "timeout" {
		t.Errorf("store span status %v attrs %v, want error timeout", store.Status, store.Attributes)
	}
	want := "00-" + server.SpanContext.TraceID().String() + "-" + server.SpanContext.SpanID().String() + "-01"
	if got := up.Get("Traceparent"); got != want {
		t.Errorf("upstream traceparent = %q, want %q", got, want)
	}
}

func TestTracingAllowedBindingLimit(t *testing.T) {
	tr, exp := newTestTracing(t)
	r := httptest.NewRequest("BREW", "/x", nil)
	_, end := tr.StartRequest(r.Context(), r)
	a, b := testLimit(t, "a", false), testLimit(t, "b", false)
	end(&proxy.Event{Route: "", Method: "BREW", Status: 502, Outcome: proxy.OutcomeUpstreamError,
		Hits:      []ratelimit.Hit{{Limit: a}, {Limit: b}},
		Decisions: []ratelimit.Decision{{Allowed: true, Limit: 10, Remaining: 5}, {Allowed: true, Limit: 100, Remaining: 20}}})
	s := exp.GetSpans()[0]
	if s.Name != "HTTP" {
		t.Errorf("span name %q, want HTTP for an unknown method", s.Name)
	}
	m := attrMap(s.Attributes)
	if m[AttrDecision] != "allowed" || m[AttrLimit] != "b" || m[AttrMethod] != "_OTHER" {
		t.Errorf("attrs %v, want decision allowed, binding limit b, method _OTHER", m)
	}
	if s.Status.Code != codes.Error {
		t.Errorf("a 502 must mark the server span as an error")
	}
}

func TestTracingOff(t *testing.T) {
	for name, tr := range map[string]*Tracing{"nil": NewTracing(nil, nil), "noop": NewTracing(noop.NewTracerProvider(), nil)} {
		if tr != nil || tr.Enabled() {
			t.Fatalf("%s: NewTracing = %v, want nil (off)", name, tr)
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		ctx, end := tr.StartRequest(r.Context(), r)
		if ctx != r.Context() {
			t.Errorf("%s: StartRequest changed the context", name)
		}
		sctx, endStore := tr.StartStore(ctx, 1)
		if sctx != ctx {
			t.Errorf("%s: StartStore changed the context", name)
		}
		endStore(errors.New("x"))
		h := http.Header{}
		tr.Inject(ctx, h)
		if len(h) != 0 {
			t.Errorf("%s: Inject wrote %v", name, h)
		}
		end(&proxy.Event{})
		// The proxy hands its pooled event to the end function.
		ev := &proxy.Event{}
		if n := testing.AllocsPerRun(100, func() {
			ctx, end := tr.StartRequest(r.Context(), r)
			_, endStore := tr.StartStore(ctx, 1)
			endStore(nil)
			tr.Inject(ctx, h)
			end(ev)
		}); n != 0 {
			t.Errorf("%s: tracing off allocates %v times per request", name, n)
		}
	}
}

// BenchmarkTracing measures the helpers for one request: server span,
// store span, injection, end.
func BenchmarkTracing(b *testing.B) {
	ev := benchEvent(b)
	run := func(b *testing.B, tr *Tracing) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r := httptest.NewRequest("GET", "/v1/search", nil)
			h := http.Header{}
			for pb.Next() {
				ctx, end := tr.StartRequest(r.Context(), r)
				_, endStore := tr.StartStore(ctx, 2)
				endStore(nil)
				tr.Inject(ctx, h)
				end(ev)
			}
		})
	}
	b.Run("off", func(b *testing.B) { run(b, NewTracing(noop.NewTracerProvider(), nil)) })
	b.Run("sdk-never-sample", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
		defer tp.Shutdown(context.Background())
		run(b, NewTracing(tp, nil))
	})
	b.Run("sdk-always-sample", func(b *testing.B) {
		// A batcher over a discarding exporter: the cost on the request
		// path, without the export itself.
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithBatcher(discard{}, sdktrace.WithMaxQueueSize(1<<16)))
		defer tp.Shutdown(context.Background())
		run(b, NewTracing(tp, nil))
	})
}

type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

func TestObservers(t *testing.T) {
	m, rd := newTestMetrics(t, MetricsOptions{})
	Observers{m, m}.Observe(&proxy.Event{Route: "r", Method: "GET", Outcome: proxy.OutcomeForwarded})
	got, _ := collect(t, rd)
	if v := got["http.server.request.duration{http.request.method=GET,http.route=r,tollgate.outcome=forwarded}"]; v != 2 {
		t.Errorf("fan-out recorded %v requests, want 2", v)
	}
}
