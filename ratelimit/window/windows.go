package window

import (
	"math"

	"github.com/tollgate/gateway/ratelimit"
)

// The state types below implement the formulas of ARCHITECTURE.md
// "Algorithm math" literally and in the order written there, so that the
// Redis scripts can mirror them bit for bit. All instants are ticks.

// FixedWindowState is the state of a fixed_window window: the start of the
// aligned window counted in and the units counted there.
type FixedWindowState struct {
	Start, Count int64
}

var _ State = (*FixedWindowState)(nil)

// Init implements State.
func (s *FixedWindowState) Init(p *ratelimit.Params, now int64) {
	*s = FixedWindowState{Start: floorDiv(now, p.Window) * p.Window}
}

// at returns the state as seen at now: a later aligned window starts at 0;
// an earlier one (the clock stepped back) keeps the state.
func (s *FixedWindowState) at(p *ratelimit.Params, now int64) FixedWindowState {
	start := floorDiv(now, p.Window) * p.Window
	if start > s.Start {
		return FixedWindowState{Start: start}
	}
	return *s
}

// allow implements State.
func (s *FixedWindowState) allow(p *ratelimit.Params, now, cost int64) (bool, int64) {
	st := s.at(p, now)
	if st.Count+cost <= p.Limit {
		return true, 0
	}
	return false, st.Start + p.Window - now
}

// take implements State.
func (s *FixedWindowState) take(p *ratelimit.Params, now, cost int64) {
	*s = s.at(p, now)
	s.Count += cost
}

// remaining implements State.
func (s *FixedWindowState) remaining(p *ratelimit.Params, now int64) int64 {
	return clamp(p.Limit-s.at(p, now).Count, 0, p.Capacity)
}

// Expiry implements State.
func (s *FixedWindowState) Expiry(p *ratelimit.Params) int64 { return s.Start + p.Window }

// ElasticState is the state of a fixed_window_elastic window: the instant
// the penalty box ends and the units counted in it.
type ElasticState struct {
	End, Count int64
}

var _ State = (*ElasticState)(nil)

// Init implements State.
func (s *ElasticState) Init(_ *ratelimit.Params, now int64) { *s = ElasticState{End: now} }

func (s *ElasticState) count(now int64) int64 {
	if now >= s.End {
		return 0
	}
	return s.Count
}

// allow implements State.
func (s *ElasticState) allow(p *ratelimit.Params, now, cost int64) (bool, int64) {
	if s.count(now)+cost <= p.Limit {
		return true, 0
	}
	return false, s.End - now
}

// take implements State. The end moves to max(End, now + W): a clock
// stepped back never shortens the box.
func (s *ElasticState) take(p *ratelimit.Params, now, cost int64) {
	s.Count = s.count(now) + cost
	s.End = max(s.End, now+p.Window)
}

// remaining implements State.
func (s *ElasticState) remaining(p *ratelimit.Params, now int64) int64 {
	return clamp(p.Limit-s.count(now), 0, p.Capacity)
}

// Expiry implements State.
func (s *ElasticState) Expiry(*ratelimit.Params) int64 { return s.End }

// TokenBucketState is the state of a token_bucket window: the tokens held at
// instant TS.
type TokenBucketState struct {
	Tokens float64
	TS     int64
}

var _ State = (*TokenBucketState)(nil)

// Init implements State: a new key starts full.
func (s *TokenBucketState) Init(p *ratelimit.Params, now int64) {
	*s = TokenBucketState{Tokens: float64(p.Capacity), TS: now}
}

// level returns the tokens at now: min(B, tokens + (now − ts) * L / W),
// elapsed clamped ≥ 0.
func (s *TokenBucketState) level(p *ratelimit.Params, now int64) float64 {
	elapsed := max(now-s.TS, 0)
	return math.Min(float64(p.Capacity), s.Tokens+float64(elapsed)*float64(p.Limit)/float64(p.Window))
}

// allow implements State. RetryAfter is the smallest d in 1..MaxWait with
// level(now+d) ≥ c, searched from (max(ts, now) − now) +
// ceil((c − tokens) * W / L), or MaxWait when there is none (a refill
// longer than MaxWait, or a corrupted bucket that never refills).
func (s *TokenBucketState) allow(p *ratelimit.Params, now, cost int64) (bool, int64) {
	t := s.level(p, now)
	c := float64(cost)
	if t >= c {
		return true, 0
	}
	if cost > p.Capacity {
		return false, 0 // never: no wait helps
	}
	guess := max(s.TS-now, 0) + ceilTicks((c-t)*float64(p.Window)/float64(p.Limit))
	ok := func(d int64) bool { return s.level(p, now+d) >= c }
	d, _ := smallestFrom(1, maxWait, guess, ok)
	return false, d
}

