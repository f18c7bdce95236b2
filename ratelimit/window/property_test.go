package window

import (
	"math"
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// arrival is one request of a generated sequence.
type arrival struct {
	at, cost int64
}

// arrivals decodes fuzz bytes into a sequence: 3 bytes per request, a time
// step of 0..4095 ticks scaled by unit (steps backwards when back is set and
// the top bit of the first byte is set) and a cost of 1..4.
func arrivals(data []byte, unit int64, back bool) []arrival {
	var out []arrival
	now := int64(1_702_080_000_000_000)
	for len(data) >= 3 && len(out) < 400 {
		step := (int64(data[0]&0x0f)<<8 | int64(data[1])) * unit
		if back && data[0]&0x80 != 0 {
			step = -step
		}
		now += step
		out = append(out, arrival{at: now, cost: 1 + int64(data[2]%4)})
		data = data[3:]
	}
	return out
}

// admitted is one counted request, at the effective instant m: the latest
// clock among the counted requests so far and this one, which equals at
// for a monotone clock. Denied requests do not move it: a denial writes
// nothing, so no store can know the clock it saw (a request dated after a
// denial and before it is decided as the stored state allows).
type admitted struct {
	at, m, cost int64
	up          int64 // the clock's total forward movement so far
}

// simulate runs seq through one window state of l, counting what is
// allowed, and checks on the way that RetryAfter is exact for exact
// algorithms and that Remaining stays in range.
func simulate[S any, P StatePtr[S]](t *testing.T, l *ratelimit.Limit, seq []arrival, clone func(S) S) (out []admitted, decisions []bool) {
	t.Helper()
	p := l.Params(0)
	var s S
	w := P(&s)
	if len(seq) > 0 {
		w.Init(&p, seq[0].at)
	}
	m, up := int64(math.MinInt64), int64(0)
	for i, a := range seq {
		if i > 0 {
			up += max(a.at-seq[i-1].at, 0)
		}
		ok, ra := w.allow(&p, a.at, a.cost)
		decisions = append(decisions, ok)
		if !ok && l.Algorithm != ratelimit.Concurrency && a.cost <= p.Capacity {
			if ra < 1 {
				t.Fatalf("request %d (t+%d, cost %d): RetryAfter %d < 1", i, a.at-seq[0].at, a.cost, ra)
			}
			c := clone(s)
			if ok2, _ := P(&c).allow(&p, a.at+ra, a.cost); !ok2 {
				t.Fatalf("request %d (cost %d): denied at now+RetryAfter (%d)", i, a.cost, ra)
			}
			if ra > 1 && l.Algorithm.Exact() {
				if ok2, _ := P(&c).allow(&p, a.at+ra-1, a.cost); ok2 {
					t.Fatalf("request %d (cost %d): allowed at now+RetryAfter-1 (%d)", i, a.cost, ra-1)
				}
			}
		}
		if ok {
			m = max(m, a.at)
			w.take(&p, a.at, a.cost)
			out = append(out, admitted{a.at, m, a.cost, up})
		}
		if r := w.remaining(&p, a.at); r < 0 || r > p.Capacity {
			t.Fatalf("request %d: Remaining %d outside 0..%d", i, r, p.Capacity)
		}
	}
	return out, decisions
}

func same[S any](s S) S { return s }

func cloneLog(s LogState) LogState {
	s.ring = append([]logEntry(nil), s.ring...)
	return s
}

func cloneCounter(s SlidingCounterState) SlidingCounterState {
	s.Counts = append([]int64(nil), s.Counts...)
	return s
}

func mkLimit(t *testing.T, a ratelimit.Algorithm, limit int64, window time.Duration, burst int64, precision time.Duration) *ratelimit.Limit {
	t.Helper()
	l := &ratelimit.Limit{Name: "p", Algorithm: a, Rates: []ratelimit.Rate{{Limit: limit, Window: window}}, Burst: burst, Precision: precision}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	return l
}

// checkSequence runs every property on one decoded sequence.
func checkSequence(t *testing.T, data []byte, back bool) {
	const L, W = 5, 1000 // 5 per 1000 ticks; T = 200 ticks exactly
	win := time.Duration(W) * ratelimit.Tick
	seq := arrivals(data, 7, back)
	if len(seq) == 0 {
		return
	}

	// fixed_window: never more than L per aligned window (of the latest
	// clock seen); never denies what its definition allows.
	fw := mkLimit(t, ratelimit.FixedWindow, L, win, 0, 0)
	adm, dec := simulate[FixedWindowState](t, fw, seq, same)
	perWindow := map[int64]int64{}
	for _, a := range adm {
		perWindow[floorDiv(a.m, W)] += a.cost
	}
	for w, n := range perWindow {
		if n > L {
			t.Fatalf("fixed_window admitted %d > %d in window %d", n, L, w)
		}
	}
	if !back {
		used := map[int64]int64{}
		for i, a := range seq {
			allow := used[floorDiv(a.at, W)]+a.cost <= L
			if allow != dec[i] {
				t.Fatalf("fixed_window request %d: got %v, reference %v", i, dec[i], allow)
			}
			if allow {
				used[floorDiv(a.at, W)] += a.cost
			}
		}
	}

	// sliding_window_log: never more than L in any interval (t−W, t].
	lg := mkLimit(t, ratelimit.SlidingWindowLog, L, win, 0, 0)
	adm, dec = simulate[LogState](t, lg, seq, cloneLog)
	for _, a := range adm {
		var n int64
		for _, b := range adm {
			if b.m > a.m-W && b.m <= a.m {
				n += b.cost
			}
		}
		if n > L {
			t.Fatalf("sliding_window_log admitted %d > %d in (%d, %d]", n, L, a.m-W, a.m)
		}
	}
	if !back {
		var log []admitted
		for i, a := range seq {
			var n int64
			for _, b := range log {
				if b.at > a.at-W {
					n += b.cost
				}
			}
			allow := n+a.cost <= L
			if allow != dec[i] {
				t.Fatalf("sliding_window_log request %d: got %v, reference %v", i, dec[i], allow)
			}
			if allow {
				log = append(log, admitted{at: a.at, cost: a.cost})
			}
		}
	}

	// sliding_window_counter with 1 and 4 sub-buckets: the same decisions
	// as the estimate computed naively from the admitted requests, in
	// integers: est + c ≤ L with est = full + partial·(P−e)/P is
	// full·P + partial·(P−e) + c·P ≤ L·P. (The store decides in doubles;
	// with L = 5 and P ≤ 1000 an estimate that is not an exact integer is
	// at least 1/P away from one, far beyond a double's rounding, so both
	// give the same answer.)
	for _, prec := range []int64{W, W / 4} {
		sc := mkLimit(t, ratelimit.SlidingWindowCounter, L, win, 0, time.Duration(prec)*ratelimit.Tick)
		_, dec = simulate[SlidingCounterState](t, sc, seq, cloneCounter)
		if back {
			continue
		}
		var log []admitted
		N := W / prec
		for i, a := range seq {
			bi := floorDiv(a.at, prec)
			e := a.at - bi*prec
			var full, partial int64
			for _, b := range log {
				switch j := floorDiv(b.at, prec); {
				case j > bi-N && j <= bi:
					full += b.cost
				case j == bi-N:
					partial += b.cost
				}
			}
			allow := full*prec+partial*(prec-e)+a.cost*prec <= L*prec
			if allow != dec[i] {
				t.Fatalf("sliding_window_counter P=%d request %d: got %v, reference %v", prec, i, dec[i], allow)
			}
			if allow {
				log = append(log, admitted{at: a.at, cost: a.cost})
			}
		}
	}

	// token_bucket and gcra (burst 3, T = 200 ticks): identical decisions,
	// equal to an integer reference, and never more than B + t/T over any
	// span in which the clock moved forward by t ticks.
	const B, T = 3, W / L
	tb := mkLimit(t, ratelimit.TokenBucket, L, win, B, 0)
	admTB, decTB := simulate[TokenBucketState](t, tb, seq, same)
	gc := mkLimit(t, ratelimit.GCRA, L, win, B, 0)
	admGC, decGC := simulate[GCRAState](t, gc, seq, same)
	// Credit in ticks of refill; like the stores, only a counted request
	// writes state back.
	credit, ts := int64(B*T), seq[0].at
	for i, a := range seq {
		now := min(B*T, credit+max(a.at-ts, 0))
		allow := now >= a.cost*T
		if allow {
			credit, ts = now-a.cost*T, max(ts, a.at)
		}
		// With a clock stepping back gcra is stricter than the bucket (its
		// tat' − now grows), so only the bound below applies.
		if decTB[i] != allow || (!back && decGC[i] != allow) {
			t.Fatalf("request %d (cost %d): token_bucket %v, gcra %v, integer reference %v", i, a.cost, decTB[i], decGC[i], allow)
		}
	}
	for name, adm := range map[string][]admitted{"token_bucket": admTB, "gcra": admGC} {
		for i, a := range adm {
			var n int64
			for _, b := range adm[i:] {
				n += b.cost
				// The clock's forward movement bounds the refill (it
				// equals b.at − a.at when the clock never steps back).
				if n*T > B*T+(b.up-a.up) {
					t.Fatalf("%s admitted %d units in %d ticks, more than %d + t/%d", name, n, b.up-a.up, B, T)
				}
			}
		}
	}

	// fixed_window_elastic: a penalty box that ends W after the last
	// admitted request. A naive model keeps the admitted requests of the
	// current box: a request at or after the box's end opens a new, empty
	// box. At most L units are admitted per box, and with a monotone clock
	// the decisions are exactly the model's (a denial only inside a full
	// box, never after it ended).
	el := mkLimit(t, ratelimit.FixedWindowElastic, L, win, 0, 0)
	admEl, decEl := simulate[ElasticState](t, el, seq, same)
	var box []admitted
	boxEnd := int64(math.MinInt64)
	for _, a := range admEl {
		if a.at >= boxEnd {
			box = box[:0]
		}
		box = append(box, a)
		boxEnd = max(boxEnd, a.at+W)
		var n int64
		for _, b := range box {
			n += b.cost
		}
		if n > L {
			t.Fatalf("fixed_window_elastic admitted %d > %d in one box (ending %d)", n, L, boxEnd)
		}
	}
	if !back {
		var used int64
		end := int64(math.MinInt64)
		for i, a := range seq {
			if a.at >= end {
				used = 0
			}
			allow := used+a.cost <= L
			if allow != decEl[i] {
				t.Fatalf("fixed_window_elastic request %d (t+%d, cost %d): got %v, model %v (box holds %d, ends t+%d)",
					i, a.at-seq[0].at, a.cost, decEl[i], allow, used, end-seq[0].at)
			}
			if allow {
				used += a.cost
				end = max(end, a.at+W)
			}
		}
	}
}

// FuzzAlgorithms checks the properties of every algorithm on arbitrary
// arrival sequences with a monotone clock.
func FuzzAlgorithms(f *testing.F) {
	f.Add([]byte{})                                      // nothing
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})    // a burst at one tick
	f.Add([]byte{0, 20, 1, 0, 20, 3, 0, 30, 2, 0, 1, 0}) // steady, mixed costs
	f.Add([]byte{0, 142, 0, 0, 1, 3, 0, 0, 3, 0, 28, 1}) // across window edges
	f.Fuzz(func(t *testing.T, data []byte) { checkSequence(t, data, false) })
}

