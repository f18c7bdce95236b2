package adaptive_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tollgate/gateway/adaptive"
)

var t0 = time.Unix(1_000_000, 0)

// settled returns a limiter whose first measure of the base latency is
// done (10ms), at its initial limit, and the instant it got there.
func settled(t *testing.T, cfg adaptive.Config) (*adaptive.Limiter, time.Time) {
	t.Helper()
	if cfg.MinSamples == 0 {
		cfg.MinSamples = 2 // the limits here are small
	}
	l := adaptive.New(cfg, t0)
	now := t0
	for range 10 {
		n := 0
		for l.TryAcquire(adaptive.Critical) == adaptive.Admit {
			n++
		}
		now = now.Add(time.Second)
		for range n {
			l.Release(now, 10*time.Millisecond, adaptive.Success)
		}
		if !l.Stats().Probing {
			break
		}
	}
	st := l.Stats()
	if st.Probing || st.MinLatency < 9*time.Millisecond || st.MinLatency > 11*time.Millisecond {
		t.Fatalf("after the first measure: %+v, want base latency ≈10ms and no probe", st)
	}
	return l, now
}

// TestPriorityThresholds: with reserve 0.2 and a limit of 10, sheddable
// requests are admitted up to 6 in flight, normal ones up to 8, critical
// ones up to 10; none is refused before its class's share is used.
func TestPriorityThresholds(t *testing.T) {
	l, _ := settled(t, adaptive.Config{InitialLimit: 10, Reserve: 0.2, ProbeInterval: time.Hour})
	steps := []struct {
		p     adaptive.Priority
		admit int
	}{
		{adaptive.Sheddable, 6}, // floor(10 × 0.8²)
		{adaptive.Normal, 2},    // up to floor(10 × 0.8)
		{adaptive.Sheddable, 0},
		{adaptive.Critical, 2},
		{adaptive.Normal, 0},
		{adaptive.Critical, 0},
	}
	for i, st := range steps {
		got := 0
		for l.TryAcquire(st.p) == adaptive.Admit {
			got++
		}
		if got != st.admit {
			t.Errorf("step %d: %v admitted %d more, want %d", i, st.p, got, st.admit)
		}
	}
	if v := l.TryAcquire(adaptive.Critical); v != adaptive.Full {
		t.Errorf("at the limit: TryAcquire(critical) = %v, want Full", v)
	}
}

// TestHandoffByPriority: a freed slot goes to the waiting critical
// request before an earlier sheddable one.
func TestHandoffByPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, now := settled(t, adaptive.Config{InitialLimit: 4, ProbeInterval: time.Hour})
		for l.TryAcquire(adaptive.Critical) == adaptive.Admit {
		}
		got := make(chan adaptive.Priority, 2)
		for _, p := range []adaptive.Priority{adaptive.Sheddable, adaptive.Critical} {
			go func() {
				if l.Wait(p, time.Minute, false, nil) {
					got <- p
				}
			}()
			synctest.Wait() // queued in this order
		}
		l.Release(now, 10*time.Millisecond, adaptive.Success)
		synctest.Wait()
		if p := <-got; p != adaptive.Critical {
			t.Fatalf("first slot went to %v, want critical", p)
		}
		l.Release(now, 10*time.Millisecond, adaptive.Success)
		if p := <-got; p != adaptive.Sheddable {
			t.Fatalf("second slot went to %v, want sheddable", p)
		}
	})
}

// TestWaitTimesOut: a request waiting past its delay holds no slot, and
// the waiting room counts it no more.
func TestWaitTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := settled(t, adaptive.Config{InitialLimit: 2, ProbeInterval: time.Hour})
		for l.TryAcquire(adaptive.Critical) == adaptive.Admit {
		}
		if l.Wait(adaptive.Normal, 50*time.Millisecond, false, nil) {
			t.Fatal("Wait = true with no slot freed")
		}
		if st := l.Stats(); st.InFlight != 2 || st.Waiting != 0 {
			t.Fatalf("after the timeout: %+v, want 2 in flight, none waiting", st)
		}
	})
}

