package hybrid_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/hybrid"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

func limit(t *testing.T, alg ratelimit.Algorithm, n int64, w time.Duration, b *ratelimit.Batch) *ratelimit.Limit {
	t.Helper()
	l := &ratelimit.Limit{Name: "l" + strconv.Itoa(int(n)), Algorithm: alg, Rates: []ratelimit.Rate{{Limit: n, Window: w}}, Batch: b}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	return l
}

// counting is a store that counts the Decide calls reaching it.
type counting struct {
	ratelimit.Store
	calls int
}

func (c *counting) Decide(ctx context.Context, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) (bool, error) {
	c.calls++
	return c.Store.Decide(ctx, now, hits, out)
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// TestHotKeyCallsPerLease: a hot key under its limit costs the store one
// call per lease once leases reach their size, and admits every request;
// once its window is spent, denials come from the cached denial.
func TestHotKeyCallsPerLease(t *testing.T) {
	back := &counting{Store: memstore.New(memstore.Options{})}
	s := hybrid.New(back, hybrid.Options{})
	l := limit(t, ratelimit.FixedWindow, 10_000, time.Minute, &ratelimit.Batch{Interval: time.Second, Lease: 100})
	out := make([]ratelimit.Decision, 1)
	hit := []ratelimit.Hit{{Limit: l, Key: "hot", Cost: 1}}
	now := t0
	for i := range 5000 {
		now = now.Add(100 * time.Microsecond)
		ok, err := s.Decide(context.Background(), now, hit, out)
		if err != nil || !ok {
			t.Fatalf("request %d: allowed=%v err=%v", i, ok, err)
		}
		if out[0].Remaining < 0 || out[0].Remaining > 10_000 || out[0].Limit != 10_000 {
			t.Fatalf("request %d: %+v", i, out[0])
		}
	}
	// Slow start 1, 2, 4, ..., 64, then 100 per lease: 7 + 4873/100.
	if back.calls > 60 {
		t.Fatalf("%d store calls for 5000 requests with leases of 100", back.calls)
	}
	u, _ := back.Usage(context.Background(), now, l, "hot")
	if u[0].Used < 5000 || u[0].Used > 5100 {
		t.Fatalf("the store counted %d units for 5000 admitted", u[0].Used)
	}
	// Spend the window, then hammer: the denial is cached per interval.
	for range 10_000 {
		now = now.Add(time.Microsecond)
		s.Decide(context.Background(), now, hit, out)
	}
	before := back.calls
	denied := 0
	for range 1000 {
		now = now.Add(100 * time.Microsecond) // 0.1 s in all
		if ok, _ := s.Decide(context.Background(), now, hit, out); !ok {
			denied++
			if out[0].RetryAfter <= 0 {
				t.Fatalf("denial without RetryAfter: %+v", out[0])
			}
		}
	}
	if denied != 1000 || back.calls-before > 2 {
		t.Fatalf("%d of 1000 denied with %d store calls: want all, from the cached denial", denied, back.calls-before)
	}
}

// TestMixedRequestAtomic: a request with a batched hit admitted from its
// lease and an exact hit that denies is denied whole: the lease keeps its
// units and the exact counter is untouched.
func TestMixedRequestAtomic(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	back := &counting{Store: mem}
	s := hybrid.New(back, hybrid.Options{})
	b := limit(t, ratelimit.FixedWindow, 1000, time.Hour, &ratelimit.Batch{Interval: time.Minute, Lease: 50})
	x := limit(t, ratelimit.FixedWindow, 3, time.Hour, nil)
	out := make([]ratelimit.Decision, 2)
	now := t0
	// Warm the lease up on the batched limit alone.
	for range 20 {
		now = now.Add(time.Millisecond)
		if ok, err := s.Decide(context.Background(), now, []ratelimit.Hit{{Limit: b, Key: "k", Cost: 1}}, out); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	hits := []ratelimit.Hit{{Limit: b, Key: "k", Cost: 1}, {Limit: x, Key: "k", Cost: 1}}
	admitted := 0
	for range 10 {
		now = now.Add(time.Millisecond)
		ok, err := s.Decide(context.Background(), now, hits, out)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			admitted++
			if !out[0].Counted || !out[1].Counted {
				t.Fatalf("allowed but not counted: %+v", out)
			}
		} else if out[0].Counted || out[1].Counted || !out[0].Allowed || out[1].Allowed {
			t.Fatalf("denied by the exact hit: %+v", out)
		}
	}
	if admitted != 3 {
		t.Fatalf("admitted %d mixed requests, want 3 (the exact limit)", admitted)
	}
	// The batched limit alone now: 20 + 3 admitted; its lease units were
	// given back locally for the 7 denied requests, so the next requests
	// come from the lease without a call.
	before := back.calls
	for range 5 {
		now = now.Add(time.Millisecond)
		if ok, _ := s.Decide(context.Background(), now, hits[:1], out); !ok {
			t.Fatal("batched hit denied")
		}
	}
	if back.calls != before {
		t.Fatalf("%d store calls: the lease lost the units of denied requests", back.calls-before)
	}
}

// TestWindowEndsLease: a fixed window's lease ends with its window, even
// with a longer interval: units of one window are never admitted in the
// next.
func TestWindowEndsLease(t *testing.T) {
	back := &counting{Store: memstore.New(memstore.Options{})}
	s := hybrid.New(back, hybrid.Options{})
	l := limit(t, ratelimit.FixedWindow, 100, time.Second, &ratelimit.Batch{Interval: time.Minute, Lease: 50})
	out := make([]ratelimit.Decision, 1)
	hit := []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}
	now := t0.Add(900 * time.Millisecond)
	for range 10 { // leases 1, 2, 4, 8: 4 calls, 15 units counted
		now = now.Add(time.Millisecond)
		s.Decide(context.Background(), now, hit, out)
	}
	before := back.calls
	now = t0.Add(time.Second) // the next window: the lease's 5 units left are gone
	s.Decide(context.Background(), now, hit, out)
	if back.calls != before+1 {
		t.Fatal("a unit leased in one window was admitted in the next")
	}
}

