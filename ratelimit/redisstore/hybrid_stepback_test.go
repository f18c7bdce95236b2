package redisstore_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/hybrid"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// TestHybridClockStepBack: the gateway's wall clock steps back (an NTP
// step, a VM resumed) while a batched limit holds a lease or a denial,
// with the store deciding on Redis's clock (store.clock = "store", the
// default). Leases and denials age on the gateway's clock, so each row
// failed before they were ended on a step back: the denial was repeated
// for the whole step (Retry-After ten minutes for a window of 200 ms),
// and a fixed window's leftover lease units, counted in a window Redis
// had closed, were admitted on top of the next window's limit.
func TestHybridClockStepBack(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, standard.Addr)
	const step = 10 * time.Minute
	for _, tc := range []struct {
		name string
		l    ratelimit.Limit
		// before is how many requests go at the gateway's clock, wait
		// how long real time passes, then after requests go at the
		// stepped-back clock, of which at most most may be admitted
		// (and at least least).
		before      int
		wait        time.Duration
		after       int
		least, most int
	}{
		{"a denied sliding counter is decided again once its window frees", ratelimit.Limit{
			Name: "step-swc", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(10, 200*time.Millisecond)},
			Batch: &ratelimit.Batch{Interval: 100 * time.Millisecond, Lease: 5}},
			30, 500 * time.Millisecond, 1, 1, 1},
		{"a fixed window's leftover lease is not admitted in the next window", ratelimit.Limit{
			Name: "step-fw", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(10, time.Second)},
			Batch: &ratelimit.Batch{Interval: time.Minute, Lease: 8}},
			4, 1100 * time.Millisecond, 30, 1, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := newStore(t, c, redisstore.Options{DenyCacheSize: -1, Clock: ratelimit.ClockStore})
			s := hybrid.New(rs, hybrid.Options{})
			l := finished(t, tc.l)
			hit := []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}
			out := make([]ratelimit.Decision, 1)
			start := time.Now().Round(0) // wall clock only, as after a step
			for i := range tc.before {
				if _, err := s.Decide(ctx, start.Add(time.Duration(i)*time.Microsecond), hit, out); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(tc.wait)
			if l.Algorithm == ratelimit.FixedWindow {
				// Start just past a window's start on Redis's clock, so
				// the requests below fall in one window.
				now, err := c.Time(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				time.Sleep(now.Truncate(time.Second).Add(time.Second + 20*time.Millisecond).Sub(now))
			}
			stepped := start.Add(tc.wait - step)
			admitted := 0
			for i := range tc.after {
				ok, err := s.Decide(ctx, stepped.Add(time.Duration(i)*time.Microsecond), hit, out)
				if err != nil {
					t.Fatal(err)
				}
				if ok {
					admitted++
				} else if out[0].RetryAfter > time.Second {
					t.Errorf("denied with Retry-After %s after the clock stepped back %s", out[0].RetryAfter, step)
				}
			}
			if admitted < tc.least || admitted > tc.most {
				t.Fatalf("admitted %d of %d after the clock stepped back %s, want %d..%d (Redis's window is free)",
					admitted, tc.after, step, tc.least, tc.most)
			}
		})
	}
}

// TestHybridStaleInstantsNoStep: under load, requests reach a key's lease
// with instants older than the lease (each carries the instant it started
// at, and waits for the key's lease call or the CPU; under the race
// detector on a loaded machine, by more than a second): that is no clock
// step. 16 goroutines on 8 keys of a batched fixed window with a 1 ms
// interval, the leases flushed now and then: in the end Redis counts what
// was admitted. It failed when an instant more than an interval before a
// lease dropped the lease's entry: a lease call in flight for it then
// settled into nothing and its units stayed counted, unused (235–349 of
// the 2,400 units counted). One run in dozens has left 2 units so,
// unexplained: the bound is a lease.
func TestHybridStaleInstantsNoStep(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, standard.Addr)
	rs := newStore(t, c, redisstore.Options{Clock: ratelimit.ClockStore, Coalesce: true})
	s := hybrid.New(rs, hybrid.Options{})
	l := finished(t, ratelimit.Limit{Name: "stale", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(300, time.Hour)},
		Batch: &ratelimit.Batch{Interval: time.Millisecond, Lease: 10}})
	const keys = 8
	var admitted [keys]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]ratelimit.Decision, 1)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := w % keys
				hit := []ratelimit.Hit{{Limit: l, Key: "{st}" + strconv.Itoa(k), Cost: int64(1 + i%3)}}
				ok, err := s.Decide(ctx, time.Now(), hit, out)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					admitted[k].Add(hit[0].Cost)
				}
			}
		}()
	}
	for range 20 {
		time.Sleep(15 * time.Millisecond)
		s.Flush(ctx, time.Now())
	}
	close(stop)
	wg.Wait()
	s.Flush(ctx, time.Now())
	stranded := int64(0)
	for k := range keys {
		u, err := rs.Usage(ctx, time.Now(), l, "{st}"+strconv.Itoa(k))
		if err != nil {
			t.Fatal(err)
		}
		got := admitted[k].Load()
		if u[0].Used < got {
			t.Errorf("key %d: admitted %d, Redis counts only %d", k, got, u[0].Used)
		}
		stranded += u[0].Used - got
	}
	if stranded > l.Batch.Lease {
		t.Errorf("Redis counts %d units more than were admitted (stranded), over a lease (%d): %+v", stranded, l.Batch.Lease, s.Stats())
	} else if stranded > 0 {
		t.Logf("%d units stranded", stranded)
	}
}
