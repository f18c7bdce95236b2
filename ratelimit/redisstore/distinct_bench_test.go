package redisstore_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// redisMicros returns the microseconds Redis spent in FCALL so far
// (INFO commandstats): the server's own time, not the client's wait.
func redisMicros(b *testing.B, c *redis.Client) float64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_fcall:"); ok {
			for _, f := range strings.Split(rest, ",") {
				if v, ok := strings.CutPrefix(f, "usec="); ok {
					x, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
					return x
				}
			}
		}
	}
	return 0
}

// BenchmarkDistinct measures one decide call of a distinct hit on Redis,
// one key: exact (a counted value among 100), estimated (a key of 5,000
// values, new values within the limit) and the estimated key's move to a
// new sub-window (the whole value rewritten: every call at a new
// instant one sub-window later).
//
//	go test -run '^$' -bench Distinct -benchtime 2000x ./ratelimit/redisstore
func BenchmarkDistinct(b *testing.B) {
	c := newClient(b, standard.Addr)
	ctx := context.Background()
	fill := func(b *testing.B, s *redisstore.Store, l *ratelimit.Limit, key string, n int, now time.Time) {
		out := make([]ratelimit.Decision, 1)
		r := rand.New(rand.NewPCG(1, 1))
		for range n {
			if _, err := s.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: key, Cost: 1, Value: r.Uint64()}}, out); err != nil {
				b.Fatal(err)
			}
		}
	}
	l := finished(b, ratelimit.Limit{Name: "bdistinct", Algorithm: ratelimit.Distinct, Precision: time.Second,
		Rates: []ratelimit.Rate{rate(ratelimit.DistinctMaxLimit, 4*time.Second)}})
	now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	b.Run("exact", func(b *testing.B) {
		s := newStore(b, c, redisstore.Options{DenyCacheSize: -1})
		fill(b, s, l, "{e}k", 100, now)
		out := make([]ratelimit.Decision, 1)
		hit := []ratelimit.Hit{{Limit: l, Key: "{e}k", Cost: 1, Value: rand.New(rand.NewPCG(1, 1)).Uint64()}}
		before := redisMicros(b, c)
		defer func() { b.ReportMetric((redisMicros(b, c)-before)/float64(b.N), "redis-µs/op") }()
		b.ResetTimer()
		for range b.N {
			if _, err := s.Decide(ctx, now, hit, out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("estimated", func(b *testing.B) {
		s := newStore(b, c, redisstore.Options{DenyCacheSize: -1})
		fill(b, s, l, "{h}k", 5000, now)
		out := make([]ratelimit.Decision, 1)
		r := rand.New(rand.NewPCG(2, 2))
		before := redisMicros(b, c)
		defer func() { b.ReportMetric((redisMicros(b, c)-before)/float64(b.N), "redis-µs/op") }()
		b.ResetTimer()
		for range b.N {
			if _, err := s.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: "{h}k", Cost: 1, Value: r.Uint64()}}, out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("estimated-new-sub-window", func(b *testing.B) {
		s := newStore(b, c, redisstore.Options{DenyCacheSize: -1})
		out := make([]ratelimit.Decision, 1)
		r := rand.New(rand.NewPCG(3, 3))
		t := now
		fill(b, s, l, "{m}k", 300, t)
		var spent float64
		defer func() { b.ReportMetric(spent/float64(b.N), "redis-µs/op") }()
		b.ResetTimer()
		for range b.N {
			t = t.Add(time.Second) // one sub-window on: the oldest leaves
			before := redisMicros(b, c)
			if _, err := s.Decide(ctx, t, []ratelimit.Hit{{Limit: l, Key: "{m}k", Cost: 1, Value: r.Uint64()}}, out); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			spent += redisMicros(b, c) - before - 0 // the call alone
			fill(b, s, l, "{m}k", 150, t)           // keep it estimated
			b.StartTimer()
		}
	})
}
