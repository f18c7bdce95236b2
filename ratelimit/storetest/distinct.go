package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// distinct checks the distinct algorithm's definition on a store: at most
// L distinct values per key in the window of sub-windows (i−N, i]; a
// counted value passes again; a new one past L is denied until enough of
// the oldest values leave with their sub-window; the request's cost plays
// no part; a denied request counts nothing.
func (s *suite) distinct(t *testing.T) {
	st := s.store(t)
	l := &ratelimit.Limit{Name: t.Name(), Algorithm: ratelimit.Distinct, Precision: time.Second,
		Rates: []ratelimit.Rate{{Limit: 2, Window: 3 * time.Second}}}
	finish(t, l)
	key := s.key(t, "k")
	hit := func(v uint64, cost int64) []ratelimit.Hit {
		return []ratelimit.Hit{{Limit: l, Key: key, Cost: cost, Value: v}}
	}
	d := func(allowed bool, rem int64, reset, retry time.Duration) []ratelimit.Decision {
		return []ratelimit.Decision{{Allowed: allowed, Counted: allowed, Limit: 2, Remaining: rem, Reset: reset, RetryAfter: retry}}
	}
	// t0 is a whole second: sub-window i = t0/1s; the window (i−3, i].
	decideAll(t, st, 0, t0, hit(10, 1), true, d(true, 1, ms(3000), 0))
	decideAll(t, st, 1, t0.Add(ms(1500)), hit(20, 2), true, d(true, 0, ms(1500), 0))
	decideAll(t, st, 2, t0.Add(ms(1600)), hit(10, 1), true, d(true, 0, ms(2400), 0))
	// A third value waits for the oldest (20, seen in sub-window i+1, as
	// 10 is now too) to leave: at the start of sub-window i+4.
	decideAll(t, st, 3, t0.Add(ms(1700)), hit(30, 1), false, d(false, 0, ms(2300), ms(2300)))
	decideAll(t, st, 4, t0.Add(ms(3999)), hit(30, 1), false, d(false, 0, ms(1), ms(1)))
	decideAll(t, st, 5, t0.Add(ms(4000)), hit(30, 1), true, d(true, 1, ms(3000), 0))
	// Values seen long ago no longer count.
	decideAll(t, st, 6, t0.Add(ms(10000)), hit(40, 1), true, d(true, 1, ms(3000), 0))
	decideAll(t, st, 7, t0.Add(ms(10000)), hit(50, 1), true, d(true, 0, ms(3000), 0))
	decideAll(t, st, 8, t0.Add(ms(10000)), hit(30, 1), false, d(false, 0, ms(3000), ms(3000)))
}

// distinctUsage checks Usage and Reset of a distinct limit.
func (s *suite) distinctUsage(t *testing.T) {
	st := s.store(t)
	ctx := context.Background()
	l := &ratelimit.Limit{Name: t.Name(), Algorithm: ratelimit.Distinct, Rates: []ratelimit.Rate{{Limit: 4, Window: time.Second}}}
	finish(t, l)
	key := s.key(t, "k")
	wantUsage(t, st, t0, l, key, []ratelimit.WindowUsage{{Rate: l.Rates[0], Used: 0, Remaining: 4}})
	for v := range uint64(3) {
		decideAll(t, st, int(v), t0, []ratelimit.Hit{{Limit: l, Key: key, Cost: 1, Value: v + 1}}, true, nil)
	}
	wantUsage(t, st, t0, l, key, []ratelimit.WindowUsage{{Rate: l.Rates[0], Used: 3, Remaining: 1, Reset: time.Second}})
	if err := st.Reset(ctx, l, key); err != nil {
		t.Fatal(err)
	}
	wantUsage(t, st, t0, l, key, []ratelimit.WindowUsage{{Rate: l.Rates[0], Used: 0, Remaining: 4}})
}
