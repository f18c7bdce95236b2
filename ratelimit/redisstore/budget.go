package redisstore

import (
	"context"
	"sync"
	"time"
)

// budgetCtx bounds a store call by the Store's budget without a timer of
// its own. A timer context per call costs five allocations, a timer set
// and stopped, and its registration with the request's context, a tenth
// of the gateway's own cost of a Redis decision. Instead:
//
//   - Deadline is exact, and it is what bounds the call on the wire: the
//     client (ContextTimeoutEnabled) sets every socket read and write
//     deadline from it, and dialing honours it;
//   - Done is a channel shared by every call whose deadline falls in the
//     same grain of the Store's budgetClock, closed at the grain's end,
//     so a wait that only Done can end (for a connection being dialed
//     for it, in the coalescer's queue) ends at most one grain late;
//   - the caller's own cancellation (a client gone) is the parent's: Err
//     reports it once Done closes, and the coalescer, the store's own
//     wait, watches the parent too.
type budgetCtx struct {
	context.Context // the caller's: values, cancellation
	at              time.Time
	done            chan struct{}
}

// Deadline implements context.Context.
func (b *budgetCtx) Deadline() (time.Time, bool) { return b.at, true }

// Done implements context.Context: closed at most one grain after the
// deadline, not when the parent is cancelled.
func (b *budgetCtx) Done() <-chan struct{} { return b.done }

// Err implements context.Context: nil until Done closes, then the
// parent's error if it has one, else context.DeadlineExceeded.
func (b *budgetCtx) Err() error {
	select {
	case <-b.done:
		if err := b.Context.Err(); err != nil {
			return err
		}
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// budget returns ctx bounded by the Store's timeout from now: ctx itself
// when its own deadline is at least as tight or it is done, else a
// budgetCtx over it.
func (s *Store) budget(ctx context.Context) context.Context {
	at := time.Now().Add(s.opts.Timeout)
	if dl, ok := ctx.Deadline(); ok && !dl.After(at) || ctx.Err() != nil {
		// Tighter already, or over: a caller gone before the call
		// starts must find it done (the budget's Done is not its).
		return ctx
	}
	return s.deadlines.ctx(ctx, at)
}

// budgetSlots is how many grains a budgetClock tracks at once: deadlines
// lie within one budget from now, eight grains.
const budgetSlots = 32

// budgetClock closes the shared Done channels of budgetCtx, one per grain
// (an eighth of the budget) that some deadline falls in, with one timer
// set to the earliest: a busy Store creates a channel and fires its timer
// once per grain, not once per call.
//
// Grains are counted on the monotonic clock, from base: a deadline's
// wall-clock reading moves with a step of the machine's clock (NTP, an
// operator, a resumed VM), and a Done counted in it stayed open for the
// length of a step back or closed at once after a step forward.
type budgetClock struct {
	grain int64     // ns
	base  time.Time // init's instant, with its monotonic reading
	mu    sync.Mutex
	slots [budgetSlots]budgetSlot
	timer *time.Timer
	armed int64 // the grain the timer is set for; 0: not set
}

// budgetSlot is one grain's channel.
type budgetSlot struct {
	grain int64
	ch    chan struct{}
}

// init sets the grain from the Store's budget.
func (c *budgetClock) init(budget time.Duration) {
	c.grain = max(int64(budget/8), int64(time.Millisecond))
	c.base = time.Now()
	c.timer = time.AfterFunc(time.Hour, c.fire)
	c.timer.Stop()
}

// ctx returns a budgetCtx over parent with deadline at.
func (c *budgetClock) ctx(parent context.Context, at time.Time) *budgetCtx {
	return &budgetCtx{Context: parent, at: at, done: c.doneAt(at)}
}

// doneAt returns the channel closed at the end of at's grain.
func (c *budgetClock) doneAt(at time.Time) chan struct{} {
	// (A deadline before base, a caller's already past, gets the first
	// grain, which has ended too.)
	g := max((int64(at.Sub(c.base))+c.grain-1)/c.grain, 1)
	c.mu.Lock()
	s := &c.slots[g%budgetSlots]
	if s.ch == nil || s.grain != g {
		if s.ch != nil {
			// An older grain in this slot that the timer has not
			// closed yet (it runs late): its instant has passed.
			close(s.ch)
		}
		s.grain, s.ch = g, make(chan struct{})
		if c.armed == 0 || g < c.armed {
			c.armed = g
			c.timer.Reset(time.Until(c.base.Add(time.Duration(g * c.grain))))
		}
	}
	ch := s.ch
	c.mu.Unlock()
	return ch
}

// fire closes the channels of the grains that have ended and sets the
// timer to the next one.
func (c *budgetClock) fire() {
	now := int64(time.Since(c.base))
	c.mu.Lock()
	defer c.mu.Unlock()
	next := int64(0)
	for i := range c.slots {
		s := &c.slots[i]
		switch {
		case s.ch == nil:
		case s.grain*c.grain <= now:
			close(s.ch)
			s.ch = nil
		case next == 0 || s.grain < next:
			next = s.grain
		}
	}
	c.armed = next
	if next != 0 {
		c.timer.Reset(time.Until(c.base.Add(time.Duration(next * c.grain))))
	}
}

// pastBudget reports whether ctx is a store budget whose exact deadline
// has passed (its Done may close up to a grain later).
func pastBudget(ctx context.Context) bool {
	b, ok := ctx.(*budgetCtx)
	return ok && !time.Now().Before(b.at)
}
