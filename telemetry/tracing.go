package telemetry

import (
	"context"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tollgate/gateway/proxy"
)

// TracerName is the instrumentation scope of Tollgate's spans.
const TracerName = "github.com/tollgate/gateway"

// Span attribute keys besides those shared with metrics.
const (
	AttrStatus       = attribute.Key("http.response.status_code")
	AttrPath         = attribute.Key("url.path")
	AttrShadowDenied = attribute.Key("tollgate.shadow_denied")
	AttrStoreHits    = attribute.Key("tollgate.store.hits")
)

// Tracing starts Tollgate's spans: one server span per request, a child
// span per store call, and W3C trace context injected into upstream
// requests. A nil *Tracing is tracing off: every method returns at once,
// allocates nothing and leaves contexts and headers untouched. Tracing is
// safe for concurrent use.
type Tracing struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// NewTracing returns the tracing helpers for tp, or nil (tracing off) when
// tp is nil or the API's no-op provider. prop extracts the caller's trace
// context and injects ours upstream; nil means W3C trace context and
// baggage.
func NewTracing(tp trace.TracerProvider, prop propagation.TextMapPropagator) *Tracing {
	if tp == nil {
		return nil
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return nil
	}
	if prop == nil {
		prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	return &Tracing{tracer: tp.Tracer(TracerName), prop: prop}
}

// Enabled reports whether t starts spans.
func (t *Tracing) Enabled() bool { return t != nil }

// noEndRequest and noEndStore are the end functions of tracing off: shared,
// so that tracing off allocates nothing.
var (
	noEndRequest = func(*proxy.Event) {}
	noEndStore   = func(error) {}
)

// StartRequest starts the server span of r, continuing the trace context
// the client sent. Use the returned context for the rest of the request
// (store call, upstream) and call the returned function once the request
// is finished: it records what the gateway did and ends the span. With
// tracing off it returns ctx itself and a shared no-op.
func (t *Tracing) StartRequest(ctx context.Context, r *http.Request) (context.Context, func(*proxy.Event)) {
	if t == nil {
		return ctx, noEndRequest
	}
	ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
	method := MethodClass(r.Method)
	name := method
	if method == "_OTHER" {
		name = "HTTP"
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(AttrMethod.String(method), AttrPath.String(r.URL.Path)))
	return ctx, func(ev *proxy.Event) { endRequest(span, ev) }
}

// endRequest records what the gateway did with the request — route,
// status, outcome, the decision and the binding limit, the shadow limits
// that would have denied — and ends the span. A status of 500 or more marks
// the span as an error, as the HTTP semantic conventions ask of server
// spans.
func endRequest(span trace.Span, ev *proxy.Event) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if ev.Route != "" {
		span.SetName(spanMethod(ev.Method) + " " + ev.Route)
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, AttrRoute.String(ev.Route), AttrStatus.Int(ev.Status), AttrOutcome.String(ev.Outcome.String()))
	if decision, limit, shadow := summarize(ev); decision != "" {
		attrs = append(attrs, AttrDecision.String(decision))
		if limit != "" {
			attrs = append(attrs, AttrLimit.String(limit))
		}
		if len(shadow) > 0 {
			attrs = append(attrs, AttrShadowDenied.StringSlice(shadow))
		}
	}
	span.SetAttributes(attrs...)
	if ev.Status >= 500 {
		span.SetStatus(codes.Error, strconv.Itoa(ev.Status))
	}
	span.End()
}

func spanMethod(m string) string {
	if c := MethodClass(m); c != "_OTHER" {
		return c
	}
	return "HTTP"
}

// summarize returns the request's decision ("allowed" or "denied"; "" when
// no limit was decided), its binding limit — the enforced limit that denied
// with the longest wait, or, when allowed, the enforced limit with the
// lowest remaining fraction — and the shadow limits that would have denied.
func summarize(ev *proxy.Event) (decision, limit string, shadow []string) {
	n := min(len(ev.Hits), len(ev.Decisions))
	if n == 0 {
		return "", "", nil
	}
	decision = "allowed"
	best := -1
	var bestFrac float64
	for i := 0; i < n; i++ {
		l, d := ev.Hits[i].Limit, &ev.Decisions[i]
		if l == nil {
			continue
		}
		if l.Shadow {
			if !d.Allowed {
				shadow = append(shadow, l.Name)
			}
			continue
		}
		if !d.Allowed {
			if decision == "allowed" || d.RetryAfter > ev.Decisions[best].RetryAfter {
				best = i
			}
			decision = "denied"
			continue
		}
		if decision == "denied" {
			continue
		}
		frac := 1.0
		if d.Limit > 0 {
			frac = float64(d.Remaining) / float64(d.Limit)
		}
		if best < 0 || frac < bestFrac {
			best, bestFrac = i, frac
		}
	}
	if best >= 0 {
		limit = ev.Hits[best].Limit.Name
	}
	return decision, limit, shadow
}

// StartStore starts a child span of ctx's span for a store call deciding
// hits limits. Pass the returned context to the store and the call's error
// to the returned function, which ends the span.
func (t *Tracing) StartStore(ctx context.Context, hits int) (context.Context, func(error)) {
	if t == nil {
		return ctx, noEndStore
	}
	ctx, span := t.tracer.Start(ctx, "tollgate.store.decide", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(AttrStoreHits.Int(hits)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetAttributes(AttrErrorType.String(storeErrNames[storeErrKind(err)]))
			span.SetStatus(codes.Error, "store call failed")
		}
		span.End()
	}
}

// Inject writes the trace context of ctx (traceparent, tracestate,
// baggage) into the upstream request's headers h, replacing what the client
// sent. With tracing off h is left as it is.
func (t *Tracing) Inject(ctx context.Context, h http.Header) {
	if t == nil {
		return
	}
	t.prop.Inject(ctx, propagation.HeaderCarrier(h))
}
