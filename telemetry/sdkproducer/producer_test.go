package sdkproducer

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tollgate/gateway/telemetry"
)

// newReader returns a manual reader exporting m's histograms with
// temporality, and m's meter on the same provider.
func newReader(t *testing.T, temporality metricdata.Temporality) (*telemetry.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	var src Source
	rd := sdkmetric.NewManualReader(sdkmetric.WithProducer(src.Producer("scope", temporality)),
		sdkmetric.WithTemporalitySelector(func(sdkmetric.InstrumentKind) metricdata.Temporality { return temporality }))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := telemetry.NewMetrics(mp.Meter("scope"), telemetry.MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	var rm metricdata.ResourceMetrics
	if err := rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if h := histograms(rm); len(h) != 0 {
		t.Fatalf("histograms exported before the metrics are set: %v", h)
	}
	src.Set(m)
	return m, rd
}

// histograms returns the collected histograms by name.
func histograms(rm metricdata.ResourceMetrics) map[string][]metricdata.Histogram[float64] {
	out := map[string][]metricdata.Histogram[float64]{}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			if h, ok := md.Data.(metricdata.Histogram[float64]); ok {
				out[md.Name] = append(out[md.Name], h)
			}
		}
	}
	return out
}

func collectUpstream(t *testing.T, rd *sdkmetric.ManualReader) []metricdata.HistogramDataPoint[float64] {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	hs := histograms(rm)
	if len(hs) > 1 {
		t.Fatalf("histograms other than upstream's: %v", hs)
	}
	up := hs[telemetry.MetricUpstreamDuration]
	if len(up) > 1 {
		t.Fatalf("%s exported %d times", telemetry.MetricUpstreamDuration, len(up))
	}
	if len(up) == 0 {
		return nil
	}
	return up[0].DataPoints
}

// point is one data point's figures, worked out by hand.
type point struct {
	count    uint64
	sum      float64
	min, max float64
	extremes bool
	buckets  []uint64
}

func check(t *testing.T, when string, got []metricdata.HistogramDataPoint[float64], want *point) {
	t.Helper()
	if want == nil {
		if len(got) != 0 {
			t.Errorf("%s: %d points, want none", when, len(got))
		}
		return
	}
	if len(got) != 1 {
		t.Fatalf("%s: %d points, want 1", when, len(got))
	}
	p := got[0]
	mn, okMin := p.Min.Value()
	mx, okMax := p.Max.Value()
	if p.Count != want.count || math.Abs(p.Sum-want.sum) > 1e-9 || !slices.Equal(p.BucketCounts, want.buckets) ||
		okMin != want.extremes || okMax != want.extremes || (want.extremes && (mn != want.min || mx != want.max)) {
		t.Errorf("%s: count %d sum %v buckets %v min %v/%v max %v/%v; want count %d sum %v buckets %v min %v max %v (extremes %v)",
			when, p.Count, p.Sum, p.BucketCounts, mn, okMin, mx, okMax, want.count, want.sum, want.buckets, want.min, want.max, want.extremes)
	}
	if v, _ := p.Attributes.Value("http.route"); v.AsString() != "r" {
		t.Errorf("%s: attributes %v", when, p.Attributes.ToSlice())
	}
	if !p.Time.After(p.StartTime) {
		t.Errorf("%s: time %v not after start %v", when, p.Time, p.StartTime)
	}
}

// TestCumulative: two collections of the upstream histogram read as the
// hand-computed running totals.
func TestCumulative(t *testing.T) {
	m, rd := newReader(t, metricdata.CumulativeTemporality)
	m.Upstream("r", 3*time.Millisecond)
	m.Upstream("r", 20*time.Millisecond)
	first := collectUpstream(t, rd)
	//                          .005 .01 .025 .05 .075 .1 .25 .5 .75 1 2.5 5 7.5 10 +Inf
	check(t, "first", first, &point{2, 0.023, 0.003, 0.02, true, []uint64{1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}})
	check(t, "unchanged", collectUpstream(t, rd), &point{2, 0.023, 0.003, 0.02, true, []uint64{1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}})
	m.Upstream("r", 30*time.Second)
	last := collectUpstream(t, rd)
	check(t, "second", last, &point{3, 30.023, 0.003, 30, true, []uint64{1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}})
	if !last[0].StartTime.Equal(first[0].StartTime) {
		t.Errorf("cumulative start moved: %v → %v", first[0].StartTime, last[0].StartTime)
	}
}

// TestDelta: a delta reader gets what was recorded since its last
// collection, nothing when nothing was, and no extremes (the interval's
// cannot be told from the running ones).
func TestDelta(t *testing.T) {
	m, rd := newReader(t, metricdata.DeltaTemporality)
	m.Upstream("r", 3*time.Millisecond)
	m.Upstream("r", 20*time.Millisecond)
	first := collectUpstream(t, rd)
	check(t, "first", first, &point{2, 0.023, 0, 0, false, []uint64{1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}})
	check(t, "nothing new", collectUpstream(t, rd), nil)
	m.Upstream("r", 30*time.Second)
	m.Upstream("r", 4*time.Millisecond)
	second := collectUpstream(t, rd)
	check(t, "second", second, &point{2, 30.004, 0, 0, false, []uint64{1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}})
	if !second[0].StartTime.After(first[0].StartTime) {
		t.Errorf("delta start %v not after the first interval's %v", second[0].StartTime, first[0].StartTime)
	}
}
