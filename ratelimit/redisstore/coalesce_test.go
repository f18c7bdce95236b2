package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
	"github.com/tollgate/gateway/ratelimit/storetest"
)

// One lane: any two calls at once make a batch, so the suite's concurrent
// tables go through pipelines too.
func TestConformanceStandaloneCoalesce(t *testing.T) {
	c := newClient(t, standard.Addr)
	storetest.Run(t, func(t *testing.T) ratelimit.Store {
		return newStore(t, c, redisstore.Options{DenyCacheSize: -1, Coalesce: true, CoalesceLanes: 1})
	})
}

// decideAll runs n decisions of hit from workers goroutines and returns how
// many were allowed; it fails t on any error.
func decideAll(t *testing.T, s *redisstore.Store, workers, n int, hit func(i int) []ratelimit.Hit) int64 {
	t.Helper()
	var allowed, errs atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	var first atomic.Value
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]ratelimit.Decision, 2)
			for i := int(next.Add(1)); i <= n; i = int(next.Add(1)) {
				ok, err := s.Decide(context.Background(), time.Now(), hit(i), out)
				if err != nil {
					errs.Add(1)
					first.CompareAndSwap(nil, err.Error())
					continue
				}
				if ok {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if e := errs.Load(); e != 0 {
		t.Fatalf("%d errors, first: %v", e, first.Load())
	}
	return allowed.Load()
}

// TestCoalesceExact: 64 goroutines on one key of limit 500 go through
// batches and admit exactly 500 of 2000, with two limits per decision.
func TestCoalesceExact(t *testing.T) {
	c := newClient(t, standard.Addr)
	s := newStore(t, c, redisstore.Options{DenyCacheSize: -1, Coalesce: true, CoalesceLanes: 1})
	l := finished(t, ratelimit.Limit{Name: "co", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(500, time.Hour)}})
	g := finished(t, ratelimit.Limit{Name: "co-wide", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(1_000_000, time.Hour)}})
	got := decideAll(t, s, 64, 2000, func(int) []ratelimit.Hit {
		return []ratelimit.Hit{{Limit: l, Key: "{co}k", Cost: 1}, {Limit: g, Key: "{co}k", Cost: 1}}
	})
	if got != 500 {
		t.Fatalf("admitted %d, want exactly 500", got)
	}
	st := s.Stats()
	if st.Batches == 0 || st.Batched < 2*st.Batches {
		t.Fatalf("no batching under 64 concurrent callers: %d batches carrying %d calls", st.Batches, st.Batched)
	}
	u, err := s.Usage(context.Background(), time.Now(), g, "{co}k")
	if err != nil {
		t.Fatal(err)
	}
	if u[0].Used != 500 {
		t.Fatalf("the wide limit counted %d, want 500 (denied requests count nothing)", u[0].Used)
	}
	t.Logf("%d batches carried %d of 2000 calls", st.Batches, st.Batched)
}

// TestCoalesceScriptFlush: FUNCTION FLUSH and SCRIPT FLUSH while batches
// flow, with the Function library and with EVALSHA: an answer inside a
// pipeline proving the code did not run ("Function not found", NOSCRIPT)
// is completed for that call alone, so there are no errors and the count
// is exact (nothing runs twice).
func TestCoalesceScriptFlush(t *testing.T) {
	for _, noFunctions := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoFunctions=%v", noFunctions), func(t *testing.T) { coalesceFlush(t, noFunctions) })
	}
}

func coalesceFlush(t *testing.T, noFunctions bool) {
	srv := redistest.Standalone(t)
	c := newClient(t, srv.Addr)
	s := newStore(t, c, redisstore.Options{Timeout: time.Second, DenyCacheSize: -1, Coalesce: true, CoalesceLanes: 1, NoFunctions: noFunctions})
	l := finished(t, ratelimit.Limit{Name: "flush", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1<<40, time.Hour)}})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
			}
			if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
				t.Error(err)
				return
			}
			if _, err := srv.Do("FUNCTION", "FLUSH"); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	got := decideAll(t, s, 32, 4000, func(int) []ratelimit.Hit { return []ratelimit.Hit{{Limit: l, Key: "{flush}k", Cost: 1}} })
	close(stop)
	<-done
	if got != 4000 {
		t.Fatalf("allowed %d of 4000", got)
	}
	u, err := s.Usage(context.Background(), time.Now(), l, "{flush}k")
	if err != nil {
		t.Fatal(err)
	}
	if u[0].Used != 4000 {
		t.Fatalf("counted %d units for 4000 allowed calls", u[0].Used)
	}
	// Fallbacks: EVAL after NOSCRIPT, FUNCTION LOAD after "Function not
	// found".
	fallbacks := commandCalls(t, srv, "eval")
	if !noFunctions {
		fallbacks = int(s.Stats().LibraryLoads) - 1
	}
	if fallbacks <= 0 || s.Stats().Batched == 0 {
		t.Fatalf("the test did not exercise a lost script in batches: %d fallbacks, %d batched calls", fallbacks, s.Stats().Batched)
	}
	t.Logf("%d fallbacks, %d batched calls", fallbacks, s.Stats().Batched)
}

