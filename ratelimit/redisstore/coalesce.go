package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// coalescer makes decide calls that arrive together share round trips. At
// most lanes calls or batches are on the wire at once. A call that finds a
// lane free is sent at once, alone, by its own goroutine: at low load
// nothing waits and nothing changes. A call that finds every lane busy
// queues; when a lane comes free, the calls queued by then (up to
// maxBatch of them) goes out as one pipeline, one write and one read for the
// whole batch, so the syscalls and Redis's per-call overhead are paid once
// per batch. There is no timer: a batch leaves as soon as a lane is free,
// so a call waits at most for the round trips ahead of it.
//
// Batches are sent by lane workers: goroutines that stay parked between
// batches (at most lanes of them, each gone after idleWorker without
// work). A goroutine started per batch began on a small stack and grew it
// in the middle of every pipeline's write: the runtime's stack copying
// cost more gateway instructions per decision than building the batch
// (BENCHMARKS.md "Gateway side of a Redis decision").
//
// Guarantees are those of a call sent alone:
//   - a pipeline is one write of the calls' commands; each call gets its
//     own reply or error, and nothing is re-sent blindly: an answer that
//     proves the code did not run (NOSCRIPT, "Function not found") is
//     completed by the Store's finish under the call's own context,
//     exactly as alone; any other error is the call's (a lost batch fails
//     every call in it, none is re-sent);
//   - every call keeps its own deadline: it returns when its context ends,
//     whether still queued (then it is never sent) or on the wire (then,
//     as for a call alone whose reply is lost, it may have been applied);
//     a batch is bounded by the latest deadline among its calls.
//
// Each lane owns its connection (lane.go): a call or batch goes out on
// the connection of the lane it took, not through the client's pool.
//
// It is used on standalone and Sentinel clients only; on a Cluster every
// call goes alone (a pipeline spanning slots would split it by node, and
// the Cluster path orders and refunds per slot).
type coalescer struct {
	s        *Store
	client   redis.UniversalClient
	maxBatch int

	mu sync.Mutex
	// all are the lanes; free those not in use (under mu), the one given
	// back last on top, so that a light load keeps to one connection.
	all, free []*lane
	queue     []*queued
	// idle counts the parked lane workers that no batch was handed to
	// yet (under mu): a lane given to the queue goes to one of them
	// through work, or to a new worker when there is none.
	idle int
	// work hands batches to parked workers. Its capacity is lanes, and at
	// most lanes workers exist (a worker is started only when none is
	// idle, and each busy one holds a lane), so a send never blocks.
	work chan handoff
	// idleFor is how long a parked worker waits for a batch (idleWorker).
	idleFor time.Duration
	// workers counts the lane workers alive; started, those ever started.
	workers, started atomic.Int64
	// reaper gives back the clients of lanes left unused (lane.go);
	// reaping is set (under mu) while it is armed.
	reaper  *time.Timer
	reaping bool
	// closed is set by the Store's Close: lanes are released and calls
	// go through the Store's client.
	closed atomic.Bool
	// hooks are added to every lane's client (tests: hooks added to the
	// Store's client do not see the lanes' calls).
	hooks []redis.Hook
}

// handoff is a batch and the lane it goes out on.
type handoff struct {
	l     *lane
	batch []*queued
}

// queued is one call waiting for a lane, and then its answer.
type queued struct {
	ctx  context.Context
	keys []string
	args []any
	// taken is set (under coalescer.mu) when a batch takes the call: from
	// then on it is, or may be, on the wire. gone is set (under mu) by a
	// call that returned while still queued, so no batch takes it.
	taken, gone bool
	cmd         *redis.Cmd
	done        chan struct{}
	// keyBuf and argBuf hold the copies of keys and args when they fit
	// (a decision of one hit, the common one), so that queuing it allocates
	// the call and its channel only.
	keyBuf [1]string
	argBuf [2]any
}

