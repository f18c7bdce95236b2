package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// TestSlots checks that every key of one client's limits lands in one
// Cluster slot (the hash tag decides), that keys without a tag spread, and
// that Slot agrees with the server's CLUSTER KEYSLOT.
func TestSlots(t *testing.T) {
	c := newClient(t, standard.Addr)
	s := newStore(t, c, redisstore.Options{Prefix: "tollgate:"})
	limits := parityLimits(t)
	for client := range 50 {
		tag := fmt.Sprintf("{c%dxyzHASHHASHHASHHASH}", client)
		slot := -1
		for i, l := range limits {
			k := s.Key(l, tag+fmt.Sprintf("h%d", i))
			if slot == -1 {
				slot = redisstore.Slot(k)
			}
			if got := redisstore.Slot(k); got != slot {
				t.Fatalf("client %d: key %q in slot %d, others in %d", client, k, got, slot)
			}
		}
	}
	for _, k := range []string{"foo", "{user1000}.following", "a{}b", "{}{x}", "x{y}z{w}", "tollgate:{Zm9v}abc:1"} {
		v, err := standard.Do("CLUSTER", "KEYSLOT", k)
		if err != nil {
			// Standalone servers refuse CLUSTER commands; ask a cluster node.
			v, err = redistest.Do(sharedCluster().Nodes[0].Addr, "CLUSTER", "KEYSLOT", k)
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := redisstore.Slot(k); int64(got) != v.(int64) {
			t.Errorf("Slot(%q) = %d, server says %v", k, got, v)
		}
	}
}

// TestWrongTypeAndHealing: a key of the wrong type fails that call with
// ErrStore (no panic, others unaffected); a state without a TTL gets one.
func TestWrongTypeAndHealing(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, standard.Addr)
	s := newStore(t, c, redisstore.Options{DenyCacheSize: -1})
	l := finished(t, ratelimit.Limit{Name: "wt", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(2, time.Minute)}})
	now := time.Now()
	if err := c.HSet(ctx, s.Key(l, "{w}bad"), "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, s.Key(l, "{w}junk"), "not,a,number", 0).Err(); err != nil {
		t.Fatal(err)
	}
	out := make([]ratelimit.Decision, 1)
	for _, k := range []string{"{w}bad", "{w}junk"} {
		_, err := s.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: k, Cost: 1}}, out)
		if !errors.Is(err, ratelimit.ErrStore) {
			t.Fatalf("Decide on %s: %v, want ErrStore", k, err)
		}
	}
	if ok, err := s.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: "{w}good", Cost: 2}}, out); err != nil || !ok {
		t.Fatalf("good key: %v %v", ok, err)
	}
	key := s.Key(l, "{w}good")
	// The healing is only tested if the TTL really went away.
	if removed, err := c.Persist(ctx, key).Result(); err != nil || !removed {
		t.Fatalf("PERSIST %s: removed=%v, %v (the key should have had a TTL)", key, removed, err)
	}
	if ttl, err := c.PTTL(ctx, key).Result(); err != nil || ttl != -1 {
		t.Fatalf("PTTL after PERSIST = %v, %v; want -1 (no TTL)", ttl, err)
	}
	if ok, _ := s.Decide(ctx, now, []ratelimit.Hit{{Limit: l, Key: "{w}good", Cost: 1}}, out); ok {
		t.Fatal("third unit allowed")
	}
	if ttl := c.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Minute+2*time.Second {
		t.Fatalf("TTL after a denial of a TTL-less key = %s, want healed", ttl)
	}
}

// hammer runs Decide from workers goroutines until stop is closed and
// records every call's latency and error.
type hammer struct {
	calls, errs atomic.Int64
	slowest     atomic.Int64 // ns
	wg          sync.WaitGroup
	stop        chan struct{}
}

func startHammer(s *redisstore.Store, workers int, hits func(i int) []ratelimit.Hit) *hammer {
	h := &hammer{stop: make(chan struct{})}
	for w := range workers {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			out := make([]ratelimit.Decision, 4)
			for i := 0; ; i++ {
				select {
				case <-h.stop:
					return
				default:
				}
				start := time.Now()
				_, err := s.Decide(context.Background(), start, hits(w*1_000_000+i), out)
				d := time.Since(start)
				for {
					old := h.slowest.Load()
					if int64(d) <= old || h.slowest.CompareAndSwap(old, int64(d)) {
						break
					}
				}
				h.calls.Add(1)
				if err != nil {
					if !errors.Is(err, ratelimit.ErrStore) {
						panic(err)
					}
					h.errs.Add(1)
				}
			}
		}()
	}
	return h
}

func (h *hammer) finish() { close(h.stop); h.wg.Wait() }

// waitFor polls cond every 10ms for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func faultLimit(t *testing.T) *ratelimit.Limit {
	return finished(t, ratelimit.Limit{Name: "fault", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(1_000_000, time.Second)}})
}

