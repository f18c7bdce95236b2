// Package storetest is the conformance suite that every ratelimit.Store
// must pass. A store's own tests call Run with a constructor; the suite
// drives the store through step tables at explicit instants and checks
// every field of every Decision against the math of ARCHITECTURE.md.
//
// The suite passes "now" explicitly, so a store that can read its own clock
// (the Redis store's clock = "store") must be built to use the caller's.
// Keys carry a random per-run hash tag, so runs against a shared server do
// not see each other's counters, and all keys of one Decide share a tag (as
// Redis Cluster requires).
package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// T0 is the suite's epoch: midnight UTC, so every window of a second, a
// minute, an hour or a day starts at T0.
var t0 = time.Date(2023, 12, 9, 0, 0, 0, 0, time.UTC)

// ms returns n milliseconds.
func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// op is the kind of a step.
type op int

const (
	decide  op = iota // Decide one hit of the step's cost on the table's limit
	release           // Release the oldest counted decision still held
)

// step is one row of a table: at T0+At, do Op with Cost and expect Want.
type step struct {
	At   time.Duration
	Op   op
	Cost int64
	Want ratelimit.Decision
}

// ok expects an allowed, counted hit on window 0.
func ok(remaining int64, reset time.Duration) ratelimit.Decision {
	return ratelimit.Decision{Allowed: true, Counted: true, Remaining: remaining, Reset: reset}
}

// deny expects a denied hit on window 0.
func deny(remaining int64, reset, retry time.Duration) ratelimit.Decision {
	return ratelimit.Decision{Remaining: remaining, Reset: reset, RetryAfter: retry}
}

// never expects a denial with Never set on window 0.
func never(remaining int64, reset time.Duration) ratelimit.Decision {
	return ratelimit.Decision{Never: true, Remaining: remaining, Reset: reset}
}

// on sets the reported window of d.
func on(window int, d ratelimit.Decision) ratelimit.Decision {
	d.Window = window
	return d
}

// suite carries the per-run state.
type suite struct {
	newStore func(t *testing.T) ratelimit.Store
	tag      string
}

// Run runs the conformance suite against stores made by newStore, one fresh
// store per subtest; Run closes each.
func Run(t *testing.T, newStore func(t *testing.T) ratelimit.Store) {
	s := &suite{newStore: newStore, tag: fmt.Sprintf("{st%016x}", rand.Uint64())}
	t.Run("FixedWindow", s.fixedWindow)
	t.Run("SlidingWindowCounter", s.slidingCounter)
	t.Run("SlidingWindowCounterMidnight", s.slidingCounterMidnight)
	t.Run("SlidingWindowCounterPrecision", s.slidingCounterPrecision)
	t.Run("FixedWindowElastic", s.elastic)
	t.Run("SlidingWindowLog", s.slidingLog)
	t.Run("SlidingWindowLogLargeCosts", s.slidingLogLargeCosts)
	t.Run("TokenBucket", func(t *testing.T) { s.bucket(t, ratelimit.TokenBucket) })
	t.Run("GCRA", func(t *testing.T) { s.bucket(t, ratelimit.GCRA) })
	t.Run("Burst", s.burst)
	t.Run("WaitBeyondMaxWait", s.waitBeyondMaxWait)
	t.Run("Concurrency", s.concurrency)
	t.Run("ShadowConcurrency", s.shadowConcurrency)
	t.Run("ConcurrencyResetMidFlight", s.concurrencyResetMidFlight)
	t.Run("MultiWindow", s.multiWindow)
	t.Run("Layered", s.layered)
	t.Run("Shadow", s.shadow)
	t.Run("NeverInLayer", s.neverInLayer)
	t.Run("UsageAndReset", s.usageAndReset)
	t.Run("Keys", s.keys)
	t.Run("SameKeyTwice", s.sameKeyTwice)
	t.Run("Quota", s.quota)
	t.Run("QuotaDayAndMonth", s.quotaDayAndMonth)
	t.Run("Penalty", s.penalty)
	t.Run("PenaltyInLayer", s.penaltyInLayer)
	t.Run("Distinct", s.distinct)
	t.Run("DistinctUsage", s.distinctUsage)
}

func (s *suite) store(t *testing.T) ratelimit.Store {
	t.Helper()
	st := s.newStore(t)
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}

// key returns a key unique to the run and the test, with the run's tag.
func (s *suite) key(t *testing.T, suffix string) string {
	return s.tag + t.Name() + "/" + suffix
}

// limit builds and finishes a limit named for the test.
func limit(t *testing.T, name string, a ratelimit.Algorithm, rates ...string) *ratelimit.Limit {
	t.Helper()
	l := &ratelimit.Limit{Name: t.Name() + "/" + name, Algorithm: a}
	for _, r := range rates {
		rate, err := ratelimit.ParseRate(r)
		if err != nil {
			t.Fatal(err)
		}
		l.Rates = append(l.Rates, rate)
	}
	return l
}

