package replay

import (
	"context"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/hybrid"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// fleet is the replay's store when the policy has batched limits: n
// gateways (hybrid stores) sharing one in-memory store, each request
// decided by the next gateway in turn, as a load balancer deals them.
// Replay is sequential, so next needs no lock.
type fleet struct {
	*memstore.Store
	gws  []*hybrid.Store
	next int
}

func newFleet(mem *memstore.Store, n int) *fleet {
	f := &fleet{Store: mem}
	for range n {
		f.gws = append(f.gws, hybrid.New(mem, hybrid.Options{}))
	}
	return f
}

// Decide implements ratelimit.Store.
func (f *fleet) Decide(ctx context.Context, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) (bool, error) {
	g := f.gws[f.next]
	f.next = (f.next + 1) % len(f.gws)
	return g.Decide(ctx, now, hits, out)
}

// batchJudge decides a batched limit's hits again exactly, on a store of
// its own fed the history the fleet admitted, so that the replay can count
// the decisions on which batching differed from the exact algorithm: a
// false allow is an admission past the limit (overshoot), a false deny an
// admission lost to units leased and not used.
type batchJudge struct {
	exact map[*ratelimit.Limit]*ratelimit.Limit // each variant without Batch
	store *memstore.Store
	out   [1]ratelimit.Decision
}

// newBatchJudge judges the variants vs of one batched limit (its plans'
// rates, if any).
func newBatchJudge(vs []*ratelimit.Limit, maxKeys int) *batchJudge {
	j := &batchJudge{exact: make(map[*ratelimit.Limit]*ratelimit.Limit, len(vs)), store: memstore.New(memstore.Options{MaxKeys: maxKeys})}
	for _, v := range vs {
		e := *v
		e.Batch = nil
		j.exact[v] = &e
	}
	return j
}

// judge returns whether the exact limit allows h at now, then counts h
// there when the fleet counted it.
func (j *batchJudge) judge(now time.Time, h ratelimit.Hit, counted bool) bool {
	e := j.exact[h.Limit]
	if e == nil {
		return true
	}
	h.Limit, h.Mode = e, ratelimit.HitPeek
	ctx := context.Background()
	ok, _ := j.store.Decide(ctx, now, []ratelimit.Hit{h}, j.out[:])
	if counted {
		h.Mode = ratelimit.HitTake
		j.store.Decide(ctx, now, []ratelimit.Hit{h}, j.out[:])
	}
	return ok
}
