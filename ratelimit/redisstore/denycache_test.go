package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// TestDenyCacheSteps walks the deny cache at fake instants (ratelimit.ClockLocal:
// the instant passed to Decide is the decision's clock): a denial is
// answered locally for at most DenyCacheTTL; within it, a shadow limit
// whose own denial has lapsed is reported allowed; PurgeDenials and Reset
// forget it.
func TestDenyCacheSteps(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, newClient(t, standard.Addr), redisstore.Options{DenyCacheTTL: time.Second})
	shadow := finished(t, ratelimit.Limit{Name: "s", Algorithm: ratelimit.SlidingWindowLog, Rates: []ratelimit.Rate{rate(1, time.Second)}, Shadow: true})
	enforced := finished(t, ratelimit.Limit{Name: "d", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1, time.Hour)}})
	hits := []ratelimit.Hit{{Limit: shadow, Key: "c", Cost: 1}, {Limit: enforced, Key: "c", Cost: 1}}
	t0 := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	type want struct {
		allowed       bool
		shadowDenied  bool
		enforcedDeny  bool
		fromCache     bool
		retryAfterMax time.Duration // of the enforced hit when denied
	}
	for i, st := range []struct {
		at     time.Duration
		before func()
		want   want
	}{
		{at: 0, want: want{allowed: true}},
		// The shadow limit would deny for 0.4 s more; d denies for an hour.
		{at: 600 * time.Millisecond, want: want{shadowDenied: true, enforcedDeny: true, retryAfterMax: time.Hour}},
		// From the cache: d still denies; s's own denial has lapsed.
		{at: 1100 * time.Millisecond, want: want{enforcedDeny: true, fromCache: true, retryAfterMax: time.Hour - 500*time.Millisecond}},
		// Past DenyCacheTTL: Redis is asked again.
		{at: 1700 * time.Millisecond, want: want{enforcedDeny: true, retryAfterMax: time.Hour}},
		{at: 1800 * time.Millisecond, want: want{enforcedDeny: true, fromCache: true, retryAfterMax: time.Hour}},
		{at: 1900 * time.Millisecond, before: s.PurgeDenials, want: want{enforcedDeny: true, retryAfterMax: time.Hour}},
		{at: 2000 * time.Millisecond, before: func() {
			if err := s.Reset(ctx, enforced, "c"); err != nil {
				t.Fatal(err)
			}
		}, want: want{allowed: true}},
	} {
		if st.before != nil {
			st.before()
		}
		hitsBefore := s.Stats().DenyCacheHits
		out := make([]ratelimit.Decision, 2)
		ok, err := s.Decide(ctx, t0.Add(st.at), hits, out)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got := want{allowed: ok, shadowDenied: !out[0].Allowed, enforcedDeny: !out[1].Allowed,
			fromCache: s.Stats().DenyCacheHits > hitsBefore}
		if got.enforcedDeny {
			got.retryAfterMax = st.want.retryAfterMax
			if out[1].RetryAfter > st.want.retryAfterMax || out[1].RetryAfter <= 0 {
				t.Errorf("step %d (+%v): enforced RetryAfter %v, want in (0, %v]", i, st.at, out[1].RetryAfter, st.want.retryAfterMax)
			}
		}
		if got != st.want {
			t.Errorf("step %d: Decide(t0+%v) = %+v (decisions %+v), want %+v", i, st.at, got, out, st.want)
		}
	}
}

