package topk

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestSketchAgainstExactCounter feeds skewed random streams to a sketch
// and to a plain map, and checks Space-Saving's guarantees against the
// map: every client whose true count exceeds N/k is reported, and every
// reported count is within [true, true+Err] with Err ≤ N/k.
func TestSketchAgainstExactCounter(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, seed*7+1))
		k := 1 + rng.IntN(40)
		clients := 1 + rng.IntN(300)
		n := 1 + rng.IntN(5000)
		zipf := rand.NewZipf(rng, 1.1+rng.Float64(), 1, uint64(clients-1))
		s := NewSketch(k)
		exact := map[uint64]uint64{}
		for range n {
			c := zipf.Uint64()
			// Fingerprints that collide in the table's low bits exercise
			// probing and backward-shift deletion.
			fp := c << 3
			exact[fp]++
			s.Add(fp, "ip", fmt.Sprint(c), 1)
		}
		if s.Total() != uint64(n) {
			t.Fatalf("seed %d: total %d, want %d", seed, s.Total(), n)
		}
		got := map[uint64][2]uint64{}
		s.Each(func(fp uint64, _, _ string, count, err uint64) { got[fp] = [2]uint64{count, err} })
		if len(got) != min(k, len(exact)) {
			t.Fatalf("seed %d: %d items, want %d", seed, len(got), min(k, len(exact)))
		}
		bound := uint64(n) / uint64(k)
		for fp, f := range exact {
			g, ok := got[fp]
			if f > bound && !ok {
				t.Fatalf("seed %d k %d: heavy hitter %d (count %d > N/k %d) missing", seed, k, fp, f, bound)
			}
			if ok && (g[0] < f || g[0]-g[1] > f || g[1] > bound) {
				t.Fatalf("seed %d k %d: item %d count %d err %d, true %d, N/k %d", seed, k, fp, g[0], g[1], f, bound)
			}
		}
		for fp := range got {
			if _, ok := exact[fp]; !ok {
				t.Fatalf("seed %d: reported item %d never added", seed, fp)
			}
		}
	}
}

// TestWindowMergeBounds checks a span's report, merged from buckets,
// against exact counts of the events inside the span: bounds hold and the
// events of buckets that left the span are gone.
func TestWindowMergeBounds(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 3))
		k := 2 + rng.IntN(10)
		w := newWindow(time.Minute, k)
		exact := map[uint64]uint64{}
		start := int64(1_700_000_000) * int64(time.Second)
		var now int64
		for i := range 3000 {
			now = start + int64(i)*int64(60*time.Millisecond) // 3 minutes
			c := uint64(rng.IntN(30))
			if rng.IntN(3) == 0 {
				c = uint64(rng.IntN(3)) // three heavy clients
			}
			w.add(now, c<<5, "user", fmt.Sprint(c))
			// Exact model: events in the buckets the report keeps.
			exact[uint64(i)] = c
		}
		e := now / int64(w.bucket)
		counts := map[uint64]uint64{}
		var total uint64
		for i, c := range exact {
			ts := start + int64(i)*int64(60*time.Millisecond)
			if ts/int64(w.bucket) > e-int64(len(w.ring)) {
				counts[c<<5]++
				total++
			}
		}
		r := w.report(now, k)
		if r.Total != total {
			t.Fatalf("seed %d: total %d, want %d", seed, r.Total, total)
		}
		for _, c := range r.Clients {
			f := counts[c.fp]
			if c.Count < f || c.Count-c.Error > f {
				t.Fatalf("seed %d: client %s count %d err %d, true %d", seed, c.value, c.Count, c.Error, f)
			}
		}
		listed := map[uint64]bool{}
		for _, c := range r.Clients {
			listed[c.fp] = true
		}
		for fp, f := range counts {
			if !listed[fp] && f > r.Unlisted {
				t.Fatalf("seed %d: unlisted client %d has %d > unlisted_max %d", seed, fp>>5, f, r.Unlisted)
			}
		}
	}
}

// TestTrackerTopHeaviest: three clients denied far more often than the
// rest are reported first, exactly, and guaranteed.
func TestTrackerTopHeaviest(t *testing.T) {
	tr := New(10, func(kind, value string) string { return kind + ":" + value })
	l := tr.Limit("api")
	now := time.Unix(1_700_000_000, 0)
	for i := range 2000 {
		c := fmt.Sprint("c", i%200)
		if i%4 != 0 {
			c = fmt.Sprint("heavy", i%3)
		}
		tr.Record(l, now.Add(time.Duration(i)*time.Millisecond), "user", c, true, false, false, -1)
	}
	top := tr.Top("api", l, "1m", now.Add(2*time.Second), 3)
	if len(top.Denied.Clients) != 3 {
		t.Fatalf("top: %+v", top)
	}
	seen := map[string]bool{}
	for _, c := range top.Denied.Clients {
		seen[c.Client] = true
		if !c.Guaranteed {
			t.Errorf("%s not guaranteed: %+v", c.Client, c)
		}
	}
	for i := range 3 {
		if !seen[fmt.Sprint("user:heavy", i)] {
			t.Errorf("heavy%d missing from %+v", i, top.Denied.Clients)
		}
	}
	if l.Denied.Load() != 2000 {
		t.Errorf("denied %d", l.Denied.Load())
	}
}

// BenchmarkRecord is the per-decision cost of the tracker on the request
// path: an allowed decision (counts only), a denied one of a known client,
// and a denied one of a new client (replacing the sketch's minimum).
func BenchmarkRecord(b *testing.B) {
	tr := New(DefaultK, nil)
	l := tr.Limit("api")
	now := time.Unix(1_700_000_000, 0)
	clients := make([]string, 4096)
	for i := range clients {
		clients[i] = fmt.Sprintf("client-%d", i)
	}
	tr.Record(l, now, "ip", clients[0], true, false, false, -1)
	b.Run("allowed", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			tr.Record(l, now, "ip", clients[i&4095], false, false, false, -1)
		}
	})
	b.Run("denied_known", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			tr.Record(l, now, "ip", clients[i&15], true, false, false, -1)
		}
	})
	b.Run("denied_new", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			tr.Record(l, now, "ip", clients[i&4095], true, false, false, -1)
		}
	})
}