// TestCoalesceDeadline: with Redis hung (SIGSTOP), a call on the wire and
// calls queued behind it each return by their own deadline, and the queued
// ones, whose deadline passed before a lane was free, are never sent.
func TestCoalesceDeadline(t *testing.T) {
	srv := redistest.Standalone(t)
	c := newClient(t, srv.Addr)
	const timeout = 200 * time.Millisecond
	s := newStore(t, c, redisstore.Options{Timeout: timeout, DenyCacheSize: -1, Coalesce: true, CoalesceLanes: 1, BreakerFailures: 1000})
	l := finished(t, ratelimit.Limit{Name: "hang", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1000, time.Hour)}})
	hit := []ratelimit.Hit{{Limit: l, Key: "{hang}k", Cost: 1}}
	out := make([]ratelimit.Decision, 1)
	if _, err := s.Decide(context.Background(), time.Now(), hit, out); err != nil { // loads the script
		t.Fatal(err)
	}
	calls := func() int { return commandCalls(t, srv, "evalsha") + commandCalls(t, srv, "fcall") }
	before := calls()
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	var wg sync.WaitGroup
	var late atomic.Int64
	errs := make(chan error, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The first call takes the lane; the others queue behind it
			// with shorter deadlines of their own.
			d := timeout
			if i > 0 {
				time.Sleep(20 * time.Millisecond)
				d = 60 * time.Millisecond
			}
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			start := time.Now()
			_, err := s.Decide(ctx, time.Now(), hit, make([]ratelimit.Decision, 1))
			if time.Since(start) > d+time.Second {
				late.Add(1)
			}
			errs <- err
		}()
	}
	wg.Wait()
	wantStoreTimeouts(t, errs, "call")
	if n := late.Load(); n > 0 {
		t.Errorf("%d calls outlived their deadline by more than a second", n)
	}
	srv.Resume()
	resumed = true
	// Another call frees the pipeline; the expired queued calls must not
	// have reached Redis: only the call on the wire (written before the
	// pause) and this one.
	if _, err := s.Decide(context.Background(), time.Now(), hit, out); err != nil {
		t.Fatal(err)
	}
	if got := calls() - before; got > 2 {
		t.Fatalf("Redis ran %d decide calls after the hang, want at most 2: queued calls past their deadline were sent", got)
	}
	if s.Stats().Batched != 0 {
		t.Fatalf("%d calls went out in batches after their deadline", s.Stats().Batched)
	}
}

// TestCoalesceClusterBypass: on a Cluster the option is accepted and every
// call goes alone (per-slot ordering and refunds stay as they are).
func TestCoalesceClusterBypass(t *testing.T) {
	c := newClusterClient(t, sharedCluster().Addrs())
	s := newStore(t, c, redisstore.Options{DenyCacheSize: -1, Coalesce: true, CoalesceLanes: 1})
	l := finished(t, ratelimit.Limit{Name: "cb", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(100, time.Hour)}})
	shared := finished(t, ratelimit.Limit{Name: "cb-all", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(150, time.Hour)}})
	got := decideAll(t, s, 16, 400, func(i int) []ratelimit.Hit {
		return []ratelimit.Hit{{Limit: l, Key: "{cb" + strconv.Itoa(i%2) + "}k", Cost: 1}, {Limit: shared, Key: "{all}all", Cost: 1}}
	})
	if got != 150 {
		t.Fatalf("admitted %d, want 150 (the shared limit)", got)
	}
	if st := s.Stats(); st.Batches != 0 {
		t.Fatalf("%d batches on a Cluster", st.Batches)
	}
}