// TestTableBounded: a client inventing a key per request cannot grow the
// lease table past MaxKeys; past it hits are decided exactly.
func TestTableBounded(t *testing.T) {
	back := &counting{Store: memstore.New(memstore.Options{})}
	s := hybrid.New(back, hybrid.Options{MaxKeys: 64})
	l := limit(t, ratelimit.FixedWindow, 5, time.Hour, &ratelimit.Batch{Interval: time.Minute, Lease: 5})
	out := make([]ratelimit.Decision, 1)
	for i := range 10_000 {
		if ok, err := s.Decide(context.Background(), t0, []ratelimit.Hit{{Limit: l, Key: strconv.Itoa(i), Cost: 1}}, out); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	if st := s.Stats(); st.Exact < 10_000-64 {
		t.Fatalf("%d of 10000 new keys decided exactly with a table of 64", st.Exact)
	}
}

// TestWrapCanceler: the wrapped store cancels exactly when the store it
// wraps does.
func TestWrapCanceler(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	_, memCancels := any(mem).(ratelimit.Canceler)
	_, wrapCancels := hybrid.Wrap(mem, hybrid.Options{}).(ratelimit.Canceler)
	if memCancels != wrapCancels {
		t.Fatalf("memstore cancels: %v, wrapped: %v", memCancels, wrapCancels)
	}
	_, plain := hybrid.Wrap(&counting{Store: mem}, hybrid.Options{}).(ratelimit.Canceler)
	if plain {
		t.Fatal("a wrapped store that cannot cancel claims to")
	}
}

// TestPeekAndTakeExact: peek and take hits of a batched limit go to the
// store as they are: a take past the limit is counted there, a peek
// counts nothing.
func TestPeekAndTakeExact(t *testing.T) {
	back := &counting{Store: memstore.New(memstore.Options{})}
	s := hybrid.New(back, hybrid.Options{})
	l := limit(t, ratelimit.FixedWindow, 10, time.Hour, &ratelimit.Batch{Interval: time.Minute, Lease: 5})
	out := make([]ratelimit.Decision, 1)
	for range 3 {
		if ok, _ := s.Decide(context.Background(), t0, []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1, Mode: ratelimit.HitPeek}}, out); !ok {
			t.Fatal("peek denied")
		}
	}
	if ok, _ := s.Decide(context.Background(), t0, []ratelimit.Hit{{Limit: l, Key: "k", Cost: 12, Mode: ratelimit.HitTake}}, out); !ok {
		t.Fatal("take denied")
	}
	u, _ := back.Usage(context.Background(), t0, l, "k")
	if back.calls != 4 || u[0].Used != 10 {
		t.Fatalf("%d store calls, used %d: want 4 calls and the take counted", back.calls, u[0].Used)
	}
}

