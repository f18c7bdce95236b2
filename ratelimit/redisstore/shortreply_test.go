package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// replyForms records the form of every decide reply a client reads: "int"
// for an integer, "str<n>" for a string of n bytes.
type replyForms struct {
	mu    sync.Mutex
	forms []string
}

func (r *replyForms) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *replyForms) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.record(cmd)
		return err
	}
}

func (r *replyForms) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			r.record(c)
		}
		return err
	}
}

func (r *replyForms) record(cmd redis.Cmder) {
	c, ok := cmd.(*redis.Cmd)
	if !ok || (cmd.Name() != "fcall" && cmd.Name() != "evalsha") || c.Err() != nil {
		return
	}
	f := fmt.Sprintf("%T", c.Val())
	switch v := c.Val().(type) {
	case int64:
		f = "int"
	case string:
		f = "str" + strconv.Itoa(len(v))
	}
	r.mu.Lock()
	r.forms = append(r.forms, f)
	r.mu.Unlock()
}

func (r *replyForms) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.forms
	r.forms = nil
	return f
}

// TestOneHitShortReply: a one-hit call that counts is answered with the
// window's state only (lua/common.lua "Reply") — fixed_window's count as
// an integer, gcra's TAT, token_bucket's tokens and instant and
// sliding_window_counter's newest bucket and counts as the bytes written
// with the local clock, the store's instant first under ratelimit.ClockStore —
// and every other one (a denial, a sliding counter whose state would
// not be shorter than the full reply) with the full packed reply; the
// decisions read from either are the memory store's.
func TestOneHitShortReply(t *testing.T) {
	fw := finished(t, ratelimit.Limit{Name: "fw", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(2, time.Hour)}})
	gc := finished(t, ratelimit.Limit{Name: "gcra", Algorithm: ratelimit.GCRA, Rates: []ratelimit.Rate{rate(2, time.Hour)}})
	tb := finished(t, ratelimit.Limit{Name: "tb", Algorithm: ratelimit.TokenBucket, Rates: []ratelimit.Rate{rate(2, time.Hour)}})
	// one bucket (the default precision), six and seven
	swc := finished(t, ratelimit.Limit{Name: "swc", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(2, time.Hour)}})
	swc6 := finished(t, ratelimit.Limit{Name: "swc6", Algorithm: ratelimit.SlidingWindowCounter, Precision: 10 * time.Minute, Rates: []ratelimit.Rate{rate(2, time.Hour)}})
	swc7 := finished(t, ratelimit.Limit{Name: "swc7", Algorithm: ratelimit.SlidingWindowCounter, Precision: 10 * time.Minute, Rates: []ratelimit.Rate{rate(2, 70*time.Minute)}})
	for _, tc := range []struct {
		clock  ratelimit.Clock
		script bool
		// counted and denied: the reply forms of each limit, three
		// calls each: two counted, one denied. A sliding counter's state
		// is N+2 doubles.
		want map[string][]string
	}{
		{ratelimit.ClockLocal, false, map[string][]string{
			"fw": {"int", "int", "str72"}, "gcra": {"str8", "str8", "str72"}, "tb": {"str16", "str16", "str72"},
			"swc": {"str24", "str24", "str72"}, "swc6": {"str64", "str64", "str72"}, "swc7": {"str72", "str72", "str72"}}},
		{ratelimit.ClockLocal, true, map[string][]string{
			"fw": {"int", "int", "str72"}, "gcra": {"str8", "str8", "str72"}, "tb": {"str16", "str16", "str72"},
			"swc": {"str24", "str24", "str72"}, "swc6": {"str64", "str64", "str72"}, "swc7": {"str72", "str72", "str72"}}},
		{ratelimit.ClockStore, false, map[string][]string{
			"fw": {"str16", "str16", "str72"}, "gcra": {"str16", "str16", "str72"}, "tb": {"str24", "str24", "str72"},
			"swc": {"str32", "str32", "str72"}, "swc6": {"str72", "str72", "str72"}, "swc7": {"str72", "str72", "str72"}}},
	} {
		t.Run(fmt.Sprintf("clock=%d/script=%v", tc.clock, tc.script), func(t *testing.T) {
			ctx := context.Background()
			rs, forms := formsStore(t, tc.clock, tc.script)
			ms := memstore.New(memstore.Options{})
			now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
			got, want := make([]ratelimit.Decision, 1), make([]ratelimit.Decision, 1)
			for _, l := range []*ratelimit.Limit{fw, gc, tb, swc, swc6, swc7} {
				forms.take()
				for i := range 3 {
					hits := []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}
					now = now.Add(time.Millisecond)
					ga, err := rs.Decide(ctx, now, hits, got)
					if err != nil {
						t.Fatal(err)
					}
					at := now
					if tc.clock == ratelimit.ClockStore {
						// the store decided at its own instant
						at = time.UnixMicro(got[0].At)
					}
					wa, err := ms.Decide(ctx, at, hits, want)
					if err != nil {
						t.Fatal(err)
					}
					want[0].At = got[0].At
					if ga != wa || got[0] != want[0] {
						t.Fatalf("%s call %d: got %v %+v, memstore %v %+v", l.Name, i, ga, got[0], wa, want[0])
					}
				}
				if f := fmt.Sprint(forms.take()); f != fmt.Sprint(tc.want[l.Name]) {
					t.Errorf("%s: reply forms %s, want %v", l.Name, f, tc.want[l.Name])
				}
			}
		})
	}
}