// newQueued returns a call queued under ctx with copies of keys and args
// (detach).
func newQueued(ctx context.Context, keys []string, args []any) *queued {
	q := &queued{ctx: ctx, done: make(chan struct{})}
	q.keys = append(q.keyBuf[:0:len(q.keyBuf)], keys...)
	q.args = detachInto(q.argBuf[:0:len(q.argBuf)], args)
	return q
}

// Default coalescer bounds, measured (BENCHMARKS.md "Coalescing"): with
// several lanes Redis stays busy while the gateway reads one batch's
// replies and writes the next; small batches beat large ones: at 512
// clients, batches of up to 256 calls cost Redis 2–4 times the CPU per
// call of batches of up to 16, and halved the throughput.
const (
	defaultLanes    = 4
	defaultMaxBatch = 16
)

// idleWorker is how long a lane worker stays parked without a batch
// before it ends, so that a Store dropped without Close (a replaced
// candidate's, a test's) leaves no goroutine behind for long, while a
// busy one keeps its workers and their grown stacks.
const idleWorker = 2 * time.Second

func newCoalescer(s *Store, lanes, maxBatch int) *coalescer {
	c := &coalescer{s: s, client: s.client, maxBatch: maxBatch, work: make(chan handoff, lanes), idleFor: idleWorker}
	for range lanes {
		c.all = append(c.all, &lane{})
	}
	c.free = append(make([]*lane, 0, lanes), c.all...)
	c.reaper = time.AfterFunc(time.Hour, c.reap)
	c.reaper.Stop()
	return c
}

// do sends one call, alone or in a batch, and returns its reply; buf is
// the caller's scratch for a call sent alone (Store.run).
func (c *coalescer) do(ctx context.Context, keys []string, args []any, buf *[]any) (any, error) {
	c.mu.Lock()
	if n := len(c.free); n > 0 {
		l := c.free[n-1]
		c.free = c.free[:n-1]
		c.mu.Unlock()
		conn := c.pin(l)
		res, err := c.s.finish(ctx, conn, c.s.first(ctx, conn, keys, args, buf), keys, args)
		l.after(err)
		c.release(l)
		return res, err
	}
	// The caller's keys and args (pooled, and the header a reused byte
	// slice) are its own again once do returns, possibly before the batch
	// holding them is written: the queued call keeps copies.
	q := newQueued(ctx, keys, args)
	c.queue = append(c.queue, q)
	c.mu.Unlock()
	// A store budget's Done (budget.go) is not its caller's: a caller
	// that goes away while its call waits is watched too.
	var left <-chan struct{}
	if b, ok := ctx.(*budgetCtx); ok {
		left = b.Context.Done()
	}
	select {
	case <-q.done:
		return c.s.finish(ctx, c.client, q.cmd, q.keys, q.args)
	case <-ctx.Done():
		c.giveUp(q)
		return nil, ctx.Err()
	case <-left:
		c.giveUp(q)
		return nil, ctx.(*budgetCtx).Context.Err()
	}
}

// giveUp marks q, whose caller returns before its answer, so that no
// batch takes it if none has yet.
func (c *coalescer) giveUp(q *queued) {
	c.mu.Lock()
	if !q.taken {
		q.gone = true
	}
	c.mu.Unlock()
}

