package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

func zoneOf(t testing.TB, name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// quotaParityLimits are quotas in zones with DST and skipped days, and
// limits of several algorithms with a penalty box.
func quotaParityLimits(t testing.TB) []*ratelimit.Limit {
	day, week := 24*time.Hour, 7*24*time.Hour
	return []*ratelimit.Limit{
		finished(t, ratelimit.Limit{Name: "qday", Algorithm: ratelimit.Quota, Location: zoneOf(t, "America/New_York"),
			Rates: []ratelimit.Rate{rate(6, day)}}),
		finished(t, ratelimit.Limit{Name: "qall", Algorithm: ratelimit.Quota, Location: zoneOf(t, "Europe/Berlin"), MonthStartsOn: 15,
			Rates: []ratelimit.Rate{rate(5, day), rate(12, week), rate(30, ratelimit.MonthWindow)}}),
		finished(t, ratelimit.Limit{Name: "qapia", Algorithm: ratelimit.Quota, Location: zoneOf(t, "Pacific/Apia"),
			Rates: []ratelimit.Rate{rate(4, day), rate(20, ratelimit.MonthWindow)}}),
		finished(t, ratelimit.Limit{Name: "qpen", Algorithm: ratelimit.Quota, Penalty: 90 * time.Minute,
			Rates: []ratelimit.Rate{rate(4, day)}}),
		finished(t, ratelimit.Limit{Name: "fwpen", Algorithm: ratelimit.FixedWindow, Penalty: 3 * time.Second,
			Rates: []ratelimit.Rate{rate(2, time.Second)}}),
		finished(t, ratelimit.Limit{Name: "tbpen", Algorithm: ratelimit.TokenBucket, Penalty: 1500 * time.Millisecond,
			Rates: []ratelimit.Rate{rate(3, time.Second)}}),
		finished(t, ratelimit.Limit{Name: "logpen", Algorithm: ratelimit.SlidingWindowLog, Penalty: 2 * time.Hour,
			Rates: []ratelimit.Rate{rate(3, time.Minute), rate(8, time.Hour)}}),
		// A delaying limit with a penalty: both trail its parameters.
		finished(t, ratelimit.Limit{Name: "gcrapen", Algorithm: ratelimit.GCRA, MaxDelay: 300 * time.Millisecond,
			Penalty: 2 * time.Second, Rates: []ratelimit.Rate{rate(4, time.Second)}}),
	}
}

// TestParityQuotaPenalty drives memstore and the Redis store with the same
// random requests on quotas and penalty boxes, from instants just before
// the local midnights of DST changes, month ends and Samoa's skipped day,
// in steps from milliseconds to hours (sometimes back), and requires
// identical decisions and usage.
func TestParityQuotaPenalty(t *testing.T) {
	for _, topo := range []string{"standalone", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			var c redis.UniversalClient
			if topo == "standalone" {
				c = newClient(t, standard.Addr)
			} else {
				c = newClusterClient(t, sharedCluster().Addrs())
			}
			rs := newStore(t, c, redisstore.Options{DenyCacheSize: -1})
			starts := []time.Time{
				time.Date(2024, 3, 9, 23, 0, 0, 0, zoneOf(t, "America/New_York")),   // before a 23-hour day
				time.Date(2024, 10, 26, 22, 0, 0, 0, zoneOf(t, "Europe/Berlin")),    // before a 25-hour day
				time.Date(2024, 2, 28, 20, 0, 0, 0, zoneOf(t, "Europe/Berlin")),     // leap February's end
				time.Date(2011, 12, 29, 20, 0, 0, 0, zoneOf(t, "Pacific/Apia")),     // the skipped day
				time.Date(2023, 12, 31, 18, 0, 0, 0, zoneOf(t, "America/New_York")), // year end
			}
			for i, start := range starts {
				quotaParity(t, rs, start, int64(i), 400)
			}
		})
	}
}

