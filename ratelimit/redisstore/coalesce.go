package redisstore

import (
	"context"
	"sync"
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
// It is used on standalone and Sentinel clients only; on a Cluster every
// call goes alone (a pipeline spanning slots would split it by node, and
// the Cluster path orders and refunds per slot).
type coalescer struct {
	s        *Store
	client   redis.UniversalClient
	lanes    int
	maxBatch int

	mu    sync.Mutex
	busy  int // lanes in use
	queue []*queued
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

func newCoalescer(s *Store, lanes, maxBatch int) *coalescer {
	return &coalescer{s: s, client: s.client, lanes: lanes, maxBatch: maxBatch}
}

// do sends one call, alone or in a batch, and returns its reply.
func (c *coalescer) do(ctx context.Context, keys []string, args []any) (any, error) {
	c.mu.Lock()
	if c.busy < c.lanes {
		c.busy++
		c.mu.Unlock()
		res, err := c.s.finish(ctx, c.client, c.s.first(ctx, c.client, keys, args), keys, args)
		c.free()
		return res, err
	}
	// The caller's keys and args (pooled, and the header a reused byte
	// slice) are its own again once do returns, possibly before the batch
	// holding them is written: the queued call keeps copies.
	q := &queued{ctx: ctx, keys: append([]string(nil), keys...), args: detach(args), done: make(chan struct{})}
	c.queue = append(c.queue, q)
	c.mu.Unlock()
	select {
	case <-q.done:
		return c.s.finish(ctx, c.client, q.cmd, q.keys, q.args)
	case <-ctx.Done():
		c.mu.Lock()
		if !q.taken {
			q.gone = true
		}
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// free gives back a lane: to the queue, whose calls then go out in
// batches from a goroutine of their own, or to the pool of free lanes.
func (c *coalescer) free() {
	c.mu.Lock()
	batch := c.take()
	if batch == nil {
		c.busy--
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	go c.drain(batch)
}

// drain sends batches on one lane until the queue is empty.
func (c *coalescer) drain(batch []*queued) {
	for {
		c.flush(batch)
		c.mu.Lock()
		if batch = c.take(); batch == nil {
			c.busy--
			c.mu.Unlock()
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
		if q.gone || q.ctx.Err() != nil {
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

// flush sends batch as one pipeline and hands each call its command.
func (c *coalescer) flush(batch []*queued) {
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
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	p := c.client.Pipeline()
	for _, q := range batch {
		q.cmd = c.s.first(ctx, p, q.keys, q.args)
	}
	// Each command carries its own error; Exec's is the first of them.
	_, _ = p.Exec(ctx)
	cancel()
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
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case []byte:
			a = string(v)
		case *bytesArg:
			a = string(v.b)
		case *string:
			a = *v
		}
		out[i] = a
	}
	return out
}
