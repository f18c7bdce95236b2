package window

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tollgate/gateway/ratelimit"
)

// oracleLimit is where the oracle stops looking: the longest wait a
// decision reports, by its definition (ratelimit.MaxWait), not by the
// engine's constant.
const oracleLimit = int64(100 * 366 * 24 * 3600 * 1_000_000)

// oracleFirst returns the smallest d in [lo, oracleLimit] with ok(d) by a
// plain doubling search then bisection, independent of any guess, or
// oracleLimit when there is none (as a decision reports it).
func oracleFirst(lo int64, ok func(int64) bool) int64 {
	hi := lo
	for step := int64(1); !ok(hi); step *= 2 {
		if hi >= oracleLimit {
			return oracleLimit
		}
		hi = min(hi+step, oracleLimit)
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}

// TestSmallestAgreesWithOracle checks the guessed searches against a
// guess-free one for random boundaries and guesses (exact, near, far, out
// of range).
func TestSmallestAgreesWithOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		lo := r.Int64N(100)
		b := lo + r.Int64N(1<<uint(r.IntN(40)))
		hi := b + r.Int64N(1000)
		ok := func(d int64) bool { return d >= b }
		var guess int64
		switch r.IntN(4) {
		case 0:
			guess = b
		case 1:
			guess = b + r.Int64N(5) - 2
		case 2:
			guess = r.Int64N(hi + 10)
		default:
			guess = -r.Int64N(1 << 20)
		}
		if got := smallest(lo, hi, guess, ok); got != b {
			t.Fatalf("smallest(%d, %d, %d) = %d, want %d", lo, hi, guess, got, b)
		}
		if got, found := smallestFrom(lo, hi, guess, ok); got != b || !found {
			t.Fatalf("smallestFrom(%d, %d, %d) = %d, %v, want %d, true", lo, hi, guess, got, found, b)
		}
		// Below the boundary there is nothing to find: the bound, at once.
		if b > lo {
			if got, found := smallestFrom(lo, b-1, guess, ok); got != b-1 || found {
				t.Fatalf("smallestFrom(%d, %d, %d) = %d, %v, want %d, false", lo, b-1, guess, got, found, b-1)
			}
		}
	}
}

// TestRetryAfterAgainstOracle compares the RetryAfter and Reset of the
// bucket algorithms and the sliding counter, over random states at real
// instants, with the guess-free oracle applied to each algorithm's own
// definition (Allow at now+d).
func TestRetryAfterAgainstOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	base := int64(1_702_080_000_000_000)
	for range 4000 {
		limit := 1 + r.Int64N(1<<uint(1+r.IntN(20)))
		window := 1 + r.Int64N(1<<uint(1+r.IntN(36)))
		burst := max(1, limit+r.Int64N(2*limit+1)-limit)
		now := base + r.Int64N(1<<40)
		p := ratelimit.Params{Algorithm: ratelimit.TokenBucket, Window: window, Limit: limit, Capacity: burst}
		tb := TokenBucketState{Tokens: float64(r.Int64N(burst+1)) - r.Float64()*float64(burst), TS: now - r.Int64N(window) + r.Int64N(window/4+1)}
		if tb.Tokens < 0 && r.IntN(2) == 0 {
			tb.Tokens = math.Nextafter(0, 1)
		}
		g := GCRAState{TAT: float64(now) + (r.Float64()*1.5-0.25)*float64(burst)*float64(window)/float64(limit)}
		cost := 1 + r.Int64N(burst)
		checkOracle(t, "token_bucket", &tb, &p, now, cost)
		p.Algorithm = ratelimit.GCRA
		checkOracle(t, "gcra", &g, &p, now, cost)
	}
	for range 2000 {
		n := int64(1 + r.IntN(8))
		prec := 1 + r.Int64N(1<<uint(1+r.IntN(30)))
		limit := 1 + r.Int64N(1000)
		p := ratelimit.Params{Algorithm: ratelimit.SlidingWindowCounter, Window: n * prec, Limit: limit, Capacity: limit, Precision: prec, Buckets: n}
		now := base + r.Int64N(1<<40)
		var s SlidingCounterState
		s.Init(&p, now-r.Int64N(p.Window))
		for range r.IntN(20) {
			s.take(&p, now-r.Int64N(p.Window), 1+r.Int64N(limit/4+1))
		}
		checkOracle(t, "sliding_window_counter", &s, &p, now, 1+r.Int64N(limit))
	}
	for range 2000 {
		limit := 1 + r.Int64N(1000)
		window := 1 + r.Int64N(1<<uint(1+r.IntN(36)))
		p := ratelimit.Params{Algorithm: ratelimit.FixedWindow, Window: window, Limit: limit, Capacity: limit}
		now := base + r.Int64N(1<<40)
		var s FixedWindowState
		s.Init(&p, now-r.Int64N(2*window))
		s.Count = r.Int64N(limit + 2)
		checkOracle(t, "fixed_window", &s, &p, now, 1+r.Int64N(limit))
	}
}

func checkOracle(t *testing.T, name string, w State, p *ratelimit.Params, now, cost int64) {
	t.Helper()
	ok := func(c int64) func(int64) bool {
		return func(d int64) bool { a, _ := w.allow(p, now+d, c); return a }
	}
	if a, ra := w.allow(p, now, cost); !a {
		if want := oracleFirst(1, ok(cost)); ra != want {
			t.Fatalf("%s %+v at %d cost %d: RetryAfter %d, oracle %d", name, w, now, cost, ra, want)
		}
	}
	rem := w.remaining(p, now)
	want := int64(0)
	if rem < p.Capacity {
		if a, _ := w.allow(p, now, rem+1); !a {
			want = oracleFirst(1, ok(rem+1))
		}
	}
	if got := resetOf(w, p, now); got != want {
		t.Fatalf("%s %+v at %d: Reset %d, oracle %d", name, w, now, got, want)
	}
	// The Reported methods (a one-hit reply's state, held by value) give
	// the same pair.
	if r, ok := w.(interface {
		Reported(*ratelimit.Params, int64) (int64, int64)
	}); ok {
		if gr, gs := r.Reported(p, now); gr != rem || gs != want {
			t.Fatalf("%s %+v at %d: Reported %d, %d; oracle %d, %d", name, w, now, gr, gs, rem, want)
		}
	} else {
		t.Fatalf("%s: %T has no Reported method", name, w)
	}
}