func finish(t *testing.T, l *ratelimit.Limit) *ratelimit.Limit {
	t.Helper()
	if err := l.Finish(); err != nil {
		t.Fatalf("Finish(%s): %v", l.Name, err)
	}
	return l
}

// blocker returns a hit that is always denied (cost above capacity) and so
// makes any Decide it joins count nothing: the suite uses it to probe
// whether a hit would be allowed without changing the store.
func (s *suite) blocker(t *testing.T) ratelimit.Hit {
	l := finish(t, limit(t, "blocker", ratelimit.FixedWindow, "1/1s"))
	return ratelimit.Hit{Limit: l, Key: s.key(t, "blocker"), Cost: 2}
}

// probe reports whether hit would be allowed at now, changing nothing.
func probe(t *testing.T, st ratelimit.Store, now time.Time, h, blocker ratelimit.Hit) bool {
	t.Helper()
	out := make([]ratelimit.Decision, 2)
	allowed, err := st.Decide(context.Background(), now, []ratelimit.Hit{h, blocker}, out)
	if err != nil {
		t.Fatalf("probe Decide: %v", err)
	}
	if allowed || out[0].Counted || out[1].Counted || !out[1].Never {
		t.Fatalf("probe Decide with a blocker counted something: allowed %v, %+v", allowed, out)
	}
	return out[0].Allowed
}

// checkWait verifies that a hit of cost is allowed at now+wait and denied
// one tick earlier (without changing the store).
func checkWait(t *testing.T, st ratelimit.Store, now time.Time, h, blocker ratelimit.Hit, wait time.Duration, what string) {
	t.Helper()
	if wait <= 0 {
		return
	}
	if !probe(t, st, now.Add(wait), h, blocker) {
		t.Errorf("%s: cost %d denied at now+%v, want allowed", what, h.Cost, wait)
	}
	if probe(t, st, now.Add(wait-ratelimit.Tick), h, blocker) {
		t.Errorf("%s: cost %d allowed at now+%v, want denied", what, h.Cost, wait-ratelimit.Tick)
	}
}

// run executes steps on one limit and key. After every decision it checks
// that RetryAfter and Reset are exact: the request (resp. a request of cost
// Remaining+1) is allowed after the wait and denied one tick before.
func (s *suite) run(t *testing.T, st ratelimit.Store, l *ratelimit.Limit, key string, steps []step) {
	t.Helper()
	ctx := context.Background()
	blocker := s.blocker(t)
	// held are the counted concurrency decisions not yet released, oldest
	// first: a release step gives back the oldest.
	type heldSlot struct {
		h ratelimit.Hit
		d ratelimit.Decision
	}
	var held []heldSlot
	for i, sp := range steps {
		now := t0.Add(sp.At)
		h := ratelimit.Hit{Limit: l, Key: key, Cost: sp.Cost}
		if sp.Op == release {
			if len(held) == 0 {
				t.Fatalf("step %d: release with nothing held", i)
			}
			hs := held[0]
			held = held[1:]
			if err := st.Release(ctx, []ratelimit.Hit{hs.h}, []ratelimit.Decision{hs.d}); err != nil {
				t.Fatalf("step %d: Release(cost %d): %v", i, hs.h.Cost, err)
			}
			continue
		}
		want := sp.Want
		if want.Limit == 0 {
			want.Limit = l.Capacity(want.Window)
		}
		out := make([]ratelimit.Decision, 1)
		allowed, err := st.Decide(ctx, now, []ratelimit.Hit{h}, out)
		if err != nil {
			t.Fatalf("step %d: Decide(t0+%v, cost %d): %v", i, sp.At, sp.Cost, err)
		}
		got := out[0]
		got.Lease = 0 // store-specific; only its use below matters
		if got != want || allowed != want.Allowed {
			t.Errorf("step %d: Decide(t0+%v, cost %d) = %v %+v, want %v %+v", i, sp.At, sp.Cost, allowed, out[0], want.Allowed, want)
			continue
		}
		if l.Algorithm == ratelimit.Concurrency {
			if out[0].Counted {
				held = append(held, heldSlot{h, out[0]})
			} else if err := st.Release(ctx, []ratelimit.Hit{h}, out); err != nil {
				// Releasing what was not counted must give back nothing;
				// the next steps see the count unchanged.
				t.Fatalf("step %d: Release of an uncounted decision: %v", i, err)
			}
		}
		what := fmt.Sprintf("step %d (t0+%v)", i, sp.At)
		if !want.Allowed && !want.Never {
			checkWait(t, st, now, h, blocker, want.RetryAfter, what+" RetryAfter")
		}
		// Reset is one window's; a limit with several can only be probed
		// as a whole.
		if want.Reset > 0 && len(l.Rates) <= 1 {
			hr := h
			hr.Cost = want.Remaining + 1
			checkWait(t, st, now, hr, blocker, want.Reset, what+" Reset")
		}
	}
}

