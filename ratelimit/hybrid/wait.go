package hybrid

import (
	"context"
	"time"
)

// unblock wakes the requests waiting for the leases plans took (settled,
// failed or abandoned).
func (s *Store) unblock(plans []plan) {
	for _, p := range plans {
		if p.kind != leasing || p.ch == nil {
			continue
		}
		p.sh.mu.Lock()
		if p.l.pending == p.ch {
			p.l.pending = nil
		}
		p.sh.mu.Unlock()
		close(p.ch)
	}
}

// waitLease waits until ch, another request's lease call, is settled. A
// caller without a deadline of its own is held at most the next store's
// budget (the lease call it waits for is bounded by it): the timer is
// made only when a request waits, which only a lease call in flight on
// the same key makes it do.
func (s *Store) waitLease(ctx context.Context, ch <-chan struct{}) error {
	var expired <-chan time.Time
	if _, ok := ctx.Deadline(); !ok {
		if d := s.CallTimeout(); d > 0 {
			tm := time.NewTimer(d)
			defer tm.Stop()
			expired = tm.C
		}
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return context.DeadlineExceeded
	}
}
