package hybrid

import (
	"hash/maphash"
	"math"
	"sync"
)

type shard struct {
	mu sync.Mutex
	m  map[leaseKey]*lease
	// calm is the instant before which a sweep of a full shard finds
	// nothing to drop: at most the earliest end among its entries (set by
	// a sweep, lowered when an entry is added or its end moves earlier).
	// A flood of new keys at a full table is then decided exactly without
	// a walk of the whole shard per request. sweeps counts the walks.
	calm   int64
	sweeps uint64
}

func (s *Store) shard(k leaseKey) *shard {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(k.id)
	h.WriteByte(0)
	h.WriteString(k.key)
	return &s.shards[h.Sum64()%nShards]
}

// sweep drops the entries whose lease and denial have ended at t and
// returns the unused units of their leases, to give back: a lease that
// ended with units left still holds them (they go back when its key is
// next seen, or at Flush), and dropping it without them would strand
// them until their window ends; a flood of made-up keys at a full table
// would then strand the leftovers of every quiet key. An entry whose
// lease call is in flight is kept. sh.mu is held.
func (sh *shard) sweep(t int64) []giveBack {
	sh.sweeps++
	calm := int64(math.MaxInt64)
	var back []giveBack
	for k, l := range sh.m {
		if l.pending != nil {
			// A lease call is in flight for it and settles into it:
			// dropped, the units it counts would be neither admitted nor
			// given back. Its settling lowers calm to its new end.
			continue
		}
		end := max(l.until, l.denyUntil)
		if t >= end {
			back = append(back, l.takeBack(k.key, t)...)
			delete(sh.m, k)
			continue
		}
		calm = min(calm, end)
	}
	sh.calm = calm
	return back
}