func (s *suite) fixedWindow(t *testing.T) {
	st := s.store(t)
	l := finish(t, limit(t, "fw", ratelimit.FixedWindow, "3/1s"))
	s.run(t, st, l, s.key(t, "k"), []step{
		{At: 0, Cost: 1, Want: ok(2, ms(1000))},
		{At: ms(100), Cost: 1, Want: ok(1, ms(900))},
		{At: ms(200), Cost: 1, Want: ok(0, ms(800))},
		{At: ms(300), Cost: 1, Want: deny(0, ms(700), ms(700))},
		{At: ms(999), Cost: 1, Want: deny(0, ms(1), ms(1))},
		{At: ms(1000), Cost: 1, Want: ok(2, ms(1000))},
		{At: ms(1500), Cost: 2, Want: ok(0, ms(500))},
		{At: ms(1600), Cost: 4, Want: never(0, ms(400))},
		// The clock steps back into the previous window: the state is
		// kept, nothing is unlocked.
		{At: ms(500), Cost: 1, Want: deny(0, ms(1500), ms(1500))},
		{At: ms(2000), Cost: 3, Want: ok(0, ms(1000))},
		{At: ms(3999), Cost: 1, Want: ok(2, ms(1))},
	})
}

func (s *suite) slidingCounter(t *testing.T) {
	st := s.store(t)
	l := finish(t, limit(t, "swc", ratelimit.SlidingWindowCounter, "10/1s"))
	s.run(t, st, l, s.key(t, "k"), []step{
		{At: 0, Cost: 5, Want: ok(5, ms(1200))},
		{At: ms(500), Cost: 5, Want: ok(0, ms(600))},
		{At: ms(600), Cost: 1, Want: deny(0, ms(500), ms(500))},
		// Window 1 at offset 500ms: est = 0 + 10·0.5 = 5.
		{At: ms(1500), Cost: 1, Want: ok(4, ms(100))},
		{At: ms(1999), Cost: 1, Want: ok(7, ms(1))},
		{At: ms(1999), Cost: 11, Want: never(7, ms(1))},
		// Clock back into window 1's start: bucket 1 with offset 0 is used.
		{At: ms(900), Cost: 8, Want: deny(0, ms(400), ms(1100))},
		{At: ms(3000), Cost: 10, Want: ok(0, ms(1100))},
	})
}

func (s *suite) slidingCounterMidnight(t *testing.T) {
	st := s.store(t)
	l := finish(t, limit(t, "swc", ratelimit.SlidingWindowCounter, "1/1s"))
	s.run(t, st, l, s.key(t, "k"), []step{
		{At: ms(999), Cost: 1, Want: ok(0, ms(1001))},
		// The first tick of the next window weighs the previous one fully.
		{At: ms(1000), Cost: 1, Want: deny(0, ms(1000), ms(1000))},
		{At: ms(2000), Cost: 1, Want: ok(0, ms(2000))},
	})
}

func (s *suite) slidingCounterPrecision(t *testing.T) {
	st := s.store(t)
	l := limit(t, "swc", ratelimit.SlidingWindowCounter, "10/1s")
	l.Precision = ms(250)
	finish(t, l)
	s.run(t, st, l, s.key(t, "k"), []step{
		{At: 0, Cost: 4, Want: ok(6, 1062500*time.Microsecond)},
		{At: ms(300), Cost: 6, Want: ok(0, 762500*time.Microsecond)},
		{At: ms(1000), Cost: 1, Want: deny(0, 62500*time.Microsecond, 62500*time.Microsecond)},
		// Bucket 0 leaves the window at 1.25s; bucket 1 (6 units) is partial.
		{At: ms(1250), Cost: 4, Want: ok(0, 41667*time.Microsecond)},
		{At: ms(3000), Cost: 10, Want: ok(0, ms(1025))},
	})
}

func (s *suite) elastic(t *testing.T) {
	st := s.store(t)
	l := finish(t, limit(t, "fwe", ratelimit.FixedWindowElastic, "3/1s"))
	s.run(t, st, l, s.key(t, "k"), []step{
		{At: 0, Cost: 1, Want: ok(2, ms(1000))},
		{At: ms(100), Cost: 1, Want: ok(1, ms(1000))},
		{At: ms(200), Cost: 1, Want: ok(0, ms(1000))},
		{At: ms(300), Cost: 1, Want: deny(0, ms(900), ms(900))},
		// A denial does not push the end.
		{At: ms(1100), Cost: 1, Want: deny(0, ms(100), ms(100))},
		{At: ms(1200), Cost: 1, Want: ok(2, ms(1000))},
		// Clock back: the end stays at 2.2s.
		{At: ms(500), Cost: 1, Want: ok(1, ms(1700))},
		{At: ms(600), Cost: 4, Want: never(1, ms(1600))},
		{At: ms(2200), Cost: 3, Want: ok(0, ms(1000))},
	})
}

