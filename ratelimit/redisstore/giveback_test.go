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

// The give-back tables on the EVALSHA engine (Redis before 7) too.
func TestModesStandaloneScript(t *testing.T) {
	c := newClient(t, standard.Addr)
	storetest.RunModes(t, func(t *testing.T) ratelimit.Store {
		return newStore(t, c, redisstore.Options{DenyCacheSize: -1, NoFunctions: true})
	})
}

// TestReturnParity drives memstore and Redis with the same random counts
// and give-backs (random costs, counted at random earlier instants, some
// in windows and buckets already gone or reusing a slot) of a fixed
// window and two sliding counters, and requires identical decisions and
// usage after every step.
func TestReturnParity(t *testing.T) {
	rs := newStore(t, newClient(t, standard.Addr), redisstore.Options{DenyCacheSize: -1})
	ms := memstore.New(memstore.Options{})
	ctx := context.Background()
	limits := []*ratelimit.Limit{
		finished(t, ratelimit.Limit{Name: "rfw", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(20, 700*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "rswc", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{rate(20, 900*time.Millisecond)}}),
		finished(t, ratelimit.Limit{Name: "rswcp", Algorithm: ratelimit.SlidingWindowCounter, Precision: 250 * time.Millisecond, Rates: []ratelimit.Rate{rate(15, time.Second)}}),
	}
	rng := rand.New(rand.NewPCG(5, 6))
	now := time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(1e6)) * time.Microsecond)
	returns := 0
	for step := range 1500 {
		now = now.Add(time.Duration(rng.Int64N(60_000)) * time.Microsecond)
		l := limits[rng.IntN(len(limits))]
		h := ratelimit.Hit{Limit: l, Key: "{r}k" + fmt.Sprint(rng.IntN(2)), Cost: 1 + rng.Int64N(6)}
		if rng.IntN(3) == 0 {
			at := []time.Time{now.Add(-time.Duration(rng.Int64N(int64(2 * l.Rates[0].Window))))}
			if err := ms.Return(ctx, now, []ratelimit.Hit{h}, at); err != nil {
				t.Fatal(err)
			}
			if err := rs.Return(ctx, now, []ratelimit.Hit{h}, at); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			returns++
		} else {
			want := make([]ratelimit.Decision, 1)
			got := make([]ratelimit.Decision, 1)
			wa, err := ms.Decide(ctx, now, []ratelimit.Hit{h}, want)
			if err != nil {
				t.Fatal(err)
			}
			ga, err := rs.Decide(ctx, now, []ratelimit.Hit{h}, got)
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if wa != ga || got[0] != want[0] {
				t.Fatalf("step %d (%s cost %d): got %v %+v, memstore %v %+v", step, l.Name, h.Cost, ga, got[0], wa, want[0])
			}
		}
		wu, err := ms.Usage(ctx, now, l, h.Key)
		if err != nil {
			t.Fatal(err)
		}
		gu, err := rs.Usage(ctx, now, l, h.Key)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(wu) != fmt.Sprint(gu) {
			t.Fatalf("step %d (%s): usage %+v, memstore %+v", step, l.Name, gu, wu)
		}
	}
	if returns < 300 {
		t.Fatalf("only %d give-backs", returns)
	}
}