// TestProbeAdmitsEveryone: while the base latency is measured again, the
// limit is halved, and requests within the full limit wait instead of
// being refused: every one is admitted, by the probe's end at the latest.
func TestProbeAdmitsEveryone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		l := adaptive.New(adaptive.Config{InitialLimit: 10, ProbeInterval: time.Second}, start)
		// The first measure is a probe: half the limit is admitted.
		admitted, probed := 0, 0
		for range 10 {
			switch l.TryAcquire(adaptive.Normal) {
			case adaptive.Admit:
				admitted++
			case adaptive.Probe:
				probed++
			default:
				t.Fatal("a request within the limit was refused during a probe")
			}
		}
		if admitted != 5 || probed != 5 {
			t.Fatalf("probe: %d admitted, %d told to wait; want 5 and 5", admitted, probed)
		}
		done := make(chan bool, probed)
		for range probed {
			go func() { done <- l.Wait(adaptive.Normal, l.ProbeWait(), true, nil) }()
		}
		synctest.Wait()
		time.Sleep(500 * time.Millisecond)
		for range admitted {
			l.Release(time.Now(), 10*time.Millisecond, adaptive.Success)
		}
		for range probed {
			if !<-done {
				t.Fatal("a request waiting out a probe was refused")
			}
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("the probe held requests %v", time.Since(start))
		}
	})
}

// TestFastErrorsAreNotCapacity: an upstream that answers every request at
// once with an error never raises the limit, however fast it answers.
func TestFastErrorsAreNotCapacity(t *testing.T) {
	s := newSim(adaptive.Config{InitialLimit: 20, ProbeInterval: time.Second}, 10, 20*time.Millisecond, 40, 1)
	s.failFast = true
	s.run(s.t0.Add(10*time.Second), func(time.Time) {
		if lim := s.l.Stats().Limit; lim > 20 {
			t.Fatalf("limit %.1f rose above its initial 20 on errors alone", lim)
		}
	})
}

// TestOneSlowRequest: one request a thousand times slower than the rest
// does not lower the limit: the window's median, not its mean, is read.
func TestOneSlowRequest(t *testing.T) {
	l, now := settled(t, adaptive.Config{InitialLimit: 16, ProbeInterval: time.Hour})
	before := l.Stats().Limit
	for range 16 {
		l.TryAcquire(adaptive.Normal)
	}
	now = now.Add(time.Second)
	l.Release(now, 10*time.Second, adaptive.Success)
	for range 15 {
		l.Release(now, 10*time.Millisecond, adaptive.Success)
	}
	if st := l.Stats(); st.Limit < before {
		t.Fatalf("limit %.1f fell from %.1f after one slow request (sample %v)", st.Limit, before, st.SampleLatency)
	}
}

// TestBaseLatencyDrift: when every request becomes three times slower
// (a slower release, not a queue), the limit does not stay at its floor
// until the next scheduled probe: it measures the base again and climbs
// back near the capacity well before.
func TestBaseLatencyDrift(t *testing.T) {
	s := newSim(adaptive.Config{MinLimit: 2, ProbeInterval: 10 * time.Minute}, 32, 10*time.Millisecond, 256, 3)
	s.run(s.t0.Add(10*time.Second), nil)
	s.service *= 3
	s.run(s.t0.Add(40*time.Second), nil)
	if lim := s.l.Stats().Limit; lim < 0.8*32 {
		t.Fatalf("30s after the base latency tripled, limit %.1f, want ≥ 0.8 × 32 (base %v)", lim, s.l.Stats().MinLatency)
	}
}

// TestPriorityUnderOverload: with 10% critical clients, reserve 0.2 and
// 8× more clients than capacity, critical requests are almost never shed
// and their latency stays low; the sheddable ones take the shedding.
func TestPriorityUnderOverload(t *testing.T) {
	const c = 32
	service := 20 * time.Millisecond
	s := newSim(adaptive.Config{MinLimit: 2, Reserve: 0.2, ProbeInterval: 5 * time.Second}, c, service, 8*c, 5)
	s.prio = func(client int) adaptive.Priority {
		switch {
		case client%10 == 0:
			return adaptive.Critical
		case client%2 == 0:
			return adaptive.Normal
		}
		return adaptive.Sheddable
	}
	s.run(s.t0.Add(10*time.Second), nil)
	s.record()
	s.run(s.t0.Add(30*time.Second), nil)
	crit := s.byPrio[adaptive.Critical]
	if ok := float64(crit.ok) / float64(crit.ok+crit.shed); ok < 0.99 {
		t.Errorf("critical: %d served, %d shed (%.3f served), want ≥ 0.99", crit.ok, crit.shed, ok)
	}
	if p := p99(s.latByPrio[adaptive.Critical]); p > 3*service {
		t.Errorf("critical p99 %v, want ≤ 3 × %v", p, service)
	}
	shed, norm := s.byPrio[adaptive.Sheddable], s.byPrio[adaptive.Normal]
	if shed.shed <= norm.shed {
		t.Errorf("sheddable shed %d, normal %d: want the sheddable to take the shedding", shed.shed, norm.shed)
	}
	t.Logf("critical %+v, normal %+v, sheddable %+v, critical p99 %v", crit, norm, shed, p99(s.latByPrio[adaptive.Critical]))
}