// release gives back lane l: to the queue, whose calls then go out in
// batches from a lane worker, or to the free lanes.
func (c *coalescer) release(l *lane) {
	c.mu.Lock()
	batch := c.take()
	if batch == nil {
		closeLane := c.park(l)
		c.mu.Unlock()
		closeLane()
		return
	}
	if c.idle > 0 {
		c.idle--
		c.work <- handoff{l, batch} // never blocks: see work
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	go c.worker(handoff{l, batch})
}

// park puts l back among the free lanes; c.mu must be held. Once the
// Store is closed, l's connection is released instead of kept: by the
// function returned, to be called once c.mu is unlocked.
func (c *coalescer) park(l *lane) func() {
	l.used = true
	c.free = append(c.free, l)
	if c.closed.Load() {
		if f, ok := l.drop(); ok {
			return f
		}
	}
	return func() {}
}

// worker sends batch, then the batches of its lane until the queue is
// empty, then parks until it is handed another one; it ends after
// idleWorker parked.
func (c *coalescer) worker(h handoff) {
	c.workers.Add(1)
	c.started.Add(1)
	defer c.workers.Add(-1)
	idle := time.NewTimer(c.idleFor)
	defer idle.Stop()
	for {
		c.drain(h)
		idle.Reset(c.idleFor)
		select {
		case h = <-c.work:
			continue
		case <-idle.C:
		}
		c.mu.Lock()
		select {
		case h = <-c.work:
			// Handed over as the timer fired: it counted this worker
			// out of idle already.
			c.mu.Unlock()
			continue
		default:
		}
		c.idle--
		c.mu.Unlock()
		return
	}
}

// drain sends batches on h's lane until the queue is empty, then gives
// the lane back and counts its worker idle.
func (c *coalescer) drain(h handoff) {
	batch := h.batch
	for {
		c.flush(h.l, batch)
		c.mu.Lock()
		if batch = c.take(); batch == nil {
			closeLane := c.park(h.l)
			c.idle++
			c.mu.Unlock()
			closeLane()
			return
		}
		c.mu.Unlock()
	}
}

// take removes up to maxBatch live calls from the head of the queue and
// marks them taken; nil when none is left. c.mu must be held.
func (c *coalescer) take() []*queued {
	var batch []*queued
	n := 0
	for n < len(c.queue) && len(batch) < c.maxBatch {
		q := c.queue[n]
		n++
		if q.gone || q.ctx.Err() != nil || pastBudget(q.ctx) {
			// Returned, or about to: its deadline passed while queued.
			q.gone = true
			continue
		}
		q.taken = true
		batch = append(batch, q)
	}
	clear(c.queue[:n])
	c.queue = c.queue[n:]
	if len(c.queue) == 0 {
		c.queue = c.queue[:0:0]
	}
	return batch
}

// flush sends batch as one pipeline on lane l and hands each call its
// command.
func (c *coalescer) flush(l *lane, batch []*queued) {
	var deadline time.Time
	for _, q := range batch {
		dl, ok := q.ctx.Deadline()
		if !ok {
			// Unbounded callers get the store's budget.
			dl = time.Now().Add(c.s.opts.Timeout)
		}
		if dl.After(deadline) {
			deadline = dl
		}
	}
	// The batch's deadline bounds its sockets and any wait for a
	// connection.
	ctx := context.Context(c.s.deadlines.ctx(context.Background(), deadline))
	p := c.pin(l).Pipeline()
	// The batch's FCALL commands share one slice (each its own part of
	// it), which lives as long as the batch.
	n := 0
	for _, q := range batch {
		n += 3 + len(q.keys) + len(q.args)
	}
	cmds := make([]any, n)
	for _, q := range batch {
		m := 3 + len(q.keys) + len(q.args)
		buf := cmds[:0:m]
		cmds = cmds[m:]
		q.cmd = c.s.first(ctx, p, q.keys, q.args, &buf)
	}
	// Each command carries its own error; Exec's is the first of them.
	_, _ = p.Exec(ctx)
	for _, q := range batch {
		l.after(q.cmd.Err())
	}
	c.s.stats.batches.Add(1)
	c.s.stats.batched.Add(uint64(len(batch)))
	for _, q := range batch {
		close(q.done)
	}
}

// detach copies args into values that share no memory with the caller's
// pooled argument set: a queued call may be written to Redis after its
// caller returned (its deadline passed once a batch had taken it) and
// reused the set for another call, and the batch must then write what
// the call was, not what the next one is. Strings are immutable; byte
// slices and the pointers the decide path boxes (*bytesArg, *string) are
// copied.
func detach(args []any) []any {
	return detachInto(make([]any, 0, len(args)), args)
}

// detachInto appends the detached copies of args to out.
func detachInto(out []any, args []any) []any {
	for _, a := range args {
		switch v := a.(type) {
		case []byte:
			a = string(v)
		case *bytesArg:
			a = string(v.b)
		case *string:
			a = *v
		}
		out = append(out, a)
	}
	return out
}
