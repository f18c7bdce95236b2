package e2e

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"syscall"
	"testing"
	"time"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP receiver: it decodes the protobuf bodies
// posted to /v1/traces and /v1/metrics and keeps the span and metric
// names it saw.
type otlpReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	spans   []otlpSpan
	metrics map[string]bool
	bad     []string
}

// otlpSpan is one received span: its name and string attributes.
type otlpSpan struct {
	name  string
	attrs map[string]string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{metrics: map[string]bool{}}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *otlpReceiver) serve(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(r.Body)
		if err != nil {
			rc.fail(r.URL.Path + ": " + err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = z
	}
	b, err := io.ReadAll(body)
	if err != nil || r.Header.Get("Content-Type") != "application/x-protobuf" {
		rc.fail(r.URL.Path + ": content type " + r.Header.Get("Content-Type"))
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	switch r.URL.Path {
	case "/v1/traces":
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			rc.bad = append(rc.bad, "traces: "+err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					attrs := map[string]string{}
					for _, kv := range s.Attributes {
						attrs[kv.Key] = kv.Value.GetStringValue()
					}
					rc.spans = append(rc.spans, otlpSpan{s.Name, attrs})
				}
			}
		}
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	case "/v1/metrics":
		var req colmetrics.ExportMetricsServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			rc.bad = append(rc.bad, "metrics: "+err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					rc.metrics[m.Name] = true
				}
			}
		}
		out, _ := proto.Marshal(&colmetrics.ExportMetricsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	default:
		rc.bad = append(rc.bad, "unexpected path "+r.URL.Path)
		http.NotFound(w, r)
	}
}

func (rc *otlpReceiver) fail(s string) {
	rc.mu.Lock()
	rc.bad = append(rc.bad, s)
	rc.mu.Unlock()
}

// TestOTLPExport: with the standard OTEL_EXPORTER_OTLP_ENDPOINT set, the
// gateway exports a server span per request (with its route and outcome)
// and its metrics to a real OTLP/HTTP receiver, in protobuf the receiver
// decodes.
func TestOTLPExport(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	g := startGateway(t, "burst.toml.tmpl", gwOpts{
		Data: map[string]any{"Rate": "2/hour", "Algorithm": "fixed_window"},
		Env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rc.URL, "OTEL_TRACES_SAMPLER=always_on",
			"OTEL_METRIC_EXPORT_INTERVAL=200", "OTEL_BSP_SCHEDULE_DELAY=100"},
	})
	c := newClient(t, "")
	for range 3 { // 2 allowed, 1 limited
		get(t, c, g.url("/burst"), nil)
	}
	// Shutdown flushes whatever the periodic exporters still hold.
	g.signal(t, syscall.SIGTERM)
	if code, err := g.wait(15 * time.Second); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, b := range rc.bad {
		t.Errorf("receiver: %s", b)
	}
	if len(rc.spans) == 0 {
		t.Fatalf("no span reached the OTLP receiver")
	}
	// One server span per request, named for the method and route, with
	// the decision the client saw.
	decisions := map[string]int{}
	for _, s := range rc.spans {
		if s.name == "GET burst" && s.attrs["http.route"] == "burst" {
			decisions[s.attrs["tollgate.decision"]]++
		}
	}
	if decisions["allowed"] != 2 || decisions["denied"] != 1 {
		t.Errorf("server spans by decision %v, want 2 allowed and 1 denied; spans: %v", decisions, rc.spans)
	}
	// The decision counters come from the meter, the duration
	// histograms from the gateway's own aggregation: both reach OTLP.
	for _, name := range []string{"tollgate.decisions", "http.server.request.duration"} {
		if !rc.metrics[name] {
			t.Errorf("%s not exported; metrics seen: %v", name, rc.metrics)
		}
	}
}
