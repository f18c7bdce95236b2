package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// RunModes runs the property tests of the hit modes against naive
// reference models: counting by response (HitPeek before, HitTake after)
// and delaying instead of denying (Limit.MaxDelay, with Cancel when the
// store is a ratelimit.Canceler), and giving back a hybrid lease's unused
// units (ratelimit.Returner, hand-computed tables). The models never use the stores' math:
// a list of counted instants for the windows, an integer token bucket
// scaled by W for the reservations.
func RunModes(t *testing.T, newStore func(t *testing.T) ratelimit.Store) {
	s := &suite{newStore: newStore, tag: fmt.Sprintf("{sm%016x}", rand.Uint64())}
	t.Run("ResponseSlidingLog", func(t *testing.T) { s.response(t, ratelimit.SlidingWindowLog) })
	t.Run("ResponseFixedWindow", func(t *testing.T) { s.response(t, ratelimit.FixedWindow) })
	t.Run("ResponseSteps", s.responseSteps)
	t.Run("DelayTokenBucket", func(t *testing.T) { s.delay(t, ratelimit.TokenBucket, 3, 1) })
	t.Run("DelayTokenBucketCosts", func(t *testing.T) { s.delay(t, ratelimit.TokenBucket, 4, 3) })
	t.Run("DelayGCRA", func(t *testing.T) { s.delay(t, ratelimit.GCRA, 2, 1) })
	t.Run("DelayGCRACosts", func(t *testing.T) { s.delay(t, ratelimit.GCRA, 5, 2) })
	t.Run("DelaySteps", s.delaySteps)
	t.Run("ReturnFixedWindow", s.returnFixedWindow)
	t.Run("ReturnSlidingCounter", s.returnSlidingCounter)
}

// decide1 decides one hit and fails t on a store error.
func decide1(t *testing.T, st ratelimit.Store, now time.Time, h ratelimit.Hit) (bool, ratelimit.Decision) {
	t.Helper()
	out := make([]ratelimit.Decision, 1)
	ok, err := st.Decide(context.Background(), now, []ratelimit.Hit{h}, out)
	if err != nil {
		t.Fatalf("Decide(%s, %v, cost %d): %v", h.Mode, now.Sub(t0), h.Cost, err)
	}
	return ok, out[0]
}

// responseSteps is a hand-computed table: a peek counts nothing, a take
// counts past the limit and is never denied.
func (s *suite) responseSteps(t *testing.T) {
	st := s.store(t)
	l := finish(t, limit(t, "login", ratelimit.FixedWindow, "2/1s"))
	h := ratelimit.Hit{Limit: l, Key: s.key(t, "k"), Cost: 1}
	peek, take := h, h
	peek.Mode, take.Mode = ratelimit.HitPeek, ratelimit.HitTake
	type row struct {
		at   time.Duration
		h    ratelimit.Hit
		want ratelimit.Decision
	}
	rows := []row{
		{ms(0), peek, ratelimit.Decision{Allowed: true, Limit: 2, Remaining: 2}},
		{ms(0), peek, ratelimit.Decision{Allowed: true, Limit: 2, Remaining: 2}},
		{ms(1), take, ratelimit.Decision{Allowed: true, Counted: true, Limit: 2, Remaining: 1, Reset: ms(999)}},
		{ms(2), take, ratelimit.Decision{Allowed: true, Counted: true, Limit: 2, Remaining: 0, Reset: ms(998)}},
		{ms(3), take, ratelimit.Decision{Allowed: true, Counted: true, Limit: 2, Remaining: 0, Reset: ms(997)}},
		{ms(4), peek, ratelimit.Decision{Limit: 2, Remaining: 0, Reset: ms(996), RetryAfter: ms(996)}},
		{ms(1000), peek, ratelimit.Decision{Allowed: true, Limit: 2, Remaining: 2}},
	}
	for i, r := range rows {
		ok, got := decide1(t, st, t0.Add(r.at), r.h)
		got.Lease = 0
		if ok != r.want.Allowed || got != r.want {
			t.Errorf("step %d: %s at t0+%v = %v %+v, want %+v", i, r.h.Mode, r.at, ok, got, r.want)
		}
	}
}

