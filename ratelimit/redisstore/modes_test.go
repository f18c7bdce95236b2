package redisstore_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/redisstore"
	"github.com/tollgate/gateway/ratelimit/storetest"
)

// The hit modes' property tests against their naive models, on Redis,
// with and without the deny cache (which a take and a delaying limit
// bypass), standalone and on a Cluster.
func TestModesStandalone(t *testing.T) {
	c := newClient(t, standard.Addr)
	storetest.RunModes(t, func(t *testing.T) ratelimit.Store {
		return newStore(t, c, redisstore.Options{DenyCacheSize: -1})
	})
}

func TestModesStandaloneDenyCache(t *testing.T) {
	c := newClient(t, standard.Addr)
	storetest.RunModes(t, func(t *testing.T) ratelimit.Store {
		return newStore(t, c, redisstore.Options{})
	})
}

func TestModesCluster(t *testing.T) {
	c := newClusterClient(t, sharedCluster().Addrs())
	storetest.RunModes(t, func(t *testing.T) ratelimit.Store {
		return newStore(t, c, redisstore.Options{DenyCacheSize: -1})
	})
}

// TestModesParity drives memstore and Redis with the same random requests
// mixing peeks, takes (past the limit), delaying limits and cancelled
// reservations, and requires identical decisions, Delay and Mark (bit for
// bit) included.
func TestModesParity(t *testing.T) {
	rs := newStore(t, newClient(t, standard.Addr), redisstore.Options{DenyCacheSize: -1})
	ms := memstore.New(memstore.Options{})
	ctx := context.Background()
	limits := parityLimits(t)
	for _, l := range []ratelimit.Limit{
		{Name: "dtb", Algorithm: ratelimit.TokenBucket, Burst: 3, MaxDelay: 700 * time.Millisecond, Rates: []ratelimit.Rate{rate(5, time.Second)}},
		{Name: "dgcra", Algorithm: ratelimit.GCRA, Burst: 2, MaxDelay: 1300 * time.Millisecond, Rates: []ratelimit.Rate{rate(7, 900*time.Millisecond)}},
	} {
		limits = append(limits, finished(t, l))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	now := time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(1e6)) * time.Microsecond)
	type reservation struct {
		at     time.Time
		hits   []ratelimit.Hit
		ms, rs []ratelimit.Decision
	}
	var pending []reservation
	delayed, canceled, takes := 0, 0, 0
	for step := range 2500 {
		now = now.Add(time.Duration(rng.Int64N(90_000)) * time.Microsecond)
		for i := 0; i < len(pending); i++ {
			p := pending[i]
			if p.at.After(now) {
				continue
			}
			pending = append(pending[:i], pending[i+1:]...)
			i--
			if err := ms.Cancel(ctx, p.at, p.hits, p.ms); err != nil {
				t.Fatal(err)
			}
			if err := rs.Cancel(ctx, p.at, p.hits, p.rs); err != nil {
				t.Fatal(err)
			}
			canceled++
		}
		n := 1 + rng.IntN(2)
		hits := make([]ratelimit.Hit, 0, n)
		for range n {
			l := limits[rng.IntN(len(limits))]
			if rng.IntN(2) == 0 {
				l = limits[len(limits)-1-rng.IntN(2)] // a delaying limit
			}
			if l.Algorithm == ratelimit.Concurrency || l.Name == "biglog" {
				continue
			}
			h := ratelimit.Hit{Limit: l, Key: "{m}k" + fmt.Sprint(rng.IntN(2)), Cost: 1 + rng.Int64N(2)}
			if l.MaxDelay == 0 {
				switch rng.IntN(5) {
				case 0:
					h.Mode = ratelimit.HitPeek
				case 1:
					h.Mode = ratelimit.HitTake
					takes++
				}
			}
			dup := false
			for _, o := range hits {
				dup = dup || (o.Limit == h.Limit && o.Key == h.Key)
			}
			if !dup {
				hits = append(hits, h)
			}
		}
		if len(hits) == 0 {
			continue
		}
		want := make([]ratelimit.Decision, len(hits))
		got := make([]ratelimit.Decision, len(hits))
		wa, ga := decideBoth(t, ctx, ms, rs, now, hits, want, got, step)
		if wa != ga {
			t.Fatalf("step %d: allowed = %v, memstore %v; %s", step, ga, wa, describeModes(hits))
		}
		for i := range hits {
			g, w := got[i], want[i]
			if math.Float64bits(g.Mark) != math.Float64bits(w.Mark) {
				t.Fatalf("step %d hit %d: Mark %v, memstore %v", step, i, g.Mark, w.Mark)
			}
			if g != w {
				t.Fatalf("step %d hit %d (%s): got %+v, memstore %+v; %s", step, i, hits[i].Limit.Name, g, w, describeModes(hits))
			}
			if w.Delay > 0 {
				delayed++
				if rng.IntN(3) == 0 {
					at := now.Add(time.Duration(rng.Int64N(int64(w.Delay))))
					pending = append(pending, reservation{at, hits, want, got})
				}
			}
		}
	}
	t.Logf("%d delayed, %d canceled, %d takes", delayed, canceled, takes)
	if delayed < 100 || canceled < 30 {
		t.Errorf("the run exercised too little: %d delayed, %d canceled", delayed, canceled)
	}
}

func describeModes(hits []ratelimit.Hit) string {
	s := ""
	for _, h := range hits {
		s += fmt.Sprintf("[%s %s c%d %s]", h.Limit.Name, h.Key, h.Cost, h.Mode)
	}
	return s
}