func (s *suite) slidingLog(t *testing.T) {
	st := s.store(t)
	l := finish(t, limit(t, "swl", ratelimit.SlidingWindowLog, "3/1s"))
	s.run(t, st, l, s.key(t, "k"), []step{
		{At: 0, Cost: 1, Want: ok(2, ms(1000))},
		{At: ms(100), Cost: 1, Want: ok(1, ms(900))},
		{At: ms(200), Cost: 1, Want: ok(0, ms(800))},
		{At: ms(300), Cost: 1, Want: deny(0, ms(700), ms(700))},
		// The unit of t0 stops counting at t0+1s exactly.
		{At: ms(1000), Cost: 1, Want: ok(0, ms(100))},
		{At: ms(1050), Cost: 2, Want: deny(0, ms(50), ms(150))},
		{At: ms(1050), Cost: 4, Want: never(0, ms(50))},
		// Clock back: units at 0.1s, 0.2s, 1s all count at 0.5s.
		{At: ms(500), Cost: 1, Want: deny(0, ms(600), ms(600))},
		{At: ms(2000), Cost: 3, Want: ok(0, ms(1000))},
	})
}

// slidingLogLargeCosts runs costs of millions of units on the largest log
// limit a configuration may take (4,000,000 units × 16 bytes stays under
// ratelimit.MaxStateBytes): decisions stay exact, and the store must
// answer them as one entry per request (a store logging one entry per unit,
// or per fixed-size run of units, spends seconds and megabytes here).
func (s *suite) slidingLogLargeCosts(t *testing.T) {
	st := s.store(t)
	l := finish(t, limit(t, "swl", ratelimit.SlidingWindowLog, "4000000/1s"))
	s.run(t, st, l, s.key(t, "k"), []step{
		{At: 0, Cost: 1_000_000, Want: ok(3_000_000, ms(1000))},
		{At: ms(100), Cost: 2_999_999, Want: ok(1, ms(900))},
		{At: ms(200), Cost: 2, Want: deny(1, ms(800), ms(800))},
		{At: ms(200), Cost: 1, Want: ok(0, ms(800))},
		// The 4,000,000th oldest unit was logged at 200ms.
		{At: ms(300), Cost: 4_000_000, Want: deny(0, ms(700), ms(900))},
		{At: ms(300), Cost: 4_000_001, Want: never(0, ms(700))},
		// The million of t0 stop counting at 1s; the oldest left is 100ms.
		{At: ms(1000), Cost: 1_000_000, Want: ok(0, ms(100))},
		{At: ms(1100), Cost: 3_000_000, Want: deny(2_999_999, ms(100), ms(100))},
		// The 200ms unit stops counting at 1.2s; the oldest left is 1s.
		{At: ms(1200), Cost: 3_000_000, Want: ok(0, ms(800))},
	})
}

// bucket runs the same table on token_bucket and gcra: 4/1s refills one
// unit every 250ms, exactly in doubles.
func (s *suite) bucket(t *testing.T, a ratelimit.Algorithm) {
	st := s.store(t)
	l := finish(t, limit(t, "b", a, "4/1s"))
	s.run(t, st, l, s.key(t, "k"), []step{
		{At: 0, Cost: 1, Want: ok(3, ms(250))},
		{At: 0, Cost: 3, Want: ok(0, ms(250))},
		{At: ms(100), Cost: 1, Want: deny(0, ms(150), ms(150))},
		{At: ms(100), Cost: 2, Want: deny(0, ms(150), ms(400))},
		{At: ms(250), Cost: 1, Want: ok(0, ms(250))},
		{At: ms(1250), Cost: 4, Want: ok(0, ms(250))},
		{At: ms(1250), Cost: 5, Want: never(0, ms(250))},
		// Clock back 250ms: no refill until the clock passes 1.25s again.
		{At: ms(1000), Cost: 1, Want: deny(0, ms(500), ms(500))},
		{At: ms(1750), Cost: 2, Want: ok(0, ms(250))},
	})
}