// TestFaultKillHangRestart: Redis killed mid-load, hung with SIGSTOP, and
// restarted empty. Every call returns within Timeout plus a margin, errors
// wrap ErrStore, the breaker opens, goroutines do not pile up, and the store
// recovers by itself once Redis is back.
//
// It runs with coalescing (the gateway's default: calls then share
// pipelines, and a fault hits whole batches) and without.
func TestFaultKillHangRestart(t *testing.T) {
	for _, coalesce := range []bool{false, true} {
		t.Run(fmt.Sprintf("coalesce=%v", coalesce), func(t *testing.T) { faultKillHangRestart(t, coalesce) })
	}
}

func faultKillHangRestart(t *testing.T, coalesce bool) {
	srv := redistest.Standalone(t)
	c := newClient(t, srv.Addr)
	const timeout = 50 * time.Millisecond
	s := newStore(t, c, redisstore.Options{Timeout: timeout, DenyCacheSize: -1, Coalesce: coalesce, CoalesceLanes: 2})
	l := faultLimit(t)
	hits := func(i int) []ratelimit.Hit {
		return []ratelimit.Hit{{Limit: l, Key: "{f}" + strconv.Itoa(i%64), Cost: 1}}
	}
	baseGoroutines := runtime.NumGoroutine()
	h := startHammer(s, 8, hits)
	waitFor(t, 5*time.Second, "first calls", func() bool { return h.calls.Load() > 100 })
	// On a loaded machine a few calls may exceed the 50ms budget even with
	// Redis healthy; they are failures by definition, so only log them.
	t.Logf("before any fault: %d errors in %d calls", h.errs.Load(), h.calls.Load())

	for _, fault := range []string{"kill", "pause"} {
		before := s.Stats()
		switch fault {
		case "kill":
			srv.Kill()
		case "pause":
			srv.Pause()
		}
		waitFor(t, 5*time.Second, fault+": breaker opens", func() bool { return s.Stats().Breaker != redisstore.BreakerClosed })
		waitFor(t, 5*time.Second, fault+": calls fail fast", func() bool { return s.Stats().BreakerRejects > before.BreakerRejects+100 })
		if g := runtime.NumGoroutine(); g > baseGoroutines+8+40 {
			t.Errorf("%s: %d goroutines (base %d): callers pile up", fault, g, baseGoroutines)
		}
		switch fault {
		case "kill":
			srv.Restart() // empty: no keys, no scripts (NOSCRIPT → EVAL)
		case "pause":
			srv.Resume()
		}
		back := time.Now()
		waitFor(t, 5*time.Second, fault+": recovery", func() bool { return s.Stats().Breaker == redisstore.BreakerClosed })
		t.Logf("%s: recovered %s after Redis returned", fault, time.Since(back).Round(time.Millisecond))
		ok := h.calls.Load() - h.errs.Load()
		waitFor(t, 5*time.Second, fault+": decisions succeed again", func() bool { return h.calls.Load()-h.errs.Load() > ok+200 })
	}
	h.finish()
	// Each call is bounded by the timeout plus scheduling slack. This
	// catches a hang (a call waiting for a dead or stopped server), not
	// slowness: the race detector on a loaded 2-core machine can hold a
	// goroutine off the CPU for hundreds of milliseconds, hence 2 s.
	if slow := time.Duration(h.slowest.Load()); slow > timeout+2*time.Second {
		t.Errorf("slowest call took %s with a %s budget", slow, timeout)
	}
}

// TestScriptFlushUnderLoad: SCRIPT FLUSH while decisions flow costs zero
// errors (NOSCRIPT falls back to EVAL) and exact counts.
func TestScriptFlushUnderLoad(t *testing.T) {
	c := newClient(t, standard.Addr)
	s := newStore(t, c, redisstore.Options{Timeout: time.Second, DenyCacheSize: -1})
	l := finished(t, ratelimit.Limit{Name: "flush", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(1<<40, time.Hour)}})
	hits := func(int) []ratelimit.Hit { return []ratelimit.Hit{{Limit: l, Key: "{flush}k", Cost: 1}} }
	h := startHammer(s, 4, hits)
	for range 20 {
		if _, err := standard.Do("SCRIPT", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.finish()
	if e := h.errs.Load(); e != 0 {
		t.Fatalf("%d errors under SCRIPT FLUSH", e)
	}
	u, err := s.Usage(context.Background(), time.Now(), l, "{flush}k")
	if err != nil {
		t.Fatal(err)
	}
	if u[0].Used != h.calls.Load() {
		t.Fatalf("counted %d units for %d allowed calls", u[0].Used, h.calls.Load())
	}
}

// TestDenyCacheFlat: under a flood on one hot denied key, Redis sees one
// EVALSHA per RetryAfter, not one per request.
func TestDenyCacheFlat(t *testing.T) {
	srv := redistest.Standalone(t)
	c := newClient(t, srv.Addr)
	s := newStore(t, c, redisstore.Options{})
	l := finished(t, ratelimit.Limit{Name: "hot", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(5, time.Hour)}})
	hit := []ratelimit.Hit{{Limit: l, Key: "{hot}k", Cost: 1}}
	out := make([]ratelimit.Decision, 1)
	now := time.Now()
	denied := 0
	for i := range 10_000 {
		ok, err := s.Decide(context.Background(), now.Add(time.Duration(i)*time.Microsecond), hit, out)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			denied++
			if out[0].RetryAfter <= 0 {
				t.Fatalf("request %d: cached denial without RetryAfter: %+v", i, out[0])
			}
		}
	}
	if denied != 10_000-5 {
		t.Fatalf("%d denied, want %d", denied, 10_000-5)
	}
	v, err := srv.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, line := range strings.Split(fmt.Sprint(v), "\r\n") {
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:", "cmdstat_fcall:"} {
			if rest, ok := strings.CutPrefix(line, cmd); ok {
				n, _ := strconv.Atoi(strings.TrimPrefix(strings.Split(rest, ",")[0], "calls="))
				calls += n
			}
		}
	}
	if calls > 10 {
		t.Fatalf("Redis ran the script %d times for 10000 requests on one denied key", calls)
	}
	t.Logf("10000 requests on a denied key: %d script calls, %d deny-cache hits", calls, s.Stats().DenyCacheHits)
}

