package hybrid_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/hybrid"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// TestHostile: what a client can send at a batched limit to dodge it or
// make the gateway spend memory or store calls, one row each (the rows of
// docs/hostile-inputs.md "Batched limits").
func TestHostile(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a new key per request: the lease table stays bounded, past it hits are exact", func(t *testing.T) {
			back := &counting{Store: memstore.New(memstore.Options{})}
			s := hybrid.New(back, hybrid.Options{MaxKeys: 32})
			l := limit(t, ratelimit.FixedWindow, 5, time.Hour, &ratelimit.Batch{Interval: time.Minute, Lease: 5})
			out := make([]ratelimit.Decision, 1)
			for i := range 5000 {
				s.Decide(ctx, t0, []ratelimit.Hit{{Limit: l, Key: "k" + strconv.Itoa(i), Cost: 1}}, out)
			}
			if st := s.Stats(); st.Exact < 5000-32 {
				t.Fatalf("%d of 5000 keys decided exactly with room for 32", st.Exact)
			}
		}},
		{"a new key per request, 150,000 of them: the table at its default bound (100,000 keys) holds under 64 MB", func(t *testing.T) {
			l := limit(t, ratelimit.SlidingWindowCounter, 1000, time.Hour, &ratelimit.Batch{Interval: time.Minute, Lease: 10})
			out := make([]ratelimit.Decision, 1)
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			// A store that admits everything and keeps nothing, so the
			// heap measured is the lease table's.
			s := hybrid.New(admitAll{}, hybrid.Options{})
			key := make([]byte, 43) // a counter key: base64url of a SHA-256
			for i := range 150_000 {
				k := strconv.AppendInt(key[:0], int64(i), 36)
				k = append(k, key[len(k):43]...)
				s.Decide(ctx, t0, []ratelimit.Hit{{Limit: l, Key: string(k), Cost: 1}}, out)
			}
			runtime.GC()
			runtime.ReadMemStats(&m1)
			held := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
			st := s.Stats()
			t.Logf("%.1f MB for %d leased keys (%d decided exactly)", float64(held)/1e6, st.Leases, st.Exact)
			if held > 64<<20 || st.Leases > 100_000 || st.Exact < 50_000 {
				t.Fatalf("%d bytes held for %d leases, %d exact", held, st.Leases, st.Exact)
			}
			runtime.KeepAlive(s)
		}},
		{"a declared cost above the lease: the lease is the cost, nothing more", func(t *testing.T) {
			mem := memstore.New(memstore.Options{})
			s := hybrid.New(mem, hybrid.Options{})
			l := limit(t, ratelimit.FixedWindow, 1000, time.Hour, &ratelimit.Batch{Interval: time.Minute, Lease: 10})
			out := make([]ratelimit.Decision, 1)
			s.Decide(ctx, t0, []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}, out) // a first lease
			if ok, _ := s.Decide(ctx, t0, []ratelimit.Hit{{Limit: l, Key: "k", Cost: 500}}, out); !ok {
				t.Fatal("cost 500 of 1000 denied")
			}
			if u, _ := mem.Usage(ctx, t0, l, "k"); u[0].Used != 501 {
				t.Fatalf("the store counted %d, want 501: a large cost takes no spare units", u[0].Used)
			}
		}},
		{"a cost above the capacity: never, nothing counted, no denial cached", func(t *testing.T) {
			back := &counting{Store: memstore.New(memstore.Options{})}
			s := hybrid.New(back, hybrid.Options{})
			l := limit(t, ratelimit.FixedWindow, 10, time.Hour, &ratelimit.Batch{Interval: time.Minute, Lease: 5})
			out := make([]ratelimit.Decision, 1)
			if ok, _ := s.Decide(ctx, t0, []ratelimit.Hit{{Limit: l, Key: "k", Cost: 11}}, out); ok || !out[0].Never {
				t.Fatalf("cost 11 of 10: %+v", out[0])
			}
			if ok, _ := s.Decide(ctx, t0, []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}, out); !ok {
				t.Fatal("a cost-1 request after an impossible one was denied")
			}
		}},
		{"requests spread over every gateway: a fixed window still admits its limit, no more", func(t *testing.T) {
			mem := memstore.New(memstore.Options{})
			var fleet []*hybrid.Store
			for range 8 {
				fleet = append(fleet, hybrid.New(mem, hybrid.Options{}))
			}
			l := limit(t, ratelimit.FixedWindow, 50, time.Hour, &ratelimit.Batch{Interval: time.Minute, Lease: 20})
			out := make([]ratelimit.Decision, 1)
			admitted := 0
			for i := range 2000 {
				if ok, _ := fleet[i%8].Decide(ctx, t0.Add(time.Duration(i)*time.Millisecond), []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}, out); ok {
					admitted++
				}
			}
			if admitted > 50 {
				t.Fatalf("8 gateways admitted %d on a limit of 50", admitted)
			}
		}},
		{"a flood on a denied key: one store call per gateway per interval", func(t *testing.T) {
			back := &counting{Store: memstore.New(memstore.Options{})}
			s := hybrid.New(back, hybrid.Options{})
			l := limit(t, ratelimit.FixedWindow, 3, time.Hour, &ratelimit.Batch{Interval: 100 * time.Millisecond, Lease: 3})
			out := make([]ratelimit.Decision, 1)
			now := t0
			for range 10 {
				s.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}, out)
			}
			before := back.calls
			for range 10_000 { // one second
				now = now.Add(100 * time.Microsecond)
				if ok, _ := s.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}, out); ok {
					t.Fatal("admitted past the limit")
				}
			}
			if c := back.calls - before; c > 11 {
				t.Fatalf("%d store calls for a second of flood, want one per 100 ms", c)
			}
		}},
		{"new keys, or a key hit in bursts that stop mid-lease: at most one give-back call per lease, none for a key seen once", func(t *testing.T) {
			mem := memstore.New(memstore.Options{})
			s := hybrid.New(mem, hybrid.Options{})
			l := limit(t, ratelimit.FixedWindow, 1000, time.Hour, &ratelimit.Batch{Interval: 10 * time.Millisecond, Lease: 50})
			out := make([]ratelimit.Decision, 1)
			now := t0
			for i := range 2000 { // each key twice, an interval apart
				now = now.Add(time.Millisecond)
				s.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: "k" + strconv.Itoa(i%1000), Cost: 1}}, out)
			}
			if st := s.Stats(); st.Returns != 0 {
				t.Fatalf("%d give-back calls for keys whose leases were their requests' cost", st.Returns)
			}
			for range 200 { // bursts of 7 requests, then a pause past the interval
				for range 7 {
					now = now.Add(100 * time.Microsecond)
					s.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: "hot", Cost: 1}}, out)
				}
				now = now.Add(20 * time.Millisecond)
			}
			if st := s.Stats(); st.Returns > st.Leases || st.Returns == 0 {
				t.Fatalf("%d give-back calls for %d leases", st.Returns, st.Leases)
			}
		}},
		{"a flood of made-up keys at a full table: a quiet key's ended lease is dropped with its units given back, not stranded", func(t *testing.T) {
			mem := memstore.New(memstore.Options{})
			s := hybrid.New(mem, hybrid.Options{MaxKeys: 16})
			l := limit(t, ratelimit.FixedWindow, 1000, time.Hour, &ratelimit.Batch{Interval: 10 * time.Millisecond, Lease: 50})
			out := make([]ratelimit.Decision, 1)
			for i := range 10 { // leases 1, 2, 4, 8: 15 counted, 10 admitted
				s.Decide(ctx, t0.Add(time.Duration(i)*time.Microsecond), []ratelimit.Hit{{Limit: l, Key: "quiet", Cost: 1}}, out)
			}
			later := t0.Add(time.Second) // the lease has ended
			for i := range 2000 {
				s.Decide(ctx, later.Add(time.Duration(i)*time.Microsecond), []ratelimit.Hit{{Limit: l, Key: "made-up" + strconv.Itoa(i), Cost: 1}}, out)
			}
			s.Flush(ctx, later.Add(time.Second)) // as at shutdown
			if u, _ := mem.Usage(ctx, later, l, "quiet"); u[0].Used != 10 {
				t.Fatalf("the store counts %d units of the quiet key, 10 were admitted: the sweep stranded its lease's units", u[0].Used)
			}
		}},
		{"a gateway whose clock is an hour off the store's (the store decides on its own clock): its leases go back to the store's windows", func(t *testing.T) {
			for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindowCounter} {
				back := &ownClock{Store: memstore.New(memstore.Options{}), skew: time.Hour + 7*time.Second}
				s := hybrid.New(back, hybrid.Options{})
				l := limit(t, alg, 1000, time.Minute, &ratelimit.Batch{Interval: time.Second, Lease: 16})
				out := make([]ratelimit.Decision, 1)
				for i := range 20 { // leases 1, 2, 4, 8, 16: 31 counted
					s.Decide(ctx, t0.Add(time.Duration(i)*time.Millisecond), []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}, out)
				}
				s.Flush(ctx, t0.Add(30*time.Millisecond))
				if u, _ := back.Usage(ctx, t0.Add(time.Second), l, "k"); u[0].Used != 20 {
					t.Fatalf("%s: the store counts %d units after the flush; 20 were admitted", l.Algorithm, u[0].Used)
				}
			}
		}},
		{"a request whose exact limit denies, answered after the window turned and the key took its next lease: its unit stays in the old window", func(t *testing.T) {
			// The request reserves a unit of the batched limit's lease near
			// the end of a window; its exact limit (spent) holds its store
			// call until another request, in the next window, has taken
			// the key's next lease; then it is denied and gives its unit
			// back. Counted in the old window, that unit must not be
			// admitted in the new one.
			mem := memstore.New(memstore.Options{})
			fl := limit(t, ratelimit.FixedWindow, 10, time.Minute, &ratelimit.Batch{Interval: time.Minute, Lease: 10})
			ex := limit(t, ratelimit.FixedWindow, 1, time.Hour, nil)
			back := newGate(mem, func(h ratelimit.Hit) bool { return h.Limit == ex })
			s := hybrid.New(back, hybrid.Options{})
			out := make([]ratelimit.Decision, 2)
			one := []ratelimit.Hit{{Limit: fl, Key: "k", Cost: 1}}
			// Leases of 1, then 2: one unit left in the first window.
			for _, at := range []time.Duration{time.Second, 2 * time.Second} {
				if ok, err := s.Decide(ctx, t0.Add(at), one, out); !ok || err != nil {
					t.Fatal(ok, err)
				}
			}
			// Spend the exact limit's key (the store is called directly).
			if ok, _ := mem.Decide(ctx, t0, []ratelimit.Hit{{Limit: ex, Key: "e", Cost: 1}}, out); !ok {
				t.Fatal("exact limit not spent")
			}
			done := make(chan bool)
			go func() {
				ok, _ := s.Decide(ctx, t0.Add(59*time.Second),
					[]ratelimit.Hit{{Limit: fl, Key: "k", Cost: 1}, {Limit: ex, Key: "e", Cost: 1}}, make([]ratelimit.Decision, 2))
				done <- ok
			}()
			<-back.entered
			// Next window: the key's next lease, while the request waits.
			admitted := 0
			now := t0.Add(61 * time.Second)
			if ok, _ := s.Decide(ctx, now, one, out); ok {
				admitted++
			}
			close(back.release)
			if <-done {
				t.Fatal("the request over its exact limit was admitted")
			}
			for range 100 {
				now = now.Add(500 * time.Millisecond)
				if ok, _ := s.Decide(ctx, now, one, out); ok {
					admitted++
				}
			}
			if now.Sub(t0) >= 2*time.Minute {
				t.Fatalf("the loop left the second window (%v)", now.Sub(t0))
			}
			if admitted != 10 {
				t.Fatalf("the second window admitted %d of a limit of 10", admitted)
			}
		}},
		{"made-up keys at a full lease table while a quiet key's lease call is in flight: the lease is kept, its units admitted or given back", func(t *testing.T) {
			// One entry per shard: every new key at a full shard sweeps
			// it. The victim's lease call (4 units, its last one used up)
			// is held while made-up keys sweep the shards at an instant
			// its previous lease has ended by; a sweep must not drop the
			// entry the call settles into, or its 3 spare units stay
			// counted by the store, neither admitted nor given back.
			mem := memstore.New(memstore.Options{})
			l := limit(t, ratelimit.FixedWindow, 100, time.Hour, &ratelimit.Batch{Interval: time.Second, Lease: 10})
			var hold atomic.Bool
			back := newGate(mem, func(h ratelimit.Hit) bool { return h.Key == "v" && hold.Load() })
			s := hybrid.New(back, hybrid.Options{MaxKeys: 16})
			victim := []ratelimit.Hit{{Limit: l, Key: "v", Cost: 1}}
			out := make([]ratelimit.Decision, 1)
			admitted := 0
			// Leases of 1, 2 and 4, all used.
			for i := range 7 {
				if ok, _ := s.Decide(ctx, t0.Add(time.Duration(i)*time.Millisecond), victim, out); ok {
					admitted++
				}
			}
			hold.Store(true)
			done := make(chan bool)
			go func() {
				ok, _ := s.Decide(ctx, t0.Add(2*time.Second), victim, make([]ratelimit.Decision, 1))
				done <- ok
			}()
			<-back.entered
			for i := range 200 {
				s.Decide(ctx, t0.Add(2*time.Second+time.Millisecond),
					[]ratelimit.Hit{{Limit: l, Key: "made-up-" + strconv.Itoa(i), Cost: 1}}, out)
			}
			close(back.release)
			if <-done {
				admitted++
			}
			s.Flush(ctx, t0.Add(3*time.Second))
			u, err := mem.Usage(ctx, t0.Add(3*time.Second), l, "v")
			if err != nil {
				t.Fatal(err)
			}
			if u[0].Used != int64(admitted) {
				t.Fatalf("the store counts %d units of the victim's key after the flush; %d were admitted", u[0].Used, admitted)
			}
		}},
	} {
		t.Run(tc.name, tc.run)
	}
}

