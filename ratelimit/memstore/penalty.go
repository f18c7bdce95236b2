package memstore

import (
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// hasPenalty reports whether a hit's limit has a penalty box.
func hasPenalty(hits []ratelimit.Hit) bool {
	for _, h := range hits {
		if h.Limit.PenaltyBox() != nil {
			return true
		}
	}
	return false
}

// decidePenalties is Decide for a request with a limit that has a penalty
// box (ratelimit.Limit.PenaltyBox), a fixed_window_elastic limit of one
// unit per penalty held beside the limit's own state. First the boxes
// are read: a hit whose key's box is full is denied by it (RetryAfter the
// time left) and so is the request, with nothing counted anywhere.
// Otherwise the hits are decided as usual, and every hit its limit
// denied (other than for a cost above its capacity) fills its key's box. The box is read and filled under separate
// locks from the decision: a request decided at the very instant another
// one is denied may still pass, as it would have a moment earlier.
func (s *Store) decidePenalties(hits []ratelimit.Hit, t int64, out []ratelimit.Decision) bool {
	var boxed [8]ratelimit.Decision
	var pen []ratelimit.Decision
	if len(hits) <= len(boxed) {
		pen = boxed[:len(hits)]
	} else {
		pen = make([]ratelimit.Decision, len(hits))
	}
	penalized := false
	for i, h := range hits {
		// A take (count without checking) counts a request already
		// forwarded: a box filled since does not undo it.
		if box := h.Limit.PenaltyBox(); box != nil && h.Mode != ratelimit.HitTake {
			if ra := s.penaltyLeft(box, h.Key, t); ra > 0 {
				pen[i] = ratelimit.Decision{Penalty: true, Limit: h.Limit.Capacity(0),
					RetryAfter: ra, Reset: ra}
				penalized = true
			}
		}
	}
	allowed := s.decideMany(hits, t, out, penalized)
	for i, h := range hits {
		box := h.Limit.PenaltyBox()
		switch {
		case box == nil || h.Mode == ratelimit.HitTake:
		case pen[i].Penalty:
			out[i] = pen[i]
		case !out[i].Allowed && !out[i].Never:
			// (A cost above the capacity is refused, not a rate
			// exceeded: it starts no penalty, so that random keys with a
			// huge declared cost cannot make a box each.)
			var d ratelimit.Decision
			s.decideOne(ratelimit.Hit{Limit: box, Key: h.Key, Cost: 1}, t, &d)
			out[i].Penalty = true
			out[i].RetryAfter = max(out[i].RetryAfter, h.Limit.Penalty)
			out[i].Reset = max(out[i].Reset, out[i].RetryAfter)
		}
	}
	return allowed
}

// penaltyLeft returns how long key stays in box at t: the wait before the
// box admits a unit, 0 when it admits one now.
func (s *Store) penaltyLeft(box *ratelimit.Limit, key string, t int64) time.Duration {
	var d ratelimit.Decision
	hv := s.hash(box.ID, key)
	sh := &s.shards[s.shardOf(hv)]
	sh.mu.Lock()
	if i := sh.t.find(uint32(hv), box.ID, key); i != none {
		st := sh.t.stateAt(i, kindOf(box))
		if t < sh.t.expiryOf(&st, box) {
			sh.t.apply(&st, opCheck, box, &args{now: t, cost: 1, d: &d})
		} else {
			d.Allowed = true
		}
	} else {
		d.Allowed = true
	}
	sh.mu.Unlock()
	if d.Allowed {
		return 0
	}
	return d.RetryAfter
}
