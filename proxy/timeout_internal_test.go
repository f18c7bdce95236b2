package proxy

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestDeadlinesModel drives one route's header budgets through random
// arrivals, returns and timer firings on a fake clock and compares every
// outcome with a naive model: an exchange expires exactly when a firing
// at or after its start plus the budget finds it still waiting, and an
// exchange that returned in time is never cancelled.
func TestDeadlinesModel(t *testing.T) {
	const budget = 100 * time.Millisecond
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		now := time.Unix(1000, 0)
		// The timer runs nothing: only the test's explicit firings run
		// expire, on the fake clock.
		d := &deadlines{budget: budget, now: func() time.Time { return now }}
		d.timer = time.AfterFunc(time.Hour, func() {})
		d.armed = true
		type model struct {
			x        *exchange
			cause    *error
			start    time.Time
			returned bool
			expired  bool
		}
		var all []*model
		for step := 0; step < 60; step++ {
			now = now.Add(time.Duration(rng.IntN(40)) * time.Millisecond)
			switch op := rng.IntN(3); {
			case op == 0 || len(all) == 0: // a request goes upstream
				m := &model{start: now, cause: new(error)}
				m.x = &exchange{cancel: func(err error) { *m.cause = err }}
				d.add(m.x)
				all = append(all, m)
			case op == 1: // one returns
				m := all[rng.IntN(len(all))]
				if m.returned {
					continue
				}
				m.returned = true
				if got := d.remove(m.x); got != m.expired {
					t.Fatalf("seed %d step %d: remove says expired=%v, model %v", seed, step, got, m.expired)
				}
			default: // the timer fires
				for _, m := range all {
					if !m.returned && !m.expired && !now.Before(m.start.Add(budget)) {
						m.expired = true
					}
				}
				d.expire()
			}
			if d.head != nil && !d.armed {
				t.Fatalf("seed %d step %d: exchanges wait and no timer is armed", seed, step)
			}
			for i, m := range all {
				cancelled := errors.Is(*m.cause, errHeaderTimeout)
				if cancelled != m.expired {
					t.Fatalf("seed %d step %d: exchange %d cancelled=%v, model expired=%v", seed, step, i, cancelled, m.expired)
				}
			}
		}
		d.timer.Stop()
	}
}

// TestDeadlinesRearm: once the oldest exchange has returned, the timer
// still ends the next one on time (its firing re-arms for the new head),
// and a queue that empties leaves nothing armed behind a firing.
func TestDeadlinesRearm(t *testing.T) {
	d := &deadlines{budget: 50 * time.Millisecond, now: time.Now}
	a := &exchange{cancel: func(error) {}}
	d.add(a)
	time.Sleep(20 * time.Millisecond)
	done := make(chan error, 1)
	b := &exchange{cancel: func(err error) { done <- err }}
	d.add(b)
	if d.remove(a) {
		t.Fatal("a returned in time but counts as expired")
	}
	select {
	case err := <-done:
		if !errors.Is(err, errHeaderTimeout) {
			t.Fatalf("b cancelled with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("b was never cancelled: the timer was not re-armed for it")
	}
	if !d.remove(b) {
		t.Fatal("b's budget ran out but remove says it did not")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.head != nil || d.tail != nil {
		t.Fatal("queue not empty")
	}
}
