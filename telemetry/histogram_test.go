package telemetry

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/gateway/proxy"
)

// TestHistogramBuckets: durations on, just above and far beyond the
// boundaries land in the buckets a hand-made table gives them (upper bounds
// inclusive, as the SDK's explicit-bucket histograms count), with the
// count, sum and extremes worked out by hand.
func TestHistogramBuckets(t *testing.T) {
	m, _ := newTestMetrics(t, MetricsOptions{})
	for _, d := range []time.Duration{
		0,                                // ≤ 0.005
		5 * time.Millisecond,             // ≤ 0.005 (on the bound)
		5*time.Millisecond + 1,           // ≤ 0.01
		10 * time.Millisecond,            // ≤ 0.01 (on the bound)
		99 * time.Millisecond,            // ≤ 0.1
		10 * time.Second,                 // ≤ 10 (the last bound)
		10*time.Second + time.Nanosecond, // above every bound
		time.Hour,                        // above every bound
	} {
		m.Upstream("r", d)
	}
	for _, d := range []time.Duration{100 * time.Microsecond, 101 * time.Microsecond, 2 * time.Second} {
		m.Observe(&proxy.Event{Route: "r", Method: "GET", Outcome: proxy.OutcomeForwarded, StoreLatency: d})
	}

	type want struct {
		count    uint64
		sum      float64
		min, max float64
		buckets  []uint64
	}
	wants := map[string]want{
		MetricUpstreamDuration: {8, 3620.119000002, 0, 3600,
			//     .005 .01 .025 .05 .075 .1 .25 .5 .75 1 2.5 5 7.5 10 +Inf
			[]uint64{2, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 2}},
		MetricStoreDuration: {3, 2.000201, 0.0001, 2,
			//     .0001 .00025 .0005 .001 .0025 .005 .01 .025 .05 .1 .25 1 +Inf
			[]uint64{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
		MetricRequestDuration: {3, 0, 0, 0,
			[]uint64{3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
	}
	seen := map[string]bool{}
	for _, h := range m.Histograms() {
		w, ok := wants[h.Name]
		if !ok {
			if len(h.Points) != 0 {
				t.Errorf("%s: %d points, want none", h.Name, len(h.Points))
			}
			continue
		}
		seen[h.Name] = true
		if h.Unit != "s" || h.Description == "" {
			t.Errorf("%s: unit %q, description %q", h.Name, h.Unit, h.Description)
		}
		if len(h.Points) != 1 {
			t.Fatalf("%s: %d points, want 1", h.Name, len(h.Points))
		}
		p := h.Points[0]
		if p.Count != w.count || math.Abs(p.Sum-w.sum) > 1e-9 || p.Min != w.min || p.Max != w.max || !slices.Equal(p.Buckets, w.buckets) {
			t.Errorf("%s: count %d sum %v min %v max %v buckets %v\nwant count %d sum %v min %v max %v buckets %v",
				h.Name, p.Count, p.Sum, p.Min, p.Max, p.Buckets, w.count, w.sum, w.min, w.max, w.buckets)
		}
		if len(h.Bounds)+1 != len(p.Buckets) {
			t.Errorf("%s: %d bounds, %d buckets", h.Name, len(h.Bounds), len(p.Buckets))
		}
	}
	if len(seen) != len(wants) {
		t.Errorf("histograms seen %v, want %d", seen, len(wants))
	}
}
