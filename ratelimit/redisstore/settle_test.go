package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/redisstore"
	"github.com/tollgate/gateway/ratelimit/storetest"
)

func TestSettleStandalone(t *testing.T) {
	c := newClient(t, standard.Addr)
	storetest.RunSettle(t, func(t *testing.T) ratelimit.Store {
		return newStore(t, c, redisstore.Options{DenyCacheSize: -1})
	})
}

func TestSettleCluster(t *testing.T) {
	c := newClusterClient(t, sharedCluster().Addrs())
	storetest.RunSettle(t, func(t *testing.T) ratelimit.Store {
		return newStore(t, c, redisstore.Options{DenyCacheSize: -1})
	})
}

// TestSettleParity drives memstore and Redis with the same random
// reservations (counts) settled later by giving back part of them or
// charging more (takes), on every algorithm and several windows, and
// requires identical decisions after every step: the give-back is the
// same math on both stores.
func TestSettleParity(t *testing.T) {
	rs := newStore(t, newClient(t, standard.Addr), redisstore.Options{DenyCacheSize: -1})
	ms := memstore.New(memstore.Options{})
	ctx := context.Background()
	var limits []*ratelimit.Limit
	for _, l := range parityLimits(t) {
		if l.Algorithm != ratelimit.Concurrency && l.Name != "biglog" {
			limits = append(limits, l)
		}
	}
	limits = append(limits, finished(t, ratelimit.Limit{Name: "q", Algorithm: ratelimit.Quota, Rates: []ratelimit.Rate{rate(40, 24*time.Hour)}}))
	rng := rand.New(rand.NewPCG(5, 6))
	now := time.Date(2024, 5, 1, 23, 59, 50, 0, time.UTC).Add(time.Duration(rng.Int64N(1e6)) * time.Microsecond)
	type reservation struct {
		at, due time.Time
		hits    []ratelimit.Hit
	}
	var pending []reservation
	given, charged := 0, 0
	for step := range 2000 {
		now = now.Add(time.Duration(rng.Int64N(60_000)) * time.Microsecond)
		for i := 0; i < len(pending); i++ {
			p := pending[i]
			if p.due.After(now) {
				continue
			}
			pending = append(pending[:i], pending[i+1:]...)
			i--
			back := make([]ratelimit.Hit, len(p.hits))
			at := make([]time.Time, len(p.hits))
			for k, h := range p.hits {
				back[k], at[k] = h, p.at
				back[k].Cost = 1 + rng.Int64N(h.Cost)
			}
			if rng.IntN(4) == 0 {
				// A usage above the estimate: the difference is a take.
				for k := range back {
					back[k].Mode = ratelimit.HitTake
				}
				want := make([]ratelimit.Decision, len(back))
				got := make([]ratelimit.Decision, len(back))
				decideBoth(t, ctx, ms, rs, now, back, want, got, step)
				charged++
				continue
			}
			if err := ms.GiveBack(ctx, now, back, at); err != nil {
				t.Fatal(err)
			}
			if err := rs.GiveBack(ctx, now, back, at); err != nil {
				t.Fatal(err)
			}
			given++
		}
		n := 1 + rng.IntN(2)
		hits := make([]ratelimit.Hit, 0, n)
		for range n {
			l := limits[rng.IntN(len(limits))]
			h := ratelimit.Hit{Limit: l, Key: "{s}k" + fmt.Sprint(rng.IntN(2)), Cost: 1 + rng.Int64N(3)}
			dup := false
			for _, o := range hits {
				dup = dup || (o.Limit == h.Limit && o.Key == h.Key)
			}
			if !dup {
				hits = append(hits, h)
			}
		}
		want := make([]ratelimit.Decision, len(hits))
		got := make([]ratelimit.Decision, len(hits))
		wa, ga := decideBoth(t, ctx, ms, rs, now, hits, want, got, step)
		if wa != ga {
			t.Fatalf("step %d: allowed = %v, memstore %v; %s", step, ga, wa, describeModes(hits))
		}
		for i := range hits {
			if got[i] != want[i] {
				t.Fatalf("step %d hit %d (%s): got %+v, memstore %+v", step, i, hits[i].Limit.Name, got[i], want[i])
			}
		}
		if wa && rng.IntN(2) == 0 {
			due := now.Add(time.Duration(rng.Int64N(1_500_000)) * time.Microsecond)
			pending = append(pending, reservation{now, due, hits})
		}
	}
	t.Logf("%d settled by giving back, %d by charging", given, charged)
	if given < 200 || charged < 50 {
		t.Errorf("the run exercised too little: %d given back, %d charged", given, charged)
	}
}