// FuzzClockBack checks the same bounds when the clock also steps back:
// nothing panics, and no backwards step admits more than a clock that
// never went back would have allowed.
func FuzzClockBack(f *testing.F) {
	f.Add([]byte{0, 200, 0, 0x80, 150, 1, 0x80, 10, 3, 0, 1, 0})
	f.Add([]byte{0x0f, 255, 3, 0x8f, 255, 3, 0x8f, 255, 3, 0, 0, 3})
	f.Add([]byte{0, 0, 0, 0x80, 1, 0, 0x80, 1, 0, 0x80, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) { checkSequence(t, data, true) })
}

// TestPropertiesPseudoRandom runs the properties over a fixed set of
// pseudo-random sequences, bounded in count, as part of the normal tests.
// Uniform bytes make steps of 14,000 ticks on average, 14 windows: every
// request would meet a fresh window and no property would be exercised.
// So every other sequence keeps its steps below 256·7 ticks (mean 0.9 W),
// where requests share windows, boxes and buckets.
func TestPropertiesPseudoRandom(t *testing.T) {
	x := uint64(0x9e3779b97f4a7c15)
	for n := range 400 {
		data := make([]byte, 150)
		for i := range data {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			data[i] = byte(x)
			if n%2 == 1 && i%3 == 0 {
				data[i] &= 0x80 // keep the backwards flag, drop the high step bits
			}
		}
		checkSequence(t, data, false)
		checkSequence(t, data, true)
	}
}