// TestBurstSingleFlight: 400 concurrent requests on one cold key share
// the lease calls: a request that finds a lease being taken waits for it
// instead of asking the store itself.
func TestBurstSingleFlight(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	back := &slowCounting{Store: mem}
	s := hybrid.New(back, hybrid.Options{})
	l := limit(t, ratelimit.FixedWindow, 100_000, time.Hour, &ratelimit.Batch{Interval: time.Minute, Lease: 100})
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]ratelimit.Decision, 1)
			if ok, err := s.Decide(context.Background(), t0, []ratelimit.Hit{{Limit: l, Key: "hot", Cost: 1}}, out); ok && err == nil {
				admitted.Add(1)
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 400 {
		t.Fatalf("admitted %d of 400", admitted.Load())
	}
	// Leases 1, 2, 4, ..., 64, then 100s: about a dozen calls, not 400.
	if c := back.calls.Load(); c > 20 {
		t.Fatalf("%d store calls for a burst of 400 on one key", c)
	}
}

// slowCounting counts Decide calls and makes each take a millisecond, so
// that a burst overlaps them.
type slowCounting struct {
	ratelimit.Store
	calls atomic.Int64
}

func (c *slowCounting) Decide(ctx context.Context, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) (bool, error) {
	c.calls.Add(1)
	time.Sleep(time.Millisecond)
	return c.Store.Decide(ctx, now, hits, out)
}

// TestSteadyFleetStrandsNothing: two gateways dealt 30 requests a second
// in turn (each sees one every 67 ms, within the 100 ms interval) admit
// the whole limit of every window: a lease that is used up gives way to
// the next one whole (a used-up lease's end once cut the next lease
// short, stranding a third of the budget).
func TestSteadyFleetStrandsNothing(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	var gws []*hybrid.Store
	for range 2 {
		gws = append(gws, hybrid.New(mem, hybrid.Options{}))
	}
	l := limit(t, ratelimit.FixedWindow, 100, 10*time.Second, &ratelimit.Batch{Interval: 100 * time.Millisecond, Lease: 10})
	out := make([]ratelimit.Decision, 1)
	per := map[int64]int{}
	for i := range 1800 {
		now := t0.Add(time.Duration(i) * time.Second / 30)
		if ok, _ := gws[i%2].Decide(context.Background(), now, []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}, out); ok {
			per[now.Unix()/10]++
		}
	}
	for w, n := range per {
		if n != 100 {
			t.Errorf("window %d admitted %d of 300 offered, want the limit, 100", w, n)
		}
	}
}