// TestCoalesceWorkersReused: batches are sent by lane workers that park
// between bursts instead of a goroutine started per batch (which grew a
// fresh stack in every pipeline's write): two bursts of hundreds of
// batches start at most lanes workers each, never more than lanes are
// alive, and the parked ones end after their idle time.
func TestCoalesceWorkersReused(t *testing.T) {
	c := newClient(t, standard.Addr)
	const lanes = 2
	s := newStore(t, c, redisstore.Options{DenyCacheSize: -1, Coalesce: true, CoalesceLanes: lanes})
	redisstore.SetWorkerIdle(s, time.Second)
	l := finished(t, ratelimit.Limit{Name: "workers", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1<<40, time.Hour)}})
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if a, _ := redisstore.CoalescerWorkers(s); a > peak.Load() {
				peak.Store(a)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	for burst := range 2 {
		before := s.Stats().Batches
		decideAll(t, s, 64, 3000, func(i int) []ratelimit.Hit {
			return []ratelimit.Hit{{Limit: l, Key: "{w}" + strconv.Itoa(i%32), Cost: 1}}
		})
		batches := s.Stats().Batches - before
		_, started := redisstore.CoalescerWorkers(s)
		t.Logf("burst %d: %d batches, %d workers started so far", burst, batches, started)
		if batches < 10 {
			t.Fatalf("burst %d: only %d batches under 64 callers on %d lanes", burst, batches, lanes)
		}
		if started > int64(lanes*(burst+1)) {
			t.Fatalf("burst %d: %d workers started for %d batches, want at most %d (reused, not one per batch)", burst, started, batches, lanes*(burst+1))
		}
		// Between bursts the workers park, then end.
		waitFor(t, 5*time.Second, "parked workers end", func() bool { a, _ := redisstore.CoalescerWorkers(s); return a == 0 })
	}
	close(stop)
	<-sampled
	if p := peak.Load(); p > lanes {
		t.Fatalf("%d workers alive at once, want at most %d lanes", p, lanes)
	}
}

// stallFirst is a client hook that holds the next decide call it sees
// (FCALL, EVALSHA or EVAL) for stall, ignoring its context, when armed: a
// lane kept busy past the deadlines of the calls queued behind it. Other
// commands pass: the store's library check runs its own (FUNCTION LIST,
// HGETALL) in the background after Ready.
type stallFirst struct {
	armed atomic.Bool
	stall time.Duration
}

func (h *stallFirst) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *stallFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); (n == "fcall" || n == "evalsha" || n == "eval") && h.armed.CompareAndSwap(true, false) {
			time.Sleep(h.stall)
		}
		return next(ctx, cmd)
	}
}

func (h *stallFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestCoalesceBudgetQueued: callers without a deadline of their own get the
// store's budget, which has no timer; a call queued behind a lane held past
// that budget must still return at its deadline and never be sent.
func TestCoalesceBudgetQueued(t *testing.T) {
	srv := redistest.Standalone(t)
	c := newClient(t, srv.Addr)
	const timeout = 100 * time.Millisecond
	const stall = 2 * time.Second
	s := newStore(t, c, redisstore.Options{Timeout: timeout, DenyCacheSize: -1, Coalesce: true, CoalesceLanes: 1, BreakerFailures: 1000})
	if err := s.Ready(context.Background()); err != nil { // chooses the engine
		t.Fatal(err)
	}
	l := finished(t, ratelimit.Limit{Name: "budget", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1000, time.Hour)}})
	hit := []ratelimit.Hit{{Limit: l, Key: "{budget}k", Cost: 1}}
	if _, err := s.Decide(context.Background(), time.Now(), hit, make([]ratelimit.Decision, 1)); err != nil {
		t.Fatal(err)
	}
	calls := func() int { return commandCalls(t, srv, "evalsha") + commandCalls(t, srv, "fcall") }
	before := calls()
	h := &stallFirst{stall: stall}
	c.AddHook(h)
	redisstore.AddLaneHook(s, h) // the lanes send on clients of their own
	h.armed.Store(true)
	first := make(chan error, 1)
	go func() {
		_, err := s.Decide(context.Background(), time.Now(), hit, make([]ratelimit.Decision, 1))
		first <- err
	}()
	for h.armed.Load() { // the first call holds the lane, in the hook
		time.Sleep(time.Millisecond)
	}
	const queued = 5
	var wg sync.WaitGroup
	var late atomic.Int64
	errs := make(chan error, queued)
	for range queued {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_, err := s.Decide(context.Background(), time.Now(), hit, make([]ratelimit.Decision, 1))
			// Bounded by the budget plus scheduling slack, well short
			// of the stalled lane.
			if time.Since(start) > timeout+stall/2 {
				late.Add(1)
			}
			errs <- err
		}()
	}
	wg.Wait()
	wantStoreTimeouts(t, errs, "queued call")
	if n := late.Load(); n > 0 {
		t.Errorf("%d queued calls waited for the stalled lane past their budget", n)
	}
	if err := <-first; !errors.Is(err, ratelimit.ErrStore) {
		t.Errorf("stalled call: want a store error (its budget passed in the hook), got %v", err)
	}
	if got := calls() - before; got != 0 {
		t.Fatalf("Redis ran %d decide calls whose budget had passed", got)
	}
	if s.Stats().Batched != 0 {
		t.Fatalf("%d calls went out in batches after their budget", s.Stats().Batched)
	}
}

// wantStoreTimeouts closes errs and requires every error in it to be a
// store timeout.
func wantStoreTimeouts(t *testing.T, errs chan error, what string) {
	t.Helper()
	close(errs)
	for err := range errs {
		if !errors.Is(err, ratelimit.ErrStore) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: want a store timeout, got %v", what, err)
		}
	}
}