func (s *suite) burst(t *testing.T) {
	for _, a := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.GCRA} {
		t.Run(a.String(), func(t *testing.T) {
			st := s.store(t)
			l := limit(t, "b", a, "1/1s")
			l.Burst = 3
			finish(t, l)
			s.run(t, st, l, s.key(t, "k"), []step{
				{At: 0, Cost: 3, Want: ok(0, ms(1000))},
				{At: ms(500), Cost: 2, Want: deny(0, ms(500), ms(1500))},
				{At: ms(1000), Cost: 1, Want: ok(0, ms(1000))},
				{At: ms(1000), Cost: 4, Want: never(0, ms(1000))},
				{At: ms(5000), Cost: 1, Want: ok(2, ms(1000))},
			})
		})
	}
}

// waitBeyondMaxWait: a bucket of burst 200 refilled at one unit per 366
// days, emptied at once, needs 200 of those windows less a second to
// admit a cost of 200 again a second later, past ratelimit.MaxWait (100
// windows): the denial comes back at once with RetryAfter MaxWait, on
// every store alike; a cost of 100 (100 windows less the second gone) is
// still exact, and 101 is MaxWait too. (The probes of run cannot check a
// capped wait: nothing admits at it. Every instant stays below 2^53
// ticks, where GCRA's doubles are exact.)
func (s *suite) waitBeyondMaxWait(t *testing.T) {
	for _, a := range []ratelimit.Algorithm{ratelimit.TokenBucket, ratelimit.GCRA} {
		t.Run(a.String(), func(t *testing.T) {
			st := s.store(t)
			l := limit(t, "b", a, "1/366d")
			l.Burst = 200
			finish(t, l)
			key := s.key(t, "k")
			w := ratelimit.MaxWindow
			hit := func(cost int64) []ratelimit.Hit { return []ratelimit.Hit{{Limit: l, Key: key, Cost: cost}} }
			decideAll(t, st, 0, t0, hit(200), true, []ratelimit.Decision{withLimit(200, ok(0, w))})
			now := t0.Add(time.Second)
			for i, c := range []struct {
				cost  int64
				retry time.Duration
			}{{200, ratelimit.MaxWait}, {101, ratelimit.MaxWait}, {100, 100*w - time.Second}} {
				decideAll(t, st, 1+i, now, hit(c.cost), false, []ratelimit.Decision{withLimit(200, deny(0, w-time.Second, c.retry))})
			}
			blocker := s.blocker(t)
			checkWait(t, st, now, hit(100)[0], blocker, 100*w-time.Second, "cost 100 RetryAfter")
		})
	}
}

func (s *suite) concurrency(t *testing.T) {
	st := s.store(t)
	l := finish(t, &ratelimit.Limit{Name: t.Name() + "/c", Algorithm: ratelimit.Concurrency, MaxInFlight: 2})
	key := s.key(t, "k")
	s.run(t, st, l, key, []step{
		{At: 0, Cost: 1, Want: ok(1, 0)},
		{At: 0, Cost: 1, Want: ok(0, 0)},
		{At: ms(1), Cost: 1, Want: deny(0, 0, 0)}, // released at once: gives back nothing
		{At: ms(2), Op: release},
		{At: ms(3), Cost: 1, Want: ok(0, 0)},
		{At: ms(4), Cost: 3, Want: never(0, 0)},
		{At: ms(5), Op: release},
		// Time does not matter; the clock stepping back neither.
		{At: -ms(60000), Cost: 1, Want: ok(0, 0)},
		{At: ms(6), Op: release},
		{At: ms(7), Op: release},
		{At: ms(8), Cost: 2, Want: ok(0, 0)},
	})
	wantUsage(t, st, t0, l, key, []ratelimit.WindowUsage{{Used: 2, Remaining: 0}})
}

// shadowConcurrency: a shadow limit counts only what it allows itself, so
// releasing a request it would have denied gives back nothing (two
// overlapping requests on max_in_flight = 1 leave one unit held while the
// first is in flight).
func (s *suite) shadowConcurrency(t *testing.T) {
	st := s.store(t)
	l := finish(t, &ratelimit.Limit{Name: t.Name() + "/c", Algorithm: ratelimit.Concurrency, MaxInFlight: 1, Shadow: true})
	key := s.key(t, "k")
	ctx := context.Background()
	hit := []ratelimit.Hit{{Limit: l, Key: key, Cost: 1}}
	first, second := make([]ratelimit.Decision, 1), make([]ratelimit.Decision, 1)
	if ok, err := st.Decide(ctx, t0, hit, first); err != nil || !ok || !first[0].Counted {
		t.Fatalf("first Decide = %v %v %+v, want allowed and counted", ok, err, first[0])
	}
	if ok, err := st.Decide(ctx, t0, hit, second); err != nil || !ok || second[0].Allowed || second[0].Counted {
		t.Fatalf("second Decide = %v %v %+v, want allowed (shadow), the limit denying, nothing counted", ok, err, second[0])
	}
	releaseWant(t, st, hit, second, []ratelimit.WindowUsage{{Used: 1, Remaining: 0}})
	releaseWant(t, st, hit, first, []ratelimit.WindowUsage{{Used: 0, Remaining: 1}})
}