// take implements State.
func (s *TokenBucketState) take(p *ratelimit.Params, now, cost int64) {
	s.Tokens = s.level(p, now) - float64(cost)
	s.TS = max(s.TS, now)
}

// remaining implements State: floor(tokens).
func (s *TokenBucketState) remaining(p *ratelimit.Params, now int64) int64 {
	return clamp(int64(math.Floor(s.level(p, now))), 0, p.Capacity)
}

// Expiry implements State: ts + ceil((B − tokens) * W / L) + 1, when the
// bucket is full again.
func (s *TokenBucketState) Expiry(p *ratelimit.Params) int64 {
	return s.TS + ceilTicks((float64(p.Capacity)-s.Tokens)*float64(p.Window)/float64(p.Limit)) + 1
}

// GCRAState is the state of a gcra window: the theoretical arrival time in
// (fractional) ticks.
type GCRAState struct {
	TAT float64
}

var _ State = (*GCRAState)(nil)

// Init implements State.
func (s *GCRAState) Init(_ *ratelimit.Params, now int64) { s.TAT = float64(now) }

// gcraParams returns the emission interval T = W / L and tolerance τ = B·T.
func gcraParams(p *ratelimit.Params) (t, tau float64) {
	t = float64(p.Window) / float64(p.Limit)
	return t, float64(p.Capacity) * t
}

// allowedAt reports whether cost units are admitted at now:
// max(tat − now, 0) + c·T ≤ τ. (Written this way, not as
// max(tat, now) + c·T − now, because adding and then subtracting an
// instant of ~1.7e15 ticks rounds c·T up, so that a cost equal to the burst
// could never be admitted and the RetryAfter search would not end.)
func (s *GCRAState) allowedAt(now int64, c, t, tau float64) bool {
	return math.Max(s.TAT-float64(now), 0)+c*t <= tau
}

// allow implements State. RetryAfter is the smallest d in 1..MaxWait
// admitting cost at now+d, searched from ceil(tat' − τ − now), or MaxWait
// when there is none (a TAT more than MaxWait ahead, or not a number).
func (s *GCRAState) allow(p *ratelimit.Params, now, cost int64) (bool, int64) {
	t, tau := gcraParams(p)
	c := float64(cost)
	if s.allowedAt(now, c, t, tau) {
		return true, 0
	}
	if cost > p.Capacity {
		return false, 0 // never: no wait helps
	}
	n := float64(now)
	tat := math.Max(s.TAT, n) + c*t
	guess := max(ceilTicks(tat-tau-n), 1)
	ok := func(d int64) bool { return s.allowedAt(now+d, c, t, tau) }
	d, _ := smallestFrom(1, maxWait, guess, ok)
	return false, d
}

// take implements State: tat = max(tat, now) + c·T.
func (s *GCRAState) take(p *ratelimit.Params, now, cost int64) {
	t, _ := gcraParams(p)
	s.TAT = math.Max(s.TAT, float64(now)) + float64(cost)*t
}

// remaining implements State: floor((τ − (max(tat, now) − now)) / T).
func (s *GCRAState) remaining(p *ratelimit.Params, now int64) int64 {
	t, tau := gcraParams(p)
	n := float64(now)
	return clamp(int64(math.Floor((tau-(math.Max(s.TAT, n)-n))/t)), 0, p.Capacity)
}

// Expiry implements State: ceil(tat).
func (s *GCRAState) Expiry(*ratelimit.Params) int64 { return int64(math.Ceil(s.TAT)) }

// ConcurrencyState is the state of a concurrency limit: the units in
// flight.
type ConcurrencyState struct {
	InFlight int64
}

var _ State = (*ConcurrencyState)(nil)

// Init implements State.
func (s *ConcurrencyState) Init(*ratelimit.Params, int64) { s.InFlight = 0 }

// allow implements State; RetryAfter is unknown (0).
func (s *ConcurrencyState) allow(p *ratelimit.Params, _, cost int64) (bool, int64) {
	return s.InFlight+cost <= p.Capacity, 0
}

// take implements State.
func (s *ConcurrencyState) take(_ *ratelimit.Params, _, cost int64) { s.InFlight += cost }

// Release gives back cost units, never going below zero.
func (s *ConcurrencyState) Release(cost int64) { s.InFlight = max(s.InFlight-cost, 0) }

// remaining implements State.
func (s *ConcurrencyState) remaining(p *ratelimit.Params, _ int64) int64 {
	return clamp(p.Capacity-s.InFlight, 0, p.Capacity)
}

// Expiry implements State: never while units are in flight.
func (s *ConcurrencyState) Expiry(*ratelimit.Params) int64 {
	if s.InFlight > 0 {
		return math.MaxInt64
	}
	return math.MinInt64
}

func clamp(v, lo, hi int64) int64 {
	return min(max(v, lo), hi)
}
