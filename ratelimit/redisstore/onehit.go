package redisstore

import (
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// oneHit reports whether a call of hits in mode takes the decide code's
// one-hit path with the short header (lua/common.lua): one ordinary hit,
// decided or checked, no old values wanted, on a limit of one window
// without delay or penalty (its packed parameters are 64 bytes) whose
// algorithm has a one-hit decider (every one with a fixed-size state).
func oneHit(mode int, wantOld bool, hits []ratelimit.Hit) bool {
	if len(hits) != 1 || wantOld || (mode != modeDecide && mode != modeCheck) {
		return false
	}
	h := &hits[0]
	l := h.Limit
	if h.Mode != ratelimit.HitCount || l.Windows() != 1 || l.MaxDelay > 0 || l.Penalty > 0 {
		return false
	}
	switch l.Algorithm {
	case ratelimit.FixedWindow, ratelimit.FixedWindowElastic, ratelimit.SlidingWindowCounter,
		ratelimit.TokenBucket, ratelimit.GCRA:
		return true
	}
	return false
}

// oneHitHeader packs the short header of a oneHit call (lua/common.lua):
// now (ticks; 0 with ratelimit.ClockStore), the hit's cost, mode + 2 × use-TIME,
// TTL margin ms. The full header's other values are implied: one hit,
// no old values, and no lease (no one-hit algorithm holds one).
func (s *Store) oneHitHeader(b []byte, mode int, now time.Time, cost int64) []byte {
	useTime, t := 1, 0.0
	if s.opts.Clock == ratelimit.ClockLocal {
		useTime, t = 0, float64(now.UnixMicro())
	}
	b = appendF64(b, t)
	b = appendF64(b, float64(cost))
	b = appendF64(b, float64(mode+2*useTime))
	return appendF64(b, float64(s.opts.TTLMargin.Milliseconds()))
}

// maxFixedHits is the most hits a fixed-window header carries: its
// length (3 + H doubles) must stay between the one-hit header's and the
// shortest full header's (lua/common.lua).
const maxFixedHits = 4

// fixedHits reports whether a call of hits in mode may take the decide
// code's fixed-window path (lua/fixed_window.lua fixedn): two to
// maxFixedHits ordinary hits, decided or checked, no old values wanted,
// each on a one-window fixed_window limit without delay or penalty (its
// packed parameters are 64 bytes) — what an Envoy rate limit service call
// of several descriptors compiles to. The keys must also be distinct
// (fixedKeys), which the general path's shared-state rule handles.
func fixedHits(mode int, wantOld bool, hits []ratelimit.Hit) bool {
	if len(hits) < 2 || len(hits) > maxFixedHits || wantOld || (mode != modeDecide && mode != modeCheck) {
		return false
	}
	for i := range hits {
		h := &hits[i]
		l := h.Limit
		if h.Mode != ratelimit.HitCount || l.Algorithm != ratelimit.FixedWindow || l.Windows() != 1 || l.MaxDelay > 0 || l.Penalty > 0 {
			return false
		}
	}
	return true
}

// distinct reports whether no two of keys are equal: the fixed-window
// path reads and writes each key once per hit, so hits sharing a key (one
// state, each checked with the costs before it) take the general path.
func distinct(keys []string) bool {
	for i := range keys {
		for j := range i {
			if keys[i] == keys[j] {
				return false
			}
		}
	}
	return true
}

// fixedHeader packs the fixed-window header (lua/common.lua): now (ticks;
// 0 with ratelimit.ClockStore), mode + 2 × use-TIME, TTL margin ms, then
// each hit's cost.
func (s *Store) fixedHeader(b []byte, mode int, now time.Time, hits []ratelimit.Hit) []byte {
	useTime, t := 1, 0.0
	if s.opts.Clock == ratelimit.ClockLocal {
		useTime, t = 0, float64(now.UnixMicro())
	}
	b = appendF64(b, t)
	b = appendF64(b, float64(mode+2*useTime))
	b = appendF64(b, float64(s.opts.TTLMargin.Milliseconds()))
	for i := range hits {
		b = appendF64(b, float64(hits[i].Cost))
	}
	return b
}