func quotaParity(t *testing.T, rs *redisstore.Store, now time.Time, seed int64, steps int) {
	ms := memstore.New(memstore.Options{})
	ctx := context.Background()
	limits := quotaParityLimits(t)
	rng := rand.New(rand.NewPCG(uint64(seed), 12))
	tags := []string{"{a}", "{b}"}
	prefix := fmt.Sprintf("q%d-%d-", seed, rand.Uint64())
	// What the run saw, so that it cannot pass without reaching the
	// cases it is for.
	var boxed, quotaDenied int
	defer func() {
		if !t.Failed() && (boxed == 0 || quotaDenied == 0) {
			t.Errorf("seed %d: %d decisions in a penalty box, %d quota denials: the run missed its cases", seed, boxed, quotaDenied)
		}
	}()
	for step := range steps {
		switch r := rng.IntN(100); {
		case r < 4:
			// The clock steps back, by less than the memory store's grace
			// for expired states (a state forgotten a minute after its
			// expiry is seen fresh by a clock stepped back further, while
			// Redis keeps its key for a TTL of real, not simulated, time).
			now = now.Add(-time.Duration(rng.Int64N(int64(50 * time.Second))))
		case r < 50:
			now = now.Add(time.Duration(rng.Int64N(int64(2 * time.Second))))
		case r < 90:
			now = now.Add(time.Duration(rng.Int64N(int64(20 * time.Minute))))
		default:
			now = now.Add(time.Duration(rng.Int64N(int64(5 * time.Hour))))
		}
		now = now.Truncate(ratelimit.Tick)
		n := 1 + rng.IntN(3)
		hits := make([]ratelimit.Hit, n)
		for i := range hits {
			key := tags[rng.IntN(len(tags))] + prefix + fmt.Sprint(rng.IntN(2))
			hits[i] = ratelimit.Hit{Limit: limits[rng.IntN(len(limits))], Key: key, Cost: 1 + rng.Int64N(3)}
			// Counting by response: a peek before forwarding, a take after.
			switch r := rng.IntN(20); {
			case r < 3:
				hits[i].Mode = ratelimit.HitPeek
			case r < 6:
				hits[i].Mode = ratelimit.HitTake
			}
		}
		want := make([]ratelimit.Decision, n)
		got := make([]ratelimit.Decision, n)
		wa, ga := decideBoth(t, ctx, ms, rs, now, hits, want, got, step)
		if wa != ga {
			t.Fatalf("seed %d step %d at %s: allowed = %v, memstore %v; hits %s", seed, step, now.Format(time.RFC3339Nano), ga, wa, describe(hits))
		}
		for i := range hits {
			if want[i].Penalty && want[i].Remaining == 0 && !want[i].Never {
				boxed++
			}
			if hits[i].Limit.Algorithm == ratelimit.Quota && !want[i].Allowed && !want[i].Penalty {
				quotaDenied++
			}
			if got[i] != want[i] {
				t.Fatalf("seed %d step %d at %s: hit %d (%s cost %d key %s): got %+v, memstore %+v; hits %s", seed,
					step, now.Format(time.RFC3339Nano), i, hits[i].Limit.Name, hits[i].Cost, hits[i].Key, got[i], want[i], describe(hits))
			}
		}
		if step%25 == 0 {
			key := tags[0] + prefix + "0"
			for _, l := range limits {
				for _, ul := range []*ratelimit.Limit{l, l.PenaltyBox()} {
					if ul == nil {
						continue
					}
					mu, err := ms.Usage(ctx, now, ul, key)
					if err != nil {
						t.Fatal(err)
					}
					ru, err := rs.Usage(ctx, now, ul, key)
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(mu) != fmt.Sprint(ru) {
						t.Fatalf("seed %d step %d: Usage(%s) = %v, memstore %v", seed, step, ul.ID, ru, mu)
					}
				}
			}
		}
	}
}