// TestDenyCacheHostile: what a client sends cannot grow the deny cache
// past DenyCacheSize, nor make a denial outlive DenyCacheTTL, nor turn one
// client's denial into another's.
func TestDenyCacheHostile(t *testing.T) {
	ctx := context.Background()
	l := finished(t, ratelimit.Limit{Name: "h", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1000, time.Hour)}})
	t0 := time.Date(2025, 6, 1, 11, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, s *redisstore.Store)
	}{
		{"many costs of one client stay within the cache size", func(t *testing.T, s *redisstore.Store) {
			// Each cost is a distinct hit set; an LRU of 8 keeps 8.
			for c := int64(2); c < 200; c++ {
				out := make([]ratelimit.Decision, 1)
				if ok, err := s.Decide(ctx, t0, []ratelimit.Hit{{Limit: l, Key: "costly", Cost: c}}, out); err != nil || ok {
					t.Fatalf("cost %d: %v %v", c, ok, err)
				}
			}
			calls := s.Stats().Calls
			// The 8 most recent are answered locally, the oldest not.
			for _, c := range []int64{199, 192} {
				s.Decide(ctx, t0.Add(time.Millisecond), []ratelimit.Hit{{Limit: l, Key: "costly", Cost: c}}, make([]ratelimit.Decision, 1))
			}
			if got := s.Stats().Calls - calls; got != 0 {
				t.Errorf("%d calls for the most recent costs, want 0 (cached)", got)
			}
			s.Decide(ctx, t0.Add(time.Millisecond), []ratelimit.Hit{{Limit: l, Key: "costly", Cost: 2}}, make([]ratelimit.Decision, 1))
			if got := s.Stats().Calls - calls; got != 1 {
				t.Errorf("%d calls for the oldest cost, want 1 (evicted)", got)
			}
		}},
		{"a hammered denial is asked again after the TTL", func(t *testing.T, s *redisstore.Store) {
			one := []ratelimit.Hit{{Limit: l, Key: "hammer", Cost: 1}}
			s.Decide(ctx, t0, one, make([]ratelimit.Decision, 1))
			calls := s.Stats().Calls
			for i := range 1000 {
				s.Decide(ctx, t0.Add(time.Duration(i+1)*time.Millisecond), one, make([]ratelimit.Decision, 1))
			}
			// 1000 requests over 1 s: one more call at most (at t0+1s).
			if got := s.Stats().Calls - calls; got < 1 || got > 2 {
				t.Errorf("%d calls over 1 s of hammering, want 1 or 2", got)
			}
		}},
		{"the clock jumps past a cached denial and steps back into it: Redis is asked", func(t *testing.T, s *redisstore.Store) {
			// A denial cached at t0 for a second; a decision 5 s later
			// (the clock jumped) finds every cached denial over and
			// empties the cache, and another denial is cached then. The
			// key is reset meanwhile by another gateway (deleted in
			// Redis, no local purge) and the clock steps back to t0+0.5s:
			// the first denial must not answer from the cache.
			one := []ratelimit.Hit{{Limit: l, Key: "back", Cost: 1}}
			s.Decide(ctx, t0, []ratelimit.Hit{{Limit: l, Key: "back", Cost: 1000}}, make([]ratelimit.Decision, 1))
			if ok, _ := s.Decide(ctx, t0, one, make([]ratelimit.Decision, 1)); ok {
				t.Fatal("the spent key was admitted")
			}
			if ok, _ := s.Decide(ctx, t0.Add(5*time.Second), []ratelimit.Hit{{Limit: l, Key: "costly", Cost: 1}}, make([]ratelimit.Decision, 1)); ok {
				t.Fatal("the spent key costly was admitted")
			}
			if err := newClient(t, standard.Addr).Del(ctx, s.Key(l, "back")).Err(); err != nil {
				t.Fatal(err)
			}
			hits := s.Stats().DenyCacheHits
			out := make([]ratelimit.Decision, 1)
			if ok, err := s.Decide(ctx, t0.Add(500*time.Millisecond), one, out); !ok || err != nil {
				t.Errorf("after the step back: allowed=%v err=%v %+v (from the cache: %v), want allowed (the key is empty)",
					ok, err, out[0], s.Stats().DenyCacheHits > hits)
			}
		}},
		{"another client's denial is not shared", func(t *testing.T, s *redisstore.Store) {
			for _, k := range []string{"x", "x"} {
				s.Decide(ctx, t0, []ratelimit.Hit{{Limit: l, Key: k, Cost: 1000}}, make([]ratelimit.Decision, 1))
			}
			if ok, _ := s.Decide(ctx, t0, []ratelimit.Hit{{Limit: l, Key: "y", Cost: 1000}}, make([]ratelimit.Decision, 1)); !ok {
				t.Error("client y denied by x's cached denial")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t, newClient(t, standard.Addr), redisstore.Options{DenyCacheSize: 8, DenyCacheTTL: time.Second,
				Prefix: fmt.Sprintf("hostile%d:", time.Now().UnixNano())})
			// Exhaust each key first so that denials follow.
			for _, k := range []string{"costly", "hammer"} {
				s.Decide(ctx, t0, []ratelimit.Hit{{Limit: l, Key: k, Cost: 1000}}, make([]ratelimit.Decision, 1))
			}
			tc.run(t, s)
		})
	}
}

// TestDenyCacheKeyHoldsTheNumbers: a limit loosened from 2 to 10 per hour
// keeps its ID (and its counters), and with no PurgeDenials between, the
// next decision under the loosened limit asks Redis, which admits: the
// denial cached under 2/hour must not answer for 10/hour. Only the limit's
// numbers in the cache key tell the two apart.
func TestDenyCacheKeyHoldsTheNumbers(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, newClient(t, standard.Addr), redisstore.Options{DenyCacheTTL: time.Minute})
	tight := finished(t, ratelimit.Limit{Name: "n", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(2, time.Hour)}})
	loose := finished(t, ratelimit.Limit{Name: "n", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(10, time.Hour)}})
	if tight.ID != loose.ID {
		t.Fatalf("the loosened limit has ID %q, the tight one %q: the test needs one ID", loose.ID, tight.ID)
	}
	t0 := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	decide := func(l *ratelimit.Limit, at time.Duration) (bool, bool) {
		t.Helper()
		cached := s.Stats().DenyCacheHits
		ok, err := s.Decide(ctx, t0.Add(at), []ratelimit.Hit{{Limit: l, Key: "c", Cost: 1}}, make([]ratelimit.Decision, 1))
		if err != nil {
			t.Fatal(err)
		}
		return ok, s.Stats().DenyCacheHits > cached
	}
	for i, want := range []bool{true, true, false} {
		if ok, _ := decide(tight, time.Duration(i)*time.Millisecond); ok != want {
			t.Fatalf("request %d under 2/hour: allowed=%v, want %v", i, ok, want)
		}
	}
	// The denial is cached: the same hit set is answered locally.
	if ok, cached := decide(tight, 10*time.Millisecond); ok || !cached {
		t.Fatalf("request 3 under 2/hour: allowed=%v from the cache=%v, want a cached denial", ok, cached)
	}
	if ok, cached := decide(loose, 20*time.Millisecond); !ok || cached {
		t.Fatalf("first request under 10/hour (same ID, no purge): allowed=%v from the cache=%v, want admitted by Redis", ok, cached)
	}
}
