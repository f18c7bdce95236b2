package redisstore

import "github.com/tollgate/gateway/ratelimit"

// Penalty boxes (ratelimit.Limit.PenaltyBox) on Redis: the box of a hit's
// key is the key a fixed_window_elastic limit of one unit per penalty
// would use (so /admin/limits reads and deletes it like any counter), in
// the hit key's hash slot. The decide script reads it for every hit whose
// limit has a penalty (the limit's packed parameters end with the penalty
// in ticks): a full box denies the hit, counting nothing; a hit its limit
// denies fills the box. Its KEYS follow the hits' keys, in hit order.

// appendPenaltyKeys appends the penalty box key of every hit whose limit
// has one.
func (s *Store) appendPenaltyKeys(keys []string, hits []ratelimit.Hit) []string {
	for _, h := range hits {
		if box := h.Limit.PenaltyBox(); box != nil {
			keys = append(keys, s.Key(box, h.Key))
		}
	}
	return keys
}

// resetKeys are the keys Reset deletes: the counters of limit for key and
// its penalty box, if it has one.
func (s *Store) resetKeys(limit *ratelimit.Limit, key string) []string {
	if box := limit.PenaltyBox(); box != nil {
		return []string{s.Key(limit, key), s.Key(box, key)}
	}
	return []string{s.Key(limit, key)}
}

// Markers in the never field of a hit's reply (lua/driver.lua): −1 when
// the box was full (the hit denied by it, its first window's retry the
// time left), −2 when the hit's own limit denied it and filled the box
// (never a cost above a capacity, which fills no box).
const (
	replyPenalized = -1
	replyBoxFilled = -2
)

// penaltyMarker splits a reply's never field into the usual value and a
// penalty marker (0 when none).
func penaltyMarker(v int) (never, marker int) {
	if v == replyPenalized || v == replyBoxFilled {
		return 0, v
	}
	return v, 0
}

// applyPenalty completes the decision d of hit h from the reply's marker:
// a penalized hit reads like the memory store's (ratelimit.Decision.Penalty,
// Remaining 0, Reset the time left), and a denial that filled the box
// waits at least the penalty.
func applyPenalty(h ratelimit.Hit, marker int, d *ratelimit.Decision) {
	switch marker {
	case replyPenalized:
		*d = ratelimit.Decision{Penalty: true, Limit: h.Limit.Capacity(0), RetryAfter: d.RetryAfter, Reset: d.RetryAfter}
	case replyBoxFilled:
		d.Penalty = true
		d.RetryAfter = max(d.RetryAfter, h.Limit.Penalty)
		d.Reset = max(d.Reset, d.RetryAfter)
	}
}
