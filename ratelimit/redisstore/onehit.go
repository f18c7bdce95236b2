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