// concurrencyResetMidFlight: a slot taken before a Reset gives back nothing
// to the counter that follows it (max_in_flight = 1: A held, Reset, B
// held, A released: B's unit is still counted).
func (s *suite) concurrencyResetMidFlight(t *testing.T) {
	st := s.store(t)
	l := finish(t, &ratelimit.Limit{Name: t.Name() + "/c", Algorithm: ratelimit.Concurrency, MaxInFlight: 1})
	key := s.key(t, "k")
	ctx := context.Background()
	hit := []ratelimit.Hit{{Limit: l, Key: key, Cost: 1}}
	a, b := make([]ratelimit.Decision, 1), make([]ratelimit.Decision, 1)
	if ok, err := st.Decide(ctx, t0, hit, a); err != nil || !ok {
		t.Fatalf("A: %v %v", ok, err)
	}
	if err := st.Reset(ctx, l, key); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Decide(ctx, t0, hit, b); err != nil || !ok {
		t.Fatalf("B after the reset: %v %v", ok, err)
	}
	releaseWant(t, st, hit, a, []ratelimit.WindowUsage{{Used: 1, Remaining: 0}})
	releaseWant(t, st, hit, b, []ratelimit.WindowUsage{{Used: 0, Remaining: 1}})
}

func (s *suite) multiWindow(t *testing.T) {
	st := s.store(t)
	l := finish(t, limit(t, "mw", ratelimit.FixedWindow, "2/1s", "3/10s"))
	key := s.key(t, "k")
	limit3 := func(d ratelimit.Decision) ratelimit.Decision { d.Limit = 3; return d }
	s.run(t, st, l, key, []step{
		{At: 0, Cost: 1, Want: ok(1, ms(1000))},
		{At: ms(100), Cost: 1, Want: ok(0, ms(900))},
		{At: ms(200), Cost: 1, Want: deny(0, ms(800), ms(800))},
		// Window 0 has 1 of 2 left, window 1 none of 3: window 1 is reported.
		{At: ms(1000), Cost: 1, Want: limit3(on(1, ok(0, ms(9000))))},
		{At: ms(1500), Cost: 1, Want: limit3(on(1, deny(0, ms(8500), ms(8500))))},
		{At: ms(1500), Cost: 2, Want: limit3(on(1, deny(0, ms(8500), ms(8500))))},
		// Cost 4 exceeds window 0's capacity of 2: Never, on window 0.
		{At: ms(1500), Cost: 4, Want: never(1, ms(500))},
		{At: ms(10000), Cost: 2, Want: ok(0, ms(1000))},
	})
	wantUsage(t, st, t0.Add(ms(10000)), l, key, []ratelimit.WindowUsage{
		{Rate: l.Rates[0], Used: 2, Remaining: 0, Reset: ms(1000)},
		{Rate: l.Rates[1], Used: 2, Remaining: 1, Reset: ms(10000)},
	})
}

// decideAll runs one Decide and compares every decision.
func decideAll(t *testing.T, st ratelimit.Store, step int, now time.Time, hits []ratelimit.Hit, wantAllowed bool, want []ratelimit.Decision) {
	t.Helper()
	out := make([]ratelimit.Decision, len(hits))
	allowed, err := st.Decide(context.Background(), now, hits, out)
	if err != nil {
		t.Fatalf("step %d: Decide(t0+%v): %v", step, now.Sub(t0), err)
	}
	if allowed != wantAllowed {
		t.Errorf("step %d: Decide(t0+%v) allowed = %v, want %v", step, now.Sub(t0), allowed, wantAllowed)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Errorf("step %d: Decide(t0+%v) hit %d (%s, cost %d) = %+v, want %+v", step, now.Sub(t0), i, hits[i].Limit.Name, hits[i].Cost, out[i], want[i])
		}
	}
}