// TestGiveBackAlongsideLease: a request that ends a lease with units left
// and takes a new one sends the give-back alongside its store call, not
// after it (one round trip of latency, not two): here the store answers
// the lease only once the give-back has reached it.
func TestGiveBackAlongsideLease(t *testing.T) {
	back := &meeting{Store: memstore.New(memstore.Options{}), returned: make(chan struct{})}
	s := hybrid.New(back, hybrid.Options{})
	l := limit(t, ratelimit.FixedWindow, 1000, time.Hour, &ratelimit.Batch{Interval: 10 * time.Millisecond, Lease: 10})
	hit := []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}
	out := make([]ratelimit.Decision, 1)
	for _, at := range []time.Duration{0, time.Millisecond} { // leases of 1, then 2: one unit left
		if ok, err := s.Decide(context.Background(), t0.Add(at), hit, out); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	back.wait.Store(true)
	// Past the interval: the lease ends with a unit left, given back.
	if ok, err := s.Decide(context.Background(), t0.Add(20*time.Millisecond), hit, out); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if st := s.Stats(); st.Returned != 1 || back.late.Load() {
		t.Fatalf("%+v; store call answered before the give-back arrived: %v", st, back.late.Load())
	}
}

// meeting is a store whose Decide, once wait is set, answers only after a
// Return has arrived (or, after 5 s, anyway, noting it in late).
type meeting struct {
	*memstore.Store
	wait     atomic.Bool
	late     atomic.Bool
	returned chan struct{}
	once     sync.Once
}

func (m *meeting) Decide(ctx context.Context, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) (bool, error) {
	if m.wait.Load() {
		select {
		case <-m.returned:
		case <-time.After(5 * time.Second):
			m.late.Store(true)
		}
	}
	return m.Store.Decide(ctx, now, hits, out)
}

func (m *meeting) Return(ctx context.Context, now time.Time, hits []ratelimit.Hit, at []time.Time) error {
	m.once.Do(func() { close(m.returned) })
	return m.Store.Return(ctx, now, hits, at)
}

// timedGate is a store that bounds its calls by a budget of its own (as
// the Redis store does) and holds the first lease call of a key until
// released.
type timedGate struct {
	*gate
	budget time.Duration
}

func (g timedGate) CallTimeout() time.Duration { return g.budget }

// TestSelfTimedLeaseWait: over a store that bounds its own calls, the
// hybrid store says so (the gateway then sets no deadline per request),
// and a request that waits, without a deadline of its own, for another's
// lease call on its key gives up after that budget instead of waiting as
// long as the call is held.
func TestSelfTimedLeaseWait(t *testing.T) {
	l := limit(t, ratelimit.FixedWindow, 1000, time.Hour, &ratelimit.Batch{Interval: time.Minute, Lease: 10})
	g := newGate(memstore.New(memstore.Options{}), func(h ratelimit.Hit) bool { return h.Key == "held" })
	s := hybrid.Wrap(timedGate{gate: g, budget: 50 * time.Millisecond}, hybrid.Options{})
	st, ok := s.(interface{ CallTimeout() time.Duration })
	if !ok || st.CallTimeout() != 50*time.Millisecond {
		t.Fatalf("the wrapped store does not report its budget: %v", ok)
	}
	if d := hybrid.New(memstore.New(memstore.Options{}), hybrid.Options{}).CallTimeout(); d != 0 {
		t.Fatalf("CallTimeout over a store without a budget = %v, want 0", d)
	}
	hit := []ratelimit.Hit{{Limit: l, Key: "held", Cost: 1}}
	owner := make(chan error, 1)
	go func() {
		_, err := s.Decide(context.Background(), t0, hit, make([]ratelimit.Decision, 1))
		owner <- err
	}()
	<-g.entered // the owner's lease call is held
	// Whatever happens, the held call ends after 5 s.
	release := time.AfterFunc(5*time.Second, func() { close(g.release) })
	_, err := s.Decide(context.Background(), t0, hit, make([]ratelimit.Decision, 1))
	if release.Stop() {
		close(g.release)
	} else {
		t.Errorf("the waiter returned only once the held lease call was released (%v): its wait was not bounded by the store's budget", err)
	}
	if !errors.Is(err, ratelimit.ErrStore) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waiter: want a store timeout, got %v", err)
	}
	if err := <-owner; err != nil {
		t.Errorf("owner: %v", err)
	}
}
