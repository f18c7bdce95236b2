package memstore_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// benchLimit returns a finished limit of algorithm a with a high limit, so
// that the benchmarks measure allowed decisions.
func benchLimit(b *testing.B, a ratelimit.Algorithm, name string) *ratelimit.Limit {
	l := &ratelimit.Limit{Name: name, Algorithm: a}
	if a == ratelimit.Concurrency {
		l.MaxInFlight = ratelimit.MaxLimit
	} else {
		// T = W/L = 80 ticks: at one tick per op, gcra's tat stays ahead
		// of the clock, so the hot key never expires.
		l.Rates = []ratelimit.Rate{{Limit: 1 << 30, Window: 24 * time.Hour}}
		if a == ratelimit.SlidingWindowLog {
			// A log holds one entry per tick counted in its window: a
			// one-second window at one tick per op reaches its steady
			// state (one entry dropped, one logged per op) within the
			// benchmark, under a limit whose worst case per key a
			// configuration may take.
			l.Rates = []ratelimit.Rate{{Limit: 1 << 20, Window: time.Second}}
		}
	}
	if err := l.Finish(); err != nil {
		b.Fatal(err)
	}
	return l
}

var spreadKeys []string

func keys1M() []string {
	if spreadKeys == nil {
		spreadKeys = make([]string, 1<<20)
		for i := range spreadKeys {
			spreadKeys[i] = fmt.Sprintf("{%022d}", i)
		}
	}
	return spreadKeys
}

// BenchmarkDecide measures one Decide per op: one limit or three limits, a
// hot key or keys spread over 2^20, single goroutine or RunParallel.
func BenchmarkDecide(b *testing.B) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, a := range ratelimit.Algorithms() {
		for _, nLimits := range []int{1, 3} {
			for _, spread := range []bool{false, true} {
				for _, par := range []bool{false, true} {
					name := fmt.Sprintf("%s/limits=%d/spread=%v/parallel=%v", a, nLimits, spread, par)
					b.Run(name, func(b *testing.B) {
						s := memstore.New(memstore.Options{})
						var limits []*ratelimit.Limit
						for i := range nLimits {
							limits = append(limits, benchLimit(b, a, "l"+strconv.Itoa(i)))
						}
						var keys []string
						if spread {
							keys = keys1M()
						} else {
							keys = []string{"{hot}"}
						}
						var clock atomic.Int64
						if a == ratelimit.Concurrency && !spread {
							// Hold one unit so the hot key is never empty (and removed).
							hold := make([]ratelimit.Hit, nLimits)
							for j := range hold {
								hold[j] = ratelimit.Hit{Limit: limits[j], Key: keys[0], Cost: 1}
							}
							if _, err := s.Decide(context.Background(), t0, hold, make([]ratelimit.Decision, nLimits)); err != nil {
								b.Fatal(err)
							}
						}
						b.ReportAllocs()
						b.ResetTimer()
						work := func(i int, hits []ratelimit.Hit, out []ratelimit.Decision) {
							k := keys[i&(len(keys)-1)]
							for j := range hits {
								hits[j] = ratelimit.Hit{Limit: limits[j], Key: k, Cost: 1}
							}
							now := t0.Add(time.Duration(clock.Add(1)) * time.Microsecond)
							if _, err := s.Decide(context.Background(), now, hits, out); err != nil {
								b.Fatal(err)
							}
							if a == ratelimit.Concurrency {
								_ = s.Release(context.Background(), hits, out)
							}
						}
						if par {
							var seq atomic.Int64
							b.RunParallel(func(pb *testing.PB) {
								hits := make([]ratelimit.Hit, nLimits)
								out := make([]ratelimit.Decision, nLimits)
								i := int(seq.Add(1) * 7919)
								for pb.Next() {
									i++
									work(i, hits, out)
								}
							})
							return
						}
						hits := make([]ratelimit.Hit, nLimits)
						out := make([]ratelimit.Decision, nLimits)
						for i := range b.N {
							work(i, hits, out)
						}
					})
				}
			}
		}
	}
}

// BenchmarkBytesPerKey fills a store with 2^20 live keys of one
// single-rate limit (cost 1 each) and reports the heap growth per key. The
// key strings are allocated before the baseline and not counted.
func BenchmarkBytesPerKey(b *testing.B) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	keys := keys1M()
	for _, a := range ratelimit.Algorithms() {
		b.Run(a.String(), func(b *testing.B) {
			// A slow rate, so that no key expires while the store fills.
			l := &ratelimit.Limit{Name: "bytes", Algorithm: a, MaxInFlight: 1000}
			if a != ratelimit.Concurrency {
				l.MaxInFlight = 0
				l.Rates = []ratelimit.Rate{{Limit: 1000, Window: 24 * time.Hour}}
			}
			if err := l.Finish(); err != nil {
				b.Fatal(err)
			}
			for range b.N {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				// Each shard holds MaxKeys/shards; leave room for hash imbalance.
				s := memstore.New(memstore.Options{MaxKeys: 2 * len(keys)})
				out := make([]ratelimit.Decision, 1)
				for i, k := range keys {
					_, _ = s.Decide(context.Background(), t0.Add(time.Duration(i)), []ratelimit.Hit{{Limit: l, Key: k, Cost: 1}}, out)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				if s.Len() != len(keys) {
					b.Fatalf("Len = %d, want %d", s.Len(), len(keys))
				}
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(len(keys)), "bytes/key")
				runtime.KeepAlive(s)
			}
		})
	}
}