// TestOneHitStoreClockParity is TestOneHitParity on Redis's clock (the
// gateway's default): every one-hit decision, read from the short reply
// or the full one, is the memory store's at the instant the store decided
// at (Decision.At), field by field.
func TestOneHitStoreClockParity(t *testing.T) {
	ctx := context.Background()
	rs := newStore(t, newClient(t, standard.Addr), redisstore.Options{DenyCacheSize: -1, Clock: ratelimit.ClockStore})
	if err := rs.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	ms := memstore.New(memstore.Options{})
	limits := oneWindowLimits(t)
	rng := rand.New(rand.NewPCG(5, 6))
	got, want := make([]ratelimit.Decision, 1), make([]ratelimit.Decision, 1)
	deadline := time.Now().Add(3 * time.Second) // bounds the run on a slow machine
	for step := 0; step < 2000 && time.Now().Before(deadline); step++ {
		l := limits[rng.IntN(len(limits))]
		cost := int64(1)
		if rng.IntN(4) == 0 {
			cost = 1 + rng.Int64N(2*l.Params(0).Capacity)
		}
		hits := []ratelimit.Hit{{Limit: l, Key: "k" + strconv.Itoa(rng.IntN(2)), Cost: cost}}
		ga, err := rs.Decide(ctx, time.Now(), hits, got)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if got[0].At == 0 {
			t.Fatalf("step %d: no store instant in %+v", step, got[0])
		}
		wa, err := ms.Decide(ctx, time.UnixMicro(got[0].At), hits, want)
		if err != nil {
			t.Fatal(err)
		}
		want[0].At = got[0].At
		if ga != wa || got[0] != want[0] {
			t.Fatalf("step %d: %s cost %d on %s: got %v %+v, memstore %v %+v", step, l.Name, cost, hits[0].Key, ga, got[0], wa, want[0])
		}
	}
}

// naiveCounter is a sliding_window_counter written from its definition
// alone (ARCHITECTURE.md "Algorithm math"): the units counted per bucket
// of width P, the estimate at t the counts of the N buckets up to t's
// plus the one before them weighted by the part of it still in the
// window, and every wait found by trying each tick in turn. Instants only
// move forward.
type naiveCounter struct {
	l, p, n int64
	counts  map[int64]int64 // bucket index → units
}

func (m *naiveCounter) est(t int64) float64 {
	i, full := t/m.p, int64(0)
	for j := i - m.n + 1; j <= i; j++ {
		full += m.counts[j]
	}
	return float64(full) + float64(m.counts[i-m.n])*float64(m.p-(t-i*m.p))/float64(m.p)
}

func (m *naiveCounter) fits(t, cost int64) bool { return m.est(t)+float64(cost) <= float64(m.l) }

// wait is the first d ≥ 1 at which cost fits, 0 when it fits at t.
func (m *naiveCounter) wait(t, cost int64) int64 {
	if m.fits(t, cost) {
		return 0
	}
	for d := int64(1); ; d++ {
		if m.fits(t+d, cost) {
			return d
		}
	}
}

func (m *naiveCounter) remaining(t int64) int64 {
	return min(max(m.l-int64(math.Ceil(m.est(t))), 0), m.l)
}

func (m *naiveCounter) decide(t, cost int64) ratelimit.Decision {
	d := ratelimit.Decision{Limit: m.l}
	if w := m.wait(t, cost); w > 0 {
		d.RetryAfter = time.Duration(w) * ratelimit.Tick
	} else {
		d.Allowed, d.Counted = true, true
		m.counts[t/m.p] += cost
	}
	d.Remaining = m.remaining(t)
	if d.Remaining < m.l {
		d.Reset = time.Duration(m.wait(t, d.Remaining+1)) * ratelimit.Tick
	}
	return d
}

