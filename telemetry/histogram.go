package telemetry

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// Histogram is one of the duration histograms Metrics aggregates itself, as
// read at a collection: cumulative since Start. The SDK's synchronous
// histograms re-check and look up their attribute set on every record
// (bench/floor), so the request path records into fixed buckets with
// atomic adds instead, and the wiring hands these to the exporters when
// they collect (telemetry/sdkproducer, an SDK metric producer) under the
// same names, units, descriptions, attributes and boundaries.
type Histogram struct {
	Name, Unit, Description string
	// Bounds are the buckets' inclusive upper bounds in seconds; a value
	// falls in the first bucket whose bound is at least the value, or in
	// the last one (len(Bounds)) above them all.
	Bounds []float64
	// Start is when the aggregation began (the Metrics' creation).
	Start time.Time
	// Points holds one entry per attribute set recorded so far.
	Points []HistogramPoint
}

// HistogramPoint is one attribute set's cumulative aggregation.
type HistogramPoint struct {
	Attributes attribute.Set
	// Count is the number of values recorded, the sum of Buckets.
	Count uint64
	// Sum is their sum in seconds.
	Sum float64
	// Min and Max are the smallest and largest value in seconds (Count > 0).
	Min, Max float64
	// Buckets counts the values per bucket, len(Bounds)+1 entries.
	Buckets []uint64
}

// histogram aggregates durations by label combination K: one point per
// combination, found by a lock-free map read; a new combination copies the
// map under a mutex (bounded by the configured names, as cache is).
type histogram[K comparable] struct {
	name, desc string
	bounds     []float64 // seconds, as exported
	boundsNs   []int64   // the same in nanoseconds, compared on the record path
	attrs      func(K) attribute.Set

	m  atomic.Pointer[map[K]*histPoint]
	mu sync.Mutex
}

func newHistogram[K comparable](name, desc string, bounds []float64, attrs func(K) attribute.Set) *histogram[K] {
	h := &histogram[K]{name: name, desc: desc, bounds: slices.Clone(bounds), attrs: attrs}
	h.boundsNs = make([]int64, len(bounds))
	for i, b := range bounds {
		// Exact for the configured bounds (whole nanoseconds), so that an
		// integer comparison puts a duration in the bucket its value in
		// seconds would fall in.
		h.boundsNs[i] = int64(math.Round(b * 1e9))
	}
	return h
}

// histPoint is one combination's aggregation. The extremes are in
// nanoseconds; the sum is a float64 of seconds (its bits), as the SDK
// keeps it: nanoseconds in an int64 would wrap after 292 years of
// cumulative time, which ten thousand open streams reach in a month.
type histPoint struct {
	attrs    attribute.Set
	min, max atomic.Int64
	sum      atomic.Uint64
	buckets  []atomic.Uint64
}

// record adds one duration to k's point.
func (h *histogram[K]) record(k K, d time.Duration) {
	h.point(k).add(int64(d), h.boundsNs)
}

func (h *histogram[K]) point(k K) *histPoint {
	if m := h.m.Load(); m != nil {
		if p, ok := (*m)[k]; ok {
			return p
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.m.Load()
	if old != nil {
		if p, ok := (*old)[k]; ok {
			return p
		}
	}
	next := make(map[K]*histPoint, 1+lenPoints(old))
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	p := &histPoint{attrs: h.attrs(k), buckets: make([]atomic.Uint64, len(h.boundsNs)+1)}
	p.min.Store(math.MaxInt64)
	p.max.Store(math.MinInt64)
	next[k] = p
	h.m.Store(&next)
	return p
}

func lenPoints[K comparable](m *map[K]*histPoint) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// add records ns. The extremes and the sum are updated before the bucket,
// so a collection that counts a value also sees it in them.
func (p *histPoint) add(ns int64, boundsNs []int64) {
	for cur := p.min.Load(); ns < cur && !p.min.CompareAndSwap(cur, ns); cur = p.min.Load() {
	}
	for cur := p.max.Load(); ns > cur && !p.max.CompareAndSwap(cur, ns); cur = p.max.Load() {
	}
	for {
		cur := p.sum.Load()
		if p.sum.CompareAndSwap(cur, math.Float64bits(math.Float64frombits(cur)+seconds(ns))) {
			break
		}
	}
	i := 0
	for i < len(boundsNs) && ns > boundsNs[i] {
		i++
	}
	p.buckets[i].Add(1)
}

// read returns the histogram as it stands.
func (h *histogram[K]) read(start time.Time) Histogram {
	out := Histogram{Name: h.name, Unit: "s", Description: h.desc, Bounds: slices.Clone(h.bounds), Start: start}
	m := h.m.Load()
	if m == nil {
		return out
	}
	out.Points = make([]HistogramPoint, 0, len(*m))
	for _, p := range *m {
		pt := HistogramPoint{Attributes: p.attrs, Buckets: make([]uint64, len(p.buckets))}
		for i := range p.buckets {
			pt.Buckets[i] = p.buckets[i].Load()
			pt.Count += pt.Buckets[i]
		}
		if pt.Count == 0 {
			continue
		}
		pt.Sum = math.Float64frombits(p.sum.Load())
		pt.Min, pt.Max = seconds(p.min.Load()), seconds(p.max.Load())
		out.Points = append(out.Points, pt)
	}
	return out
}

// seconds converts nanoseconds as time.Duration.Seconds does.
func seconds(ns int64) float64 { return time.Duration(ns).Seconds() }
