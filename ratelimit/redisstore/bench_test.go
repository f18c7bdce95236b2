package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// BenchmarkDecide measures decisions per second and p99 latency per
// algorithm against the shared local redis-server, from parallel callers,
// one key per caller goroutine (limits high enough to allow).
func BenchmarkDecide(b *testing.B) {
	c := newClient(b, standard.Addr)
	for _, l := range []ratelimit.Limit{
		{Name: "fixed_window", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1<<40, time.Minute)}},
		{Name: "fixed_window_elastic", Algorithm: ratelimit.FixedWindowElastic, Rates: []ratelimit.Rate{rate(1<<40, time.Minute)}},
		{Name: "sliding_window_log", Algorithm: ratelimit.SlidingWindowLog, Rates: []ratelimit.Rate{rate(100, time.Millisecond)}},
		{Name: "sliding_window_counter", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(1<<40, time.Minute)}},
		{Name: "token_bucket", Algorithm: ratelimit.TokenBucket, Rates: []ratelimit.Rate{rate(1<<40, time.Second)}},
		{Name: "gcra", Algorithm: ratelimit.GCRA, Rates: []ratelimit.Rate{rate(1<<40, time.Second)}},
		{Name: "concurrency", Algorithm: ratelimit.Concurrency, MaxInFlight: 1 << 40},
	} {
		lim := finished(b, l)
		b.Run(l.Name, func(b *testing.B) {
			s := newStore(b, c, redisstore.Options{Timeout: time.Second})
			var id atomic.Int64
			var mu sync.Mutex
			var lat []time.Duration
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				key := "{b" + strconv.FormatInt(id.Add(1), 10) + "}k"
				hits := []ratelimit.Hit{{Limit: lim, Key: key, Cost: 1}}
				out := make([]ratelimit.Decision, 1)
				local := make([]time.Duration, 0, 1024)
				for pb.Next() {
					start := time.Now()
					if _, err := s.Decide(context.Background(), start, hits, out); err != nil {
						b.Error(err)
						return
					}
					if lim.Algorithm == ratelimit.Concurrency {
						// Each slot is a member of the key's set until
						// given back: hold none past its own iteration.
						if err := s.Release(context.Background(), hits, out); err != nil {
							b.Error(err)
							return
						}
					}
					local = append(local, time.Since(start))
				}
				mu.Lock()
				lat = append(lat, local...)
				mu.Unlock()
			})
			if len(lat) > 0 {
				slices.Sort(lat)
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			}
		})
	}
}

// TestLogMemory measures MEMORY USAGE of one sliding_window_log key holding
// L timestamps in our packed format and in the classic sorted-set design
// (ZADD of unique members scored by timestamp), at L = 100 and L = 1000.
// The figures go into BENCHMARKS.md.
func TestLogMemory(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, standard.Addr)
	s := newStore(t, c, redisstore.Options{Timeout: 5 * time.Second, DenyCacheSize: -1})
	now := time.Now()
	for _, n := range []int64{100, 1000} {
		l := finished(t, ratelimit.Limit{Name: fmt.Sprint("mem", n), Algorithm: ratelimit.SlidingWindowLog, Rates: []ratelimit.Rate{rate(n, time.Hour)}})
		key := "{mem}" + strconv.FormatInt(n, 10)
		out := make([]ratelimit.Decision, 1)
		for i := range n {
			ok, err := s.Decide(ctx, now.Add(time.Duration(i)*time.Millisecond), []ratelimit.Hit{{Limit: l, Key: key, Cost: 1}}, out)
			if err != nil || !ok {
				t.Fatalf("unit %d: %v %v", i, ok, err)
			}
		}
		// A failed MEMORY USAGE reads as 0 bytes, which would pass the
		// comparison below: every reply is checked.
		ours, err := c.MemoryUsage(ctx, s.Key(l, key)).Result()
		if err != nil || ours <= 0 {
			t.Fatalf("MEMORY USAGE of the packed log: %d, %v", ours, err)
		}
		zkey := "zset:" + key
		for i := range n {
			ts := now.Add(time.Duration(i) * time.Millisecond).UnixMicro()
			if err := c.ZAdd(ctx, zkey, redisZ(float64(ts), strconv.FormatInt(ts, 10)+"-"+strconv.FormatInt(i, 10))).Err(); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := c.ZCard(ctx, zkey).Result(); err != nil || got != n {
			t.Fatalf("sorted set holds %d members (%v), want %d", got, err, n)
		}
		zset, err := c.MemoryUsage(ctx, zkey).Result()
		if err != nil || zset <= 0 {
			t.Fatalf("MEMORY USAGE of the sorted set: %d, %v", zset, err)
		}
		if err := c.Del(ctx, zkey).Err(); err != nil {
			t.Fatal(err)
		}
		t.Logf("L=%d: packed log %d bytes (%.1f B/entry), sorted set %d bytes (%.1f B/entry)",
			n, ours, float64(ours)/float64(n), zset, float64(zset)/float64(n))
		if ours*3 > zset {
			t.Errorf("L=%d: packed log %d bytes is not well below the sorted set's %d", n, ours, zset)
		}
	}
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }

