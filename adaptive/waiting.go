package adaptive

import (
	"container/list"
	"sync/atomic"
	"time"
)

// waiter is a request waiting for a slot. granted is set under the
// limiter's lock when a slot is handed to it, and ready then receives.
type waiter struct {
	p       Priority
	granted bool
	ready   chan struct{}
	e       *list.Element
}

// Wait holds a request of priority p that TryAcquire did not admit until
// a slot is handed to it (true: it holds one, Release gives it back), d
// passes, or done closes (false: it holds none). Slots go to critical
// waiters first, then normal, then sheddable, each in arrival order, and
// only within the waiter's own threshold. With probe set (the verdict was
// Probe), running out of d admits the request if the learned limit (not
// the probe's lower one) has room for it then: a probe of the base latency
// refuses no request the limit would have taken, and lets no more in than
// the limit would have (all the requests held back by it may time out
// together). A full
// waiting room (MaxWaiting) returns false at once.
func (l *Limiter) Wait(p Priority, d time.Duration, probe bool, done <-chan struct{}) bool {
	if p >= Priorities {
		p = Normal
	}
	l.mu.Lock()
	// A slot may have come free since TryAcquire (taken by compare and
	// swap: TryAcquire takes slots without the lock).
	for l.queues[p].Len() == 0 {
		n := l.inflight.Load()
		if n >= l.thr[p].Load() {
			break
		}
		if l.inflight.CompareAndSwap(n, n+1) {
			l.mu.Unlock()
			return true
		}
	}
	if l.waiting.Load() >= l.cfg.MaxWaiting {
		l.mu.Unlock()
		return false
	}
	w := &waiter{p: p, ready: make(chan struct{}, 1)}
	w.e = l.queues[p].PushBack(w)
	l.waiting.Add(1)
	l.mu.Unlock()

	t := time.NewTimer(d)
	defer t.Stop()
	timedOut := false
	select {
	case <-w.ready:
		return true
	case <-t.C:
		timedOut = true
	case <-done:
	}
	l.mu.Lock()
	if w.granted {
		l.mu.Unlock()
		if !timedOut {
			// Handed a slot as the client left: give it on.
			l.free()
			return false
		}
		return true
	}
	l.queues[p].Remove(w.e)
	l.waiting.Add(-1)
	l.mu.Unlock()
	if timedOut && probe {
		// The measure outlasted the wait: admitted within the learned
		// limit, as the request would have been without a probe. Not
		// past it: every request that came while the threshold was
		// lowered waits, and all of them may time out together.
		return l.acquireWithin(&l.full[p])
	}
	return false
}

// acquireWithin takes a slot if fewer than the threshold t are held.
func (l *Limiter) acquireWithin(t *atomic.Int64) bool {
	for {
		n := l.inflight.Load()
		if n >= t.Load() {
			return false
		}
		if l.inflight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// firstFitting returns the first waiter, by priority then arrival, that a
// slot admits when n requests hold slots without it; nil for none. l.mu is
// held.
func (l *Limiter) firstFitting(n int64) *waiter {
	for p := range l.queues {
		if e := l.queues[p].Front(); e != nil && n < l.thr[p].Load() {
			return e.Value.(*waiter)
		}
	}
	return nil
}

// grant hands w a slot it already counts. l.mu is held.
func (l *Limiter) grant(w *waiter) {
	l.queues[w.p].Remove(w.e)
	l.waiting.Add(-1)
	w.granted = true
	w.ready <- struct{}{}
}

// wakeFitting admits waiters while the thresholds leave room (after they
// rose). l.mu is held.
func (l *Limiter) wakeFitting() {
	for l.waiting.Load() > 0 {
		n := l.inflight.Load()
		w := l.firstFitting(n)
		if w == nil || !l.inflight.CompareAndSwap(n, n+1) {
			if w == nil {
				return
			}
			continue
		}
		l.grant(w)
	}
}