// failoverBudget is the store timeout of the failover tests. They allow no
// error once the failover has settled, so the budget must absorb a loaded
// machine's slowness (a 200 ms budget once turned a slow call into an
// "error after the failover"); an error past it is a real one (READONLY,
// a stale slot map), not a slow call.
const failoverBudget = 2 * time.Second

// TestSentinelFailover: decisions keep flowing through a Sentinel failover;
// errors only during the switch, none after, no lasting READONLY.
// With coalescing on (the gateway's default), so batches meet the switch.
func TestSentinelFailover(t *testing.T) {
	g := redistest.Sentinel(t) // own group: the shared one stays unswitched
	c := newFailoverClient(t, g)
	s := newStore(t, c, redisstore.Options{Timeout: failoverBudget, DenyCacheSize: -1, BreakerCooldown: 100 * time.Millisecond,
		Coalesce: true, CoalesceLanes: 2})
	l := faultLimit(t)
	h := startHammer(s, 4, func(i int) []ratelimit.Hit {
		return []ratelimit.Hit{{Limit: l, Key: "{sf}" + strconv.Itoa(i%16), Cost: 1}}
	})
	waitFor(t, 5*time.Second, "first calls", func() bool { return h.calls.Load() > 100 })
	g.Failover(t)
	waitFor(t, 10*time.Second, "recovery", func() bool { return s.Stats().Breaker == redisstore.BreakerClosed })
	time.Sleep(300 * time.Millisecond) // let READONLY connections be discarded
	errs, calls := h.errs.Load(), h.calls.Load()
	waitFor(t, 10*time.Second, "calls after failover", func() bool { return h.calls.Load() > calls+300 })
	h.finish()
	if e := h.errs.Load() - errs; e > 0 {
		t.Fatalf("%d errors after the failover settled", e)
	}
	t.Logf("sentinel failover: %d errors during the switch out of %d calls", errs, h.calls.Load())
}

// TestClusterFailover: a master failover in the Cluster; errors only during
// the switch, then automatic recovery. It fails over its own Cluster: the
// shared one keeps the roles later tests expect.
func TestClusterFailover(t *testing.T) {
	cl := redistest.Cluster(t)
	c := newClusterClient(t, cl.Addrs())
	s := newStore(t, c, redisstore.Options{Timeout: failoverBudget, DenyCacheSize: -1, BreakerCooldown: 100 * time.Millisecond})
	l := faultLimit(t)
	h := startHammer(s, 4, func(i int) []ratelimit.Hit {
		return []ratelimit.Hit{{Limit: l, Key: "{cf}" + strconv.Itoa(i%16), Cost: 1}}
	})
	waitFor(t, 5*time.Second, "first calls", func() bool { return h.calls.Load() > 100 })
	owner, err := cl.KeySlotOwner(s.Key(l, "{cf}0"))
	if err != nil {
		t.Fatal(err)
	}
	cl.FailoverMaster(t, owner)
	waitFor(t, 10*time.Second, "recovery", func() bool { return s.Stats().Breaker == redisstore.BreakerClosed })
	time.Sleep(300 * time.Millisecond)
	errs, calls := h.errs.Load(), h.calls.Load()
	waitFor(t, 10*time.Second, "calls after failover", func() bool { return h.calls.Load() > calls+300 })
	h.finish()
	if e := h.errs.Load() - errs; e > 0 {
		t.Fatalf("%d errors after the failover settled", e)
	}
	t.Logf("cluster failover: %d errors during the switch out of %d calls", errs, h.calls.Load())
}