func wantUsage(t *testing.T, st ratelimit.Store, now time.Time, l *ratelimit.Limit, key string, want []ratelimit.WindowUsage) {
	t.Helper()
	got, err := st.Usage(context.Background(), now, l, key)
	if err != nil {
		t.Fatalf("Usage(%s): %v", l.Name, err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Usage(t0+%v, %s) = %+v, want %+v", now.Sub(t0), l.Name, got, want)
	}
}

// releaseWant releases the decisions d of hit (one limit and key) and
// compares the usage left at t0.
func releaseWant(t *testing.T, st ratelimit.Store, hit []ratelimit.Hit, d []ratelimit.Decision, want []ratelimit.WindowUsage) {
	t.Helper()
	if err := st.Release(context.Background(), hit, d); err != nil {
		t.Fatal(err)
	}
	wantUsage(t, st, t0, hit[0].Limit, hit[0].Key, want)
}

func withLimit(n int64, d ratelimit.Decision) ratelimit.Decision { d.Limit = n; return d }

func (s *suite) layered(t *testing.T) {
	st := s.store(t)
	a := finish(t, limit(t, "route", ratelimit.FixedWindow, "1/1s"))
	b := finish(t, limit(t, "global", ratelimit.SlidingWindowLog, "5/1s"))
	key := s.key(t, "client")
	hits := []ratelimit.Hit{{Limit: b, Key: key, Cost: 1}, {Limit: a, Key: key, Cost: 1}}
	decideAll(t, st, 0, t0, hits, true, []ratelimit.Decision{
		withLimit(5, ok(4, ms(1000))), withLimit(1, ok(0, ms(1000))),
	})
	// The route limit denies: the global one allows but is not counted.
	decideAll(t, st, 1, t0.Add(ms(100)), hits, false, []ratelimit.Decision{
		withLimit(5, ratelimit.Decision{Allowed: true, Remaining: 4, Reset: ms(900)}),
		withLimit(1, deny(0, ms(900), ms(900))),
	})
	wantUsage(t, st, t0.Add(ms(100)), b, key, []ratelimit.WindowUsage{{Rate: b.Rates[0], Used: 1, Remaining: 4, Reset: ms(900)}})
	// Vice versa: global exhausted by another route, the route limit
	// (reset since) is not consumed.
	other := finish(t, limit(t, "other", ratelimit.FixedWindow, "10/1s"))
	decideAll(t, st, 2, t0.Add(ms(1000)), []ratelimit.Hit{{Limit: b, Key: key, Cost: 5}, {Limit: other, Key: key, Cost: 1}}, true, []ratelimit.Decision{
		withLimit(5, ok(0, ms(1000))), withLimit(10, ok(9, ms(1000))),
	})
	decideAll(t, st, 3, t0.Add(ms(1100)), hits, false, []ratelimit.Decision{
		withLimit(5, deny(0, ms(900), ms(900))),
		withLimit(1, ratelimit.Decision{Allowed: true, Remaining: 1}),
	})
	wantUsage(t, st, t0.Add(ms(1100)), a, key, []ratelimit.WindowUsage{{Rate: a.Rates[0], Used: 0, Remaining: 1}})
}

func (s *suite) shadow(t *testing.T) {
	st := s.store(t)
	enf := finish(t, limit(t, "enforced", ratelimit.FixedWindow, "2/1s"))
	sh := limit(t, "shadow", ratelimit.FixedWindow, "1/1s")
	sh.Shadow = true
	finish(t, sh)
	key := s.key(t, "k")
	hits := []ratelimit.Hit{{Limit: sh, Key: key, Cost: 1}, {Limit: enf, Key: key, Cost: 1}}
	decideAll(t, st, 0, t0, hits, true, []ratelimit.Decision{
		withLimit(1, ok(0, ms(1000))), withLimit(2, ok(1, ms(1000))),
	})
	// The shadow limit denies but never changes the outcome; it is not
	// counted where it denied.
	decideAll(t, st, 1, t0.Add(ms(100)), hits, true, []ratelimit.Decision{
		withLimit(1, deny(0, ms(900), ms(900))), withLimit(2, ok(0, ms(900))),
	})
	// The enforced limit denies: the shadow one, allowed in a new
	// window, is not counted either.
	decideAll(t, st, 2, t0.Add(ms(1000)), []ratelimit.Hit{{Limit: sh, Key: key, Cost: 1}, {Limit: enf, Key: key, Cost: 3}}, false, []ratelimit.Decision{
		withLimit(1, ratelimit.Decision{Allowed: true, Remaining: 1}), withLimit(2, never(2, 0)),
	})
	// A request with only shadow hits is always allowed.
	decideAll(t, st, 3, t0.Add(ms(1000)), hits[:1], true, []ratelimit.Decision{withLimit(1, ok(0, ms(1000)))})
	decideAll(t, st, 4, t0.Add(ms(1001)), hits[:1], true, []ratelimit.Decision{withLimit(1, deny(0, ms(999), ms(999)))})
}

func (s *suite) neverInLayer(t *testing.T) {
	st := s.store(t)
	a := finish(t, limit(t, "small", ratelimit.TokenBucket, "2/1s"))
	b := finish(t, limit(t, "big", ratelimit.GCRA, "100/1s"))
	key := s.key(t, "k")
	decideAll(t, st, 0, t0, []ratelimit.Hit{{Limit: b, Key: key, Cost: 3}, {Limit: a, Key: key, Cost: 3}}, false, []ratelimit.Decision{
		withLimit(100, ratelimit.Decision{Allowed: true, Remaining: 100}), withLimit(2, never(2, 0)),
	})
	wantUsage(t, st, t0, b, key, []ratelimit.WindowUsage{{Rate: b.Rates[0], Used: 0, Remaining: 100}})
}

func (s *suite) usageAndReset(t *testing.T) {
	ctx := context.Background()
	for _, a := range ratelimit.Algorithms() {
		if a == ratelimit.Distinct {
			continue // it counts values, not costs: distinctUsage
		}
		t.Run(a.String(), func(t *testing.T) {
			st := s.store(t)
			l := &ratelimit.Limit{Name: t.Name(), Algorithm: a}
			switch a {
			case ratelimit.Concurrency:
				l.MaxInFlight = 4
			case ratelimit.Quota:
				l.Rates = []ratelimit.Rate{{Limit: 4, Window: 24 * time.Hour}}
			default:
				l.Rates = []ratelimit.Rate{{Limit: 4, Window: time.Second}}
			}
			finish(t, l)
			key := s.key(t, "k")
			rate := ratelimit.Rate{}
			if len(l.Rates) > 0 {
				rate = l.Rates[0]
			}
			wantUsage(t, st, t0, l, key, []ratelimit.WindowUsage{{Rate: rate, Used: 0, Remaining: 4}})
			decideAll(t, st, 0, t0, []ratelimit.Hit{{Limit: l, Key: key, Cost: 4}}, true, nil)
			got, err := st.Usage(ctx, t0, l, key)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Used != 4 || got[0].Remaining != 0 {
				t.Errorf("Usage after cost 4 = %+v, want Used 4, Remaining 0", got)
			}
			if a != ratelimit.Concurrency && got[0].Reset <= 0 {
				t.Errorf("Usage after cost 4: Reset = %v, want > 0", got[0].Reset)
			}
			if err := st.Reset(ctx, l, key); err != nil {
				t.Fatalf("Reset: %v", err)
			}
			wantUsage(t, st, t0, l, key, []ratelimit.WindowUsage{{Rate: rate, Used: 0, Remaining: 4}})
			decideAll(t, st, 1, t0, []ratelimit.Hit{{Limit: l, Key: key, Cost: 4}}, true, nil)
			// Reset of a key that holds nothing is not an error.
			if err := st.Reset(ctx, l, s.key(t, "absent")); err != nil {
				t.Fatalf("Reset(absent): %v", err)
			}
		})
	}
}

// keys checks that keys differing only in characters special to Redis
// (hash-tag braces, the ":" separator, NUL) are separate counters.
func (s *suite) keys(t *testing.T) {
	st := s.store(t)
	l := finish(t, limit(t, "k", ratelimit.FixedWindow, "1/1s"))
	other := finish(t, limit(t, "k2", ratelimit.FixedWindow, "1/1s"))
	base := s.key(t, "")
	suffixes := []string{"", "a", "a:", ":a", "a:b", "a\x00", "a\x00b", "\x00", "{", "}", "{}", "{a}", "a}{", "{" + base + "}", ":" + l.ID}
	hit := func(lim *ratelimit.Limit, sfx string) []ratelimit.Hit {
		return []ratelimit.Hit{{Limit: lim, Key: base + sfx, Cost: 1}}
	}
	for i, sfx := range suffixes {
		decideAll(t, st, i, t0, hit(l, sfx), true, []ratelimit.Decision{withLimit(1, ok(0, ms(1000)))})
	}
	for i, sfx := range suffixes {
		decideAll(t, st, i, t0, hit(l, sfx), false, []ratelimit.Decision{withLimit(1, deny(0, ms(1000), ms(1000)))})
		decideAll(t, st, i, t0, hit(other, sfx), true, []ratelimit.Decision{withLimit(1, ok(0, ms(1000)))})
	}
}

// sameKeyTwice checks two hits of one limit and key in one Decide: both
// costs count against one state.
func (s *suite) sameKeyTwice(t *testing.T) {
	st := s.store(t)
	l := finish(t, limit(t, "twice", ratelimit.FixedWindow, "3/1s"))
	key := s.key(t, "k")
	hits := []ratelimit.Hit{{Limit: l, Key: key, Cost: 2}, {Limit: l, Key: key, Cost: 2}}
	out := make([]ratelimit.Decision, 2)
	allowed, err := st.Decide(context.Background(), t0, hits, out)
	if err != nil {
		t.Fatal(err)
	}
	if allowed {
		t.Errorf("Decide(two hits of cost 2 on one 3/1s key) allowed, want denied: %+v", out)
	}
	wantUsage(t, st, t0, l, key, []ratelimit.WindowUsage{{Rate: l.Rates[0], Used: 0, Remaining: 3}})
}
