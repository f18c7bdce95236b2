package telemetry

import (
	"math"
	"slices"
	"strconv"
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

// TestHistogramHostileInputs: what clients send never adds a series or
// grows a histogram: methods fold to their class, paths are no label,
// and durations of any size land in a bucket.
func TestHistogramHostileInputs(t *testing.T) {
	m, _ := newTestMetrics(t, MetricsOptions{})
	huge := string(make([]byte, 64<<10))
	for _, tc := range []struct {
		name string
		ev   proxy.Event
	}{
		{"100,000 distinct methods", proxy.Event{Route: "r", Outcome: proxy.OutcomeForwarded}},
		{"a 64 KiB method and path", proxy.Event{Route: "r", Method: huge, Path: huge, Outcome: proxy.OutcomeForwarded}},
		{"100,000 distinct paths without a route", proxy.Event{Method: "GET", Outcome: proxy.OutcomeNoRoute}},
		{"negative and enormous durations", proxy.Event{Route: "r", Method: "GET", Outcome: proxy.OutcomeForwarded,
			Duration: -time.Hour, Upstream: math.MaxInt64, StoreLatency: math.MaxInt64}},
	} {
		for i := range 100_000 {
			ev := tc.ev
			if ev.Method == "" {
				ev.Method = "M" + strconv.Itoa(i)
			}
			if ev.Path == "" {
				ev.Path = "/p/" + strconv.Itoa(i)
			}
			m.Observe(&ev)
		}
		n := 0
		for _, h := range m.Histograms() {
			n += len(h.Points)
			for _, p := range h.Points {
				if len(p.Buckets) != len(h.Bounds)+1 {
					t.Errorf("%s: %s has %d buckets", tc.name, h.Name, len(p.Buckets))
				}
				// 100,000 of the longest durations: the sum does not wrap.
				if h.Name == MetricUpstreamDuration && math.Abs(p.Sum/(1e5*9223372036.854775807)-1) > 1e-9 {
					t.Errorf("%s: upstream sum %v s, want 100,000 × 9223372036.854775807", tc.name, p.Sum)
				}
			}
		}
		// Request: (r, _OTHER, forwarded), (r, GET, forwarded), ("", GET,
		// no_route); store and upstream: one each.
		if n > 5 {
			t.Errorf("%s: %d series, want at most 5", tc.name, n)
		}
	}
}