// ownClock is a store deciding on a clock of its own, skew ahead of the
// caller's (as Redis with store.clock = "store"), and reporting that
// instant in Decision.At.
type ownClock struct {
	*memstore.Store
	skew time.Duration
}

func (c *ownClock) Decide(ctx context.Context, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) (bool, error) {
	now = now.Add(c.skew)
	ok, err := c.Store.Decide(ctx, now, hits, out)
	for i := range hits {
		out[i].At = now.UnixMicro()
	}
	return ok, err
}

func (c *ownClock) Usage(ctx context.Context, now time.Time, l *ratelimit.Limit, key string) ([]ratelimit.WindowUsage, error) {
	return c.Store.Usage(ctx, now.Add(c.skew), l, key)
}

func (c *ownClock) Return(ctx context.Context, now time.Time, hits []ratelimit.Hit, at []time.Time) error {
	return c.Store.Return(ctx, now.Add(c.skew), hits, at)
}

// gate is a store whose first Decide of a call carrying a hit that match
// accepts closes entered and waits until release is closed.
type gate struct {
	*memstore.Store
	match            func(ratelimit.Hit) bool
	once             sync.Once
	entered, release chan struct{}
}

func newGate(m *memstore.Store, match func(ratelimit.Hit) bool) *gate {
	return &gate{Store: m, match: match, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) Decide(ctx context.Context, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) (bool, error) {
	for _, h := range hits {
		if g.match(h) {
			g.once.Do(func() {
				close(g.entered)
				<-g.release
			})
			break
		}
	}
	return g.Store.Decide(ctx, now, hits, out)
}

// admitAll admits every hit and keeps nothing.
type admitAll struct{ ratelimit.Store }

func (admitAll) Decide(_ context.Context, _ time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) (bool, error) {
	for i := range hits {
		out[i] = ratelimit.Decision{Allowed: true, Counted: true, Limit: 1000, Remaining: 500, Reset: time.Minute}
	}
	return true, nil
}