// response checks counting by response against a naive model: requests
// start (a peek) and end (a take when the upstream's status matches) at
// random instants. For the sliding log every peek must decide exactly as
// the counted instants say (allowed iff fewer than L units were counted in
// (now − W, now]); for both algorithms no window may hold more than L plus
// the most requests in flight at once.
func (s *suite) response(t *testing.T, a ratelimit.Algorithm) {
	st := s.store(t)
	const L, W = 5, int64(time.Second / ratelimit.Tick)
	l := finish(t, limit(t, "resp", a, "5/1s"))
	key := s.key(t, "k")
	rng := rand.New(rand.NewPCG(7, uint64(a)))
	type event struct {
		at    int64 // ticks after t0
		req   int
		end   bool
		match bool
	}
	var evs []event
	at := int64(0)
	for i := range 300 {
		at += rng.Int64N(W / 8)
		evs = append(evs, event{at: at, req: i}, event{at: at + rng.Int64N(W/3), req: i, end: true, match: rng.IntN(10) < 7})
	}
	// Ends before starts at one instant, then in request order: a fixed,
	// store-independent order.
	slices.SortStableFunc(evs, func(x, y event) int {
		switch {
		case x.at != y.at:
			return int(x.at - y.at)
		case x.end != y.end:
			if x.end {
				return -1
			}
			return 1
		}
		return x.req - y.req
	})
	admitted := map[int]bool{}
	var counted []int64 // instants of the takes, in order
	inflight, most := 0, 0
	for i, e := range evs {
		now := t0.Add(time.Duration(e.at) * ratelimit.Tick)
		h := ratelimit.Hit{Limit: l, Key: key, Cost: 1, Mode: ratelimit.HitPeek}
		if e.end {
			if !admitted[e.req] {
				continue
			}
			inflight--
			if !e.match {
				continue
			}
			h.Mode = ratelimit.HitTake
			ok, d := decide1(t, st, now, h)
			if !ok || !d.Counted {
				t.Fatalf("event %d: take at %d = %v %+v, want counted", i, e.at, ok, d)
			}
			counted = append(counted, e.at)
			continue
		}
		ok, d := decide1(t, st, now, h)
		if d.Counted {
			t.Fatalf("event %d: a peek counted: %+v", i, d)
		}
		if a == ratelimit.SlidingWindowLog {
			n := 0
			for _, c := range counted {
				if c > e.at-W && c <= e.at {
					n++
				}
			}
			if want := n+1 <= L; ok != want {
				t.Fatalf("event %d: peek at %d allowed %v, model (%d counted in the window) says %v", i, e.at, ok, n, want)
			}
		}
		if ok {
			admitted[e.req] = true
			inflight++
			most = max(most, inflight)
		}
	}
	// Every window: half-open [x, x+W) from each counted instant (sliding),
	// or the aligned windows (fixed).
	worst := 0
	for _, x := range counted {
		lo := x
		if a == ratelimit.FixedWindow {
			abs := t0.UnixMicro() + x
			lo = x - (abs - abs/W*W)
		}
		n := 0
		for _, c := range counted {
			if c >= lo && c < lo+W {
				n++
			}
		}
		worst = max(worst, n)
	}
	if worst > L+most {
		t.Errorf("a window counted %d units: more than L=%d + %d in flight", worst, L, most)
	}
	if worst <= L {
		t.Logf("no window went past L=%d (most in flight %d)", L, most)
	} else {
		t.Logf("worst window %d units = L + %d, most in flight %d", worst, worst-L, most)
	}
	if len(counted) < 50 {
		t.Errorf("only %d takes: the trace does not exercise the limit", len(counted))
	}
}

// delaySteps is a hand-computed table for a token bucket 10/s, burst 2,
// max_delay 250ms.
func (s *suite) delaySteps(t *testing.T) {
	st := s.store(t)
	l := limit(t, "d", ratelimit.TokenBucket, "10/1s")
	l.Burst, l.MaxDelay = 2, ms(250)
	finish(t, l)
	h := ratelimit.Hit{Limit: l, Key: s.key(t, "k"), Cost: 1}
	type row struct {
		at    time.Duration
		ok    bool
		delay time.Duration
		retry time.Duration
	}
	rows := []row{
		{ms(0), true, 0, 0},
		{ms(0), true, 0, 0},
		{ms(0), true, ms(100), 0}, // slot at 100ms
		{ms(0), true, ms(200), 0}, // slot at 200ms
		{ms(10), false, 0, ms(290)},
		{ms(50), true, ms(250), 0}, // slot at 300ms
		{ms(60), false, 0, ms(340)},
	}
	for i, r := range rows {
		ok, d := decide1(t, st, t0.Add(r.at), h)
		if ok != r.ok || d.Allowed != r.ok || d.Counted != r.ok || d.Delay != r.delay || d.RetryAfter != r.retry {
			t.Errorf("step %d at t0+%v: %v %+v, want allowed %v delay %v retry %v", i, r.at, ok, d, r.ok, r.delay, r.retry)
		}
	}
}

