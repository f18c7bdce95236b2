package hybrid_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/hybrid"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// admission is one admitted hit as the naive model sees it: its true
// instant (ticks) and cost.
type admission struct{ t, c int64 }

// naiveFixed is the fixed window's definition written out: the units
// admitted in the aligned window of t.
func naiveFixed(adm []admission, w, t int64) int64 {
	var n int64
	for _, a := range adm {
		if a.t/w == t/w {
			n += a.c
		}
	}
	return n
}

// naiveSliding is the sliding counter's estimate at t over the admissions
// at their true instants: the N newest buckets in full, the one before
// weighed by the part of it still inside the window.
func naiveSliding(adm []admission, w, p, t int64) float64 {
	n := w / p
	i := t / p
	e := t - i*p
	var full, partial int64
	for _, a := range adm {
		j := a.t / p
		switch {
		case j > i-n && j <= i:
			full += a.c
		case j == i-n:
			partial += a.c
		}
	}
	return float64(full) + float64(partial)*float64(p-e)/float64(p)
}

// TestFleetBound: N gateways (hybrid stores) share one store; requests of
// random costs arrive at random gateways at random instants. Every
// admission is checked against the naive definition of the algorithm over
// the true admission instants: a fixed window never passes its limit, a
// sliding counter never passes it by more than N·(k−1) units. Gateways
// give their unused units back (the store is a ratelimit.Returner) in half
// the runs and not in the other half: the bounds hold either way, a fixed
// window's store count never falls below what the fleet admitted in it
// (a give-back never returns a unit that was used or counted elsewhere),
// and once every gateway has flushed, it equals it (nothing stranded).
// In half the runs the store decides on a clock of its own (as Redis
// with store.clock = "store"), from which every gateway's clock is off
// by up to three windows either way: admissions are then checked on the
// store's clock, and give-backs name the store's instants (Decision.At).
func TestFleetBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 300 {
		alg := ratelimit.FixedWindow
		if run%2 == 1 {
			alg = ratelimit.SlidingWindowCounter
		}
		limit := 5 + rng.Int64N(200)
		window := time.Duration(1+rng.IntN(10)) * 100 * time.Millisecond
		l := ratelimit.Limit{Name: "p", Algorithm: alg, Rates: []ratelimit.Rate{{Limit: limit, Window: window}},
			Batch: &ratelimit.Batch{Interval: time.Duration(1+rng.IntN(300)) * time.Millisecond, Lease: 1 + rng.Int64N(limit)}}
		if alg == ratelimit.SlidingWindowCounter && rng.IntN(2) == 0 {
			l.Precision = window / 4
		}
		if err := l.Finish(); err != nil {
			t.Fatal(err)
		}
		gateways := 1 + rng.IntN(6)
		returns := run%4 < 2
		skewed := run%8 >= 4
		name := fmt.Sprintf("run%d/%s/L=%d/W=%s/P=%s/k=%d/every=%s/N=%d/return=%t/skewed=%t", run, alg, limit, window, l.Precision, l.Batch.Lease, l.Batch.Interval, gateways, returns, skewed)
		mem := memstore.New(memstore.Options{})
		var shared ratelimit.Store = mem
		if !returns {
			shared = noReturn{mem}
		}
		fleet := make([]*hybrid.Store, gateways)
		skew := make([]time.Duration, gateways) // gateway i's clock minus the store's
		for i := range fleet {
			st := shared
			if skewed {
				skew[i] = time.Duration(rng.Int64N(int64(6*window))) - 3*window + time.Duration(rng.Int64N(1000))*time.Microsecond
				st = &ownClock{Store: mem, skew: -skew[i]}
				if !returns {
					st = noReturn{st}
				}
			}
			fleet[i] = hybrid.New(st, hybrid.Options{})
		}
		w := int64(window / ratelimit.Tick)
		p := w
		if l.Precision > 0 {
			p = int64(l.Precision / ratelimit.Tick)
		}
		bound := float64(limit)
		if alg == ratelimit.SlidingWindowCounter {
			bound += float64(int64(gateways) * (l.Batch.Lease - 1))
		}
		var adm []admission
		now := time.UnixMicro(1_700_000_000_000_000)
		out := make([]ratelimit.Decision, 1)
		for range 2000 {
			now = now.Add(time.Duration(rng.Int64N(int64(window) / 50)))
			cost := 1 + rng.Int64N(3)
			gi := rng.IntN(gateways)
			ok, err := fleet[gi].Decide(context.Background(), now.Add(skew[gi]), []ratelimit.Hit{{Limit: &l, Key: "k", Cost: cost}}, out)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			ts := now.UnixMicro()
			if ok {
				if alg == ratelimit.FixedWindow {
					checkCounted(t, name, mem, &l, now, naiveFixed(adm, w, ts)+cost)
				}
			}
			if !ok {
				continue
			}
			if alg == ratelimit.FixedWindow {
				if used := naiveFixed(adm, w, ts); used+cost > limit {
					t.Fatalf("%s: admitted %d units on %d in one window (limit %d)", name, cost, used, limit)
				}
			} else if est := naiveSliding(adm, w, p, ts); est+float64(cost) > bound+1e-9 {
				t.Fatalf("%s: admitted %d units on an estimate of %.3f (limit %d, bound %.0f)", name, cost, est, limit, bound)
			}
			adm = append(adm, admission{ts, cost})
		}
		if alg != ratelimit.FixedWindow || !returns {
			continue
		}
		for i, g := range fleet {
			g.Flush(context.Background(), now.Add(skew[i]))
		}
		want := naiveFixed(adm, w, now.UnixMicro())
		if got := counted(t, mem, &l, now); got != want {
			t.Fatalf("%s: after every gateway flushed, the window counts %d units; the fleet admitted %d", name, got, want)
		}
	}
}

// noReturn hides a store's Return: the hybrid store then strands its
// unused units, as before give-backs existed.
type noReturn struct{ ratelimit.Store }

// counted is the store's count of l's window at now (fixed_window).
func counted(t *testing.T, st ratelimit.Store, l *ratelimit.Limit, now time.Time) int64 {
	t.Helper()
	u, err := st.Usage(context.Background(), now, l, "k")
	if err != nil || len(u) != 1 {
		t.Fatalf("usage: %v %v", u, err)
	}
	return u[0].Used
}

// checkCounted fails unless the store counts at least admitted units in
// l's window at now: the store never trails what the fleet admitted.
func checkCounted(t *testing.T, name string, st ratelimit.Store, l *ratelimit.Limit, now time.Time, admitted int64) {
	t.Helper()
	if got := counted(t, st, l, now); got < admitted {
		t.Fatalf("%s: the store counts %d units in the window; the fleet admitted %d", name, got, admitted)
	}
}
