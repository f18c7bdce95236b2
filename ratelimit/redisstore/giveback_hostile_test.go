package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// TestReturnHostile: one give-back call carries the units of many keys
// (a gateway's shutdown returns every lease it holds); a key among them
// that cannot take its units back must not keep the others from theirs.
// Each key counted 10 units and gets 5 back; the hostile key sits between
// two good ones. The rows with another type or a corrupt value failed
// before: the script stopped at the hostile key, so the keys after it
// kept their units and the call failed (every unit of it counted as
// dropped).
func TestReturnHostile(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, standard.Addr)
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, key string)
	}{
		{"a key holding another type (WRONGTYPE)", func(t *testing.T, key string) {
			if err := c.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.HSet(ctx, key, "f", "v").Err(); err != nil {
				t.Fatal(err)
			}
		}},
		{"a corrupt value", func(t *testing.T, key string) {
			if err := c.Set(ctx, key, "not a state", redis.KeepTTL).Err(); err != nil {
				t.Fatal(err)
			}
		}},
		{"a key gone (reset, evicted)", func(t *testing.T, key string) {
			if err := c.Del(ctx, key).Err(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		for _, noFn := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/NoFunctions=%v", tc.name, noFn), func(t *testing.T) {
				s := newStore(t, c, redisstore.Options{DenyCacheSize: -1, NoFunctions: noFn})
				for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindowCounter} {
					l := finished(t, ratelimit.Limit{Name: "rh-" + alg.String(), Algorithm: alg, Rates: []ratelimit.Rate{rate(100, time.Hour)},
						Batch: &ratelimit.Batch{Interval: time.Minute, Lease: 10}})
					now := time.Now()
					keys := []string{"{rh}a", "{rh}bad", "{rh}c"}
					out := make([]ratelimit.Decision, 1)
					var hits []ratelimit.Hit
					var at []time.Time
					for _, k := range keys {
						if ok, err := s.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: k, Cost: 10}}, out); !ok || err != nil {
							t.Fatalf("%s: %v %v", k, ok, err)
						}
						hits = append(hits, ratelimit.Hit{Limit: l, Key: k, Cost: 5})
						at = append(at, now)
					}
					tc.spoil(t, s.Key(l, "{rh}bad"))
					if err := s.Return(ctx, now, hits, at); err != nil {
						t.Errorf("%s: Return: %v", alg, err)
					}
					for _, k := range []string{"{rh}a", "{rh}c"} {
						u, err := s.Usage(ctx, now, l, k)
						if err != nil {
							t.Fatal(err)
						}
						if u[0].Used != 5 {
							t.Errorf("%s: %s counts %d after 5 of its 10 units came back, want 5", alg, k, u[0].Used)
						}
					}
				}
			})
		}
	}
}