// delay checks reservations against a naive token bucket: requests of
// random costs arrive at random instants; an admitted one is forwarded at
// its slot (now + Delay) unless its client cancels before; some do. The
// forwarded requests, in slot order, must each find their cost in an
// integer bucket of B tokens refilled at L/W (tokens scaled by W, so the
// model is exact); no Delay exceeds MaxDelay; a denial's wait exceeds
// MaxDelay.
func (s *suite) delay(t *testing.T, a ratelimit.Algorithm, burst, maxCost int64) {
	st := s.store(t)
	canceler, _ := st.(ratelimit.Canceler)
	l := limit(t, "delay", a, "10/1s")
	l.Burst, l.MaxDelay = burst, ms(600)
	finish(t, l)
	const L, W = 10, int64(time.Second / ratelimit.Tick)
	key := s.key(t, "k")
	rng := rand.New(rand.NewPCG(11, uint64(a)*100+uint64(burst)))
	type fwd struct{ slot, cost int64 }
	type pending struct {
		at   int64
		hit  ratelimit.Hit
		d    ratelimit.Decision
		slot int64
	}
	var forwarded []fwd
	var cancels []pending
	now := int64(0)
	delayed, denied, canceled := 0, 0, 0
	flush := func(upTo int64) {
		slices.SortStableFunc(cancels, func(x, y pending) int { return int(x.at - y.at) })
		for len(cancels) > 0 && cancels[0].at <= upTo {
			c := cancels[0]
			cancels = cancels[1:]
			if err := canceler.Cancel(context.Background(), t0.Add(time.Duration(c.at)*ratelimit.Tick), []ratelimit.Hit{c.hit}, []ratelimit.Decision{c.d}); err != nil {
				t.Fatalf("Cancel: %v", err)
			}
			canceled++
		}
	}
	for range 600 {
		switch rng.IntN(4) {
		case 0:
			now += rng.Int64N(W / 2)
		default:
			now += rng.Int64N(W / 40)
		}
		flush(now)
		h := ratelimit.Hit{Limit: l, Key: key, Cost: 1 + rng.Int64N(maxCost)}
		ok, d := decide1(t, st, t0.Add(time.Duration(now)*ratelimit.Tick), h)
		if !ok {
			denied++
			if !d.Never && d.RetryAfter <= l.MaxDelay {
				t.Fatalf("at %d cost %d: denied with RetryAfter %v within max_delay", now, h.Cost, d.RetryAfter)
			}
			continue
		}
		if d.Delay > l.MaxDelay || d.Delay < 0 || !d.Counted {
			t.Fatalf("at %d: %+v", now, d)
		}
		slot := now + int64(d.Delay/ratelimit.Tick)
		if d.Delay > 0 {
			delayed++
			if canceler != nil && rng.IntN(4) == 0 {
				cancels = append(cancels, pending{at: now + rng.Int64N(slot-now), hit: h, d: d, slot: slot})
				continue
			}
		}
		forwarded = append(forwarded, fwd{slot, h.Cost})
	}
	flush(now + W*10)
	slices.SortStableFunc(forwarded, func(x, y fwd) int { return int(x.slot - y.slot) })
	level, last := burst*W, int64(0) // tokens × W
	for i, f := range forwarded {
		level = min(burst*W, level+(f.slot-last)*L)
		last = f.slot
		if level < f.cost*W {
			t.Fatalf("forwarded request %d (cost %d) at slot %d finds %.6f tokens in the model bucket", i, f.cost, f.slot, float64(level)/float64(W))
		}
		level -= f.cost * W
	}
	t.Logf("%d forwarded (%d delayed), %d denied, %d canceled", len(forwarded), delayed, denied, canceled)
	if delayed < 50 || denied < 20 || (canceler != nil && canceled < 10) {
		t.Errorf("the trace does not exercise delays: %d delayed, %d denied, %d canceled", delayed, denied, canceled)
	}
}