// TestLogStateLargeCosts checks the log with costs up to 2^53 against a
// naive model (the admitted requests as a plain list, RetryAfter found by
// trying every instant at which an admitted request stops counting), and
// that a request adds at most one entry whatever its cost: before a log
// entry held up to 2^18 units, a cost of 2^40 made 4 million entries
// (32 MB) and 2^52 exhausted memory.
func TestLogStateLargeCosts(t *testing.T) {
	const W = 1_000_000
	for _, L := range []int64{3, 1 << 40, ratelimit.MaxLimit} {
		// Params by hand: Limit.Validate bounds a configured log's limit by
		// its memory, but the state itself must hold any cost up to 2^53.
		p := ratelimit.Params{Algorithm: ratelimit.SlidingWindowLog, Window: W, Limit: L, Capacity: L}
		var s LogState
		now := int64(1_702_080_000_000_000)
		s.Init(&p, now)
		var log []arrival // the naive model: counted requests
		counting := func(at int64) (n int64) {
			for _, a := range log {
				if a.at > at-W {
					n += a.cost
				}
			}
			return n
		}
		x := uint64(L)*0x9e3779b97f4a7c15 | 1
		requests, peak := 0, 0
		for range 3000 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			now += int64(x % (W / 7))
			var cost int64
			switch x >> 62 {
			case 0:
				cost = 1
			case 1:
				cost = max(1, L/int64(2+x>>40%5))
			default:
				cost = 1 + int64(x>>8)%L
			}
			ok, ra := s.allow(&p, now, cost)
			want := counting(now)+cost <= L
			if ok != want {
				t.Fatalf("L=%d t=%d cost %d: Allow %v, model %v", L, now, cost, ok, want)
			}
			if !ok {
				// Model: the smallest d among the instants where an
				// admitted request stops counting that admits cost.
				wantRA := int64(-1)
				for _, a := range log {
					d := a.at + W - now
					if d > 0 && counting(now+d)+cost <= L && (wantRA < 0 || d < wantRA) {
						wantRA = d
					}
				}
				if ra != wantRA {
					t.Fatalf("L=%d t=%d cost %d: RetryAfter %d, model %d", L, now, cost, ra, wantRA)
				}
				continue
			}
			s.take(&p, now, cost)
			log = append(log, arrival{at: now, cost: cost})
			requests++
			if got, want := s.remaining(&p, now), L-counting(now); got != want {
				t.Fatalf("L=%d t=%d: Remaining %d, model %d", L, now, got, want)
			}
			peak = max(peak, s.n)
			if s.n > requests || s.Bytes() > logEntryBytes*max(4, 2*peak) {
				t.Fatalf("L=%d: %d entries (peak %d), %d bytes after %d counted requests", L, s.n, peak, s.Bytes(), requests)
			}
		}
		if requests < 50 {
			t.Fatalf("L=%d: only %d requests counted; the test exercises little", L, requests)
		}
	}
	// One request of cost 2^53 − 1 on a limit of 2^53: one entry, 4 at most
	// in the ring.
	p := ratelimit.Params{Algorithm: ratelimit.SlidingWindowLog, Window: W, Limit: ratelimit.MaxLimit, Capacity: ratelimit.MaxLimit}
	var s LogState
	s.take(&p, 1, ratelimit.MaxLimit-1)
	if s.n != 1 || s.Units() != ratelimit.MaxLimit-1 || s.Bytes() > 4*logEntryBytes {
		t.Fatalf("cost 2^53−1: %d entries, %d units, %d bytes", s.n, s.Units(), s.Bytes())
	}
	if ok, ra := s.allow(&p, 2, 2); ok || ra != W-1 {
		t.Fatalf("cost 2 on a full log: %v, RetryAfter %d; want denied, %d", ok, ra, W-1)
	}
}