// TestSlidingCounterShortReply drives sliding_window_counter limits of 1,
// 4, 6 and 7 buckets through the Redis store on both clocks, Function
// library and EVALSHA, and requires every decision to be a naive model's
// (naiveCounter): the counted ones read from the short reply where the
// state is shorter than the full one, the rest from the full reply. With
// the local clock each decision's Remaining and Reset are also the
// Usage the store reports at the same instant: the full reply's
// arithmetic, done in Redis, on the state the short reply carried.
func TestSlidingCounterShortReply(t *testing.T) {
	limits := []*ratelimit.Limit{
		finished(t, ratelimit.Limit{Name: "n1", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(5, 40*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "n4", Algorithm: ratelimit.SlidingWindowCounter, Precision: 10 * time.Millisecond, Rates: []ratelimit.Rate{rate(7, 40*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "n6", Algorithm: ratelimit.SlidingWindowCounter, Precision: 10 * time.Millisecond, Rates: []ratelimit.Rate{rate(9, 60*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "n7", Algorithm: ratelimit.SlidingWindowCounter, Precision: 10 * time.Millisecond, Rates: []ratelimit.Rate{rate(6, 70*time.Millisecond)}}),
	}
	for _, tc := range []struct {
		clock  ratelimit.Clock
		script bool
	}{{ratelimit.ClockLocal, false}, {ratelimit.ClockLocal, true}, {ratelimit.ClockStore, false}} {
		t.Run(fmt.Sprintf("clock=%d/script=%v", tc.clock, tc.script), func(t *testing.T) {
			ctx := context.Background()
			rs, forms := formsStore(t, tc.clock, tc.script)
			rng := rand.New(rand.NewPCG(7, uint64(tc.clock)))
			got := make([]ratelimit.Decision, 1)
			for _, l := range limits {
				p := l.Params(0)
				m := &naiveCounter{l: p.Limit, p: p.Precision, n: p.Buckets, counts: map[int64]int64{}}
				now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(1e5)) * time.Microsecond)
				short, counted := 0, 0
				forms.take()
				for step := range 150 {
					// a few ms a step: time runs ahead of the keys' TTLs
					// (on the store's clock, real time: a pause)
					dt := time.Duration(rng.Int64N(8000)) * time.Microsecond
					now = now.Add(dt)
					if tc.clock == ratelimit.ClockStore {
						time.Sleep(dt / 2)
					}
					cost := 1 + rng.Int64N(3)
					hits := []ratelimit.Hit{{Limit: l, Key: "k", Cost: cost}}
					if _, err := rs.Decide(ctx, now, hits, got); err != nil {
						t.Fatalf("%s step %d: %v", l.Name, step, err)
					}
					at := now.UnixMicro()
					if tc.clock == ratelimit.ClockStore {
						at = got[0].At
					}
					want := m.decide(at, cost)
					want.At = got[0].At
					if got[0] != want {
						t.Fatalf("%s step %d cost %d at %d: got %+v, naive model %+v", l.Name, step, cost, at, got[0], want)
					}
					f := forms.take()
					if got[0].Counted {
						counted++
						if len(f) == 1 && f[0] != "str72" {
							short++
						}
					}
					if tc.clock != ratelimit.ClockLocal {
						continue
					}
					u, err := rs.Usage(ctx, now, l, "k")
					if err != nil {
						t.Fatal(err)
					}
					forms.take()
					if u[0].Remaining != got[0].Remaining || u[0].Reset != got[0].Reset {
						t.Fatalf("%s step %d: decided remaining %d reset %v, usage (full reply) %+v",
							l.Name, step, got[0].Remaining, got[0].Reset, u[0])
					}
				}
				// the short reply where the state is shorter: N+2 doubles,
				// one more with the store clock, below the full reply's 9
				shortOK := p.Buckets+2 < 9
				if tc.clock == ratelimit.ClockStore {
					shortOK = p.Buckets+3 < 9
				}
				if counted < 10 || (short == counted) != shortOK || (short == 0) == shortOK {
					t.Errorf("%s: %d of %d counted decisions from a short reply (short reply expected: %v)", l.Name, short, counted, shortOK)
				}
			}
		})
	}
}

// formsStore is a ready store on the shared standalone server without a
// deny cache, with the clock and script path given, whose replies are
// recorded by form.
func formsStore(t *testing.T, clock ratelimit.Clock, script bool) (*redisstore.Store, *replyForms) {
	t.Helper()
	c := newClient(t, standard.Addr)
	forms := &replyForms{}
	c.AddHook(forms)
	rs := newStore(t, c, redisstore.Options{DenyCacheSize: -1, NoFunctions: script, Clock: clock})
	if err := rs.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rs, forms
}