// TestWaitingRoomBounded: past MaxWaiting a request is refused at once,
// and a waiter whose client leaves holds nothing and leaves the room.
func TestWaitingRoomBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, now := settled(t, adaptive.Config{InitialLimit: 2, MaxWaiting: 1, ProbeInterval: time.Hour})
		for l.TryAcquire(adaptive.Critical) == adaptive.Admit {
		}
		gone := make(chan struct{})
		res := make(chan bool, 1)
		go func() { res <- l.Wait(adaptive.Normal, time.Hour, false, gone) }()
		synctest.Wait()
		start := time.Now()
		if l.Wait(adaptive.Critical, time.Hour, false, nil) || time.Since(start) != 0 {
			t.Fatal("a second waiter was taken past MaxWaiting 1, or not refused at once")
		}
		close(gone)
		if <-res {
			t.Fatal("a waiter whose client left was admitted")
		}
		if st := l.Stats(); st.Waiting != 0 || st.InFlight != 2 {
			t.Fatalf("after the client left: %+v, want none waiting, 2 in flight", st)
		}
		l.Release(now, 10*time.Millisecond, adaptive.Success)
		if st := l.Stats(); st.InFlight != 1 {
			t.Fatalf("after a release: %d in flight, want 1", st.InFlight)
		}
	})
}

// TestConcurrentNeverOverLimit: goroutines deciding, waiting and
// releasing at once never hold more slots than the limit, and leave
// nothing held or waiting behind.
func TestConcurrentNeverOverLimit(t *testing.T) {
	l := adaptive.New(adaptive.Config{MinLimit: 8, MaxLimit: 8, MaxWaiting: 4}, t0)
	var wg sync.WaitGroup
	var over atomic.Int64
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := adaptive.Priority(g % 3)
			for i := range 300 {
				ok := l.TryAcquire(p) == adaptive.Admit
				if !ok {
					ok = l.Wait(p, time.Millisecond, false, nil)
				}
				if !ok {
					continue
				}
				if n := l.Stats().InFlight; n > 8 {
					over.Store(n)
				}
				l.Release(t0.Add(time.Duration(i)*time.Millisecond), time.Millisecond, adaptive.Success)
			}
		}()
	}
	wg.Wait()
	if n := over.Load(); n != 0 {
		t.Fatalf("%d slots held at once, limit 8", n)
	}
	if st := l.Stats(); st.InFlight != 0 || st.Waiting != 0 {
		t.Fatalf("after every request ended: %+v, want nothing held or waiting", st)
	}
}

// TestProbeWaitWithinLimit: every request that comes while a probe holds
// the threshold low waits, since the in-flight count is below the learned
// limit when it comes; if they all wait the probe out (nothing in flight
// ends, so the measure never closes), only those the learned limit has
// room for are admitted, not every one of them.
func TestProbeWaitWithinLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := adaptive.New(adaptive.Config{InitialLimit: 10, MaxWaiting: 100, ProbeInterval: time.Hour}, time.Now())
		held := 0
		for l.TryAcquire(adaptive.Normal) == adaptive.Admit {
			held++
		}
		const n = 20
		done := make(chan bool, n)
		for range n {
			if v := l.TryAcquire(adaptive.Normal); v != adaptive.Probe {
				t.Fatalf("verdict %v during the first measure with %d in flight, want Probe", v, held)
			}
			go func() { done <- l.Wait(adaptive.Normal, l.ProbeWait(), true, nil) }()
		}
		in := 0
		for range n {
			if <-done {
				in++
			}
		}
		if held+in != 10 {
			t.Fatalf("%d held and %d admitted after waiting out the probe: want 10 in all, the learned limit", held, in)
		}
		if st := l.Stats(); st.InFlight != 10 || st.Waiting != 0 {
			t.Fatalf("stats %+v: want 10 in flight, none waiting", st)
		}
	})
}