// BenchmarkClock measures what deciding on Redis's clock (ratelimit.ClockStore: the
// script reads TIME) costs against the gateway's clock (ratelimit.ClockLocal: the
// instant travels in the arguments): latency per decision from one caller,
// and Redis CPU per script call from INFO commandstats (usec_per_call of
// evalsha, reset before each run). The figures go into BENCHMARKS.md.
func BenchmarkClock(b *testing.B) {
	c := newClient(b, standard.Addr)
	ctx := context.Background()
	for _, l := range []ratelimit.Limit{
		{Name: "fixed_window", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1<<40, time.Minute)}},
		{Name: "sliding_window_counter", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(1<<40, time.Minute)}},
		{Name: "token_bucket", Algorithm: ratelimit.TokenBucket, Rates: []ratelimit.Rate{rate(1<<40, time.Second)}},
		{Name: "gcra", Algorithm: ratelimit.GCRA, Rates: []ratelimit.Rate{rate(1<<40, time.Second)}},
	} {
		lim := finished(b, l)
		for _, clock := range []struct {
			name string
			c    ratelimit.Clock
		}{{"local", ratelimit.ClockLocal}, {"store", ratelimit.ClockStore}} {
			b.Run(l.Name+"/clock="+clock.name, func(b *testing.B) {
				s := newStore(b, c, redisstore.Options{Timeout: time.Second, Clock: clock.c, DenyCacheSize: -1})
				hits := []ratelimit.Hit{{Limit: lim, Key: "{clock}k", Cost: 1}}
				out := make([]ratelimit.Decision, 1)
				if _, err := s.Decide(ctx, time.Now(), hits, out); err != nil { // load the script
					b.Fatal(err)
				}
				if err := c.ConfigResetStat(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for range b.N {
					if _, err := s.Decide(ctx, time.Now(), hits, out); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				info, err := c.Info(ctx, "commandstats").Result()
				if err != nil {
					b.Fatal(err)
				}
				usec := commandStat(info, "evalsha", "usec_per_call")
				if usec <= 0 {
					b.Fatalf("no evalsha usec_per_call in INFO commandstats:\n%s", info)
				}
				b.ReportMetric(usec, "redis-µs/call")
			})
		}
	}
}

// commandStat returns field of cmdstat_<cmd> in an INFO commandstats
// reply, or -1.
func commandStat(info, cmd, field string) float64 {
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, field+"="); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err == nil {
					return f
				}
			}
		}
	}
	return -1
}

// BenchmarkDecideSerial is the gateway's side of one Redis decision as
// its request path makes it: one caller, calls one after the other, the
// default options (coalescing on, the store clock) and the request's
// deadline already set (the gateway sets one per request, so the store
// starts no timer of its own), on an engine settled before timing. Its
// allocations are the store's and go-redis's per decision; under
// callgrind (with -cpu 1, one caller: no scheduler spinning) its
// instructions per decision are the gateway-side cost of a decision
// without the HTTP around it (BENCHMARKS.md "Gateway side of a Redis
// decision").
func BenchmarkDecideSerial(b *testing.B) {
	c := newClient(b, standard.Addr)
	for _, l := range []ratelimit.Limit{
		{Name: "fixed_window", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1<<40, time.Minute)}},
		{Name: "sliding_window_counter", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(1<<40, time.Minute)}},
		{Name: "gcra", Algorithm: ratelimit.GCRA, Rates: []ratelimit.Rate{rate(1<<40, time.Second)}},
	} {
		lim := finished(b, l)
		b.Run(l.Name, func(b *testing.B) {
			s := newStore(b, c, redisstore.Options{Timeout: time.Hour, Clock: ratelimit.ClockStore, Coalesce: true})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			if err := s.Ready(ctx); err != nil {
				b.Fatal(err)
			}
			hits := []ratelimit.Hit{{Limit: lim, Key: "{serial}k", Cost: 1}}
			out := make([]ratelimit.Decision, 1)
			for range 100 {
				if _, err := s.Decide(ctx, time.Now(), hits, out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := s.Decide(ctx, time.Now(), hits, out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecideCoalesced is the queued path of the coalescer: 16
// callers per CPU on one lane, so nearly every decision waits in the
// queue and goes out in a pipeline. Its allocations per decision are the
// queue's and the batch's on top of a call's own.
func BenchmarkDecideCoalesced(b *testing.B) {
	c := newClient(b, standard.Addr)
	lim := finished(b, ratelimit.Limit{Name: "sliding_window_counter", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(1<<40, time.Minute)}})
	s := newStore(b, c, redisstore.Options{Timeout: time.Hour, Clock: ratelimit.ClockStore, Coalesce: true, CoalesceLanes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if err := s.Ready(ctx); err != nil {
		b.Fatal(err)
	}
	var id atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		hits := []ratelimit.Hit{{Limit: lim, Key: "{co" + strconv.FormatInt(id.Add(1), 10) + "}k", Cost: 1}}
		out := make([]ratelimit.Decision, 1)
		for pb.Next() {
			if _, err := s.Decide(ctx, time.Now(), hits, out); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	st := s.Stats()
	if st.Batches > 0 {
		b.ReportMetric(float64(st.Batched)/float64(st.Batches), "calls/batch")
	}
}

// BenchmarkDecideBudget is BenchmarkDecideSerial's decision without a
// deadline of the caller's, as the gateway calls the Redis store now
// (proxy.SelfTimed): the store's own budget bounds each call.
func BenchmarkDecideBudget(b *testing.B) {
	c := newClient(b, standard.Addr)
	lim := finished(b, ratelimit.Limit{Name: "sliding_window_counter", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(1<<40, time.Minute)}})
	s := newStore(b, c, redisstore.Options{Timeout: time.Second, Clock: ratelimit.ClockStore, Coalesce: true})
	if err := s.Ready(context.Background()); err != nil {
		b.Fatal(err)
	}
	hits := []ratelimit.Hit{{Limit: lim, Key: "{budget}k", Cost: 1}}
	out := make([]ratelimit.Decision, 1)
	for range 100 {
		if _, err := s.Decide(context.Background(), time.Now(), hits, out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := s.Decide(context.Background(), time.Now(), hits, out); err != nil {
			b.Fatal(err)
		}
	}
}
