package redisstore

import (
	_ "embed"
	"encoding/binary"
	"hash/maphash"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// denied is a cached denial: the decisions Redis returned at instant at,
// valid until until: the earliest RetryAfter among the denying enforced
// hits, so every one of them still denies until then, and at most
// Options.DenyCacheTTL, so a reset made by another gateway is seen soon.
type denied struct {
	at, until time.Time
	out       []ratelimit.Decision
}

// denyKey identifies a hit set (limits, keys and costs) in the deny
// cache: two 64-bit hashes under independent random seeds, so building it
// allocates nothing and two different hit sets collide with probability
// about 2^-128 (the seeds are per process, so no client can aim at one).
// A limit enters by its ID and its packed parameters: a reload that changes
// a limit's numbers keeps its ID (and its counters), and a denial cached
// under the old numbers must not answer for the new ones.
type denyKey [2]uint64

// cacheKey returns the deny-cache key of hits.
func (s *Store) cacheKey(hits []ratelimit.Hit) denyKey {
	var hs [2]maphash.Hash
	for j := range hs {
		hs[j].SetSeed(s.seeds[j])
	}
	for _, hit := range hits {
		params := *s.limitArg(hit.Limit)
		var c [8]byte
		binary.LittleEndian.PutUint64(c[:], uint64(hit.Cost))
		for j := range hs {
			h := &hs[j]
			h.WriteString(hit.Limit.ID)
			h.WriteByte(0)
			h.WriteString(params)
			h.WriteByte(0)
			h.WriteString(hit.Key)
			h.WriteByte(0)
			h.Write(c[:])
		}
	}
	return denyKey{hs[0].Sum64(), hs[1].Sum64()}
}

// denyStore caches a denial when every denying enforced hit promises a
// RetryAfter (not Never, not Concurrency's unknown 0).
func (s *Store) denyStore(ck denyKey, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) {
	var wait time.Duration = -1
	for i, h := range hits {
		d := out[i]
		if h.Limit.Shadow || d.Allowed {
			continue
		}
		if d.Never || d.RetryAfter <= 0 {
			return
		}
		if wait < 0 || d.RetryAfter < wait {
			wait = d.RetryAfter
		}
	}
	if wait <= 0 {
		return
	}
	wait = min(wait, s.opts.DenyCacheTTL)
	until := now.Add(wait)
	for u := until.UnixNano(); ; {
		cur := s.denyUntil.Load()
		if cur >= u || s.denyUntil.CompareAndSwap(cur, u) {
			break
		}
	}
	s.deny.Add(ck, &denied{at: now, until: until, out: append([]ratelimit.Decision(nil), out...)})
}

// denyMayHold reports whether a cached denial may still answer at now:
// false once now has reached the end of every denial cached (denyStore
// raises denyUntil before it adds an entry). The first decision past that
// end empties the cache, as lookups would remove each expired entry: a
// clock stepping back later must not find them valid again.
func (s *Store) denyMayHold(now time.Time) bool {
	u := s.denyUntil.Load()
	if now.UnixNano() < u {
		return true
	}
	if u != 0 && s.denyUntil.CompareAndSwap(u, 0) {
		// A denial stored meanwhile may be purged too: it is only lost.
		s.deny.Purge()
	}
	return false
}

// heldDenial reports whether an enforced hit that denied has a key that a
// cluster decision of this Store holds or held moments ago (holdSet): the
// denial may be due to units given back since, so it must not be cached
// until its RetryAfter.
func (s *Store) heldDenial(hits []ratelimit.Hit, out []ratelimit.Decision) bool {
	if !s.cluster {
		return false
	}
	return s.holds.held(func(yield func(string) bool) {
		for i, h := range hits {
			if !h.Limit.Shadow && !out[i].Allowed && !yield(s.Key(h.Limit, h.Key)) {
				return
			}
		}
	}, s.now())
}

// denyLookup answers from the cache if a denial for ck is still valid at
// now, with RetryAfter and Reset shortened by the time elapsed. A hit is
// reported denied only while its own denial is known to hold: a shadow
// hit whose RetryAfter has passed since is reported allowed (not counted),
// so metrics and logs never name a limit that is no longer exceeded.
func (s *Store) denyLookup(ck denyKey, now time.Time, out []ratelimit.Decision) bool {
	e, ok := s.deny.Get(ck)
	if !ok {
		return false
	}
	if !now.Before(e.until) || now.Before(e.at) {
		s.deny.Remove(ck)
		return false
	}
	el := now.Sub(e.at)
	for i, d := range e.out {
		d.Counted, d.Lease = false, 0
		switch {
		case d.Allowed || d.Never:
		case d.RetryAfter > el:
			d.RetryAfter -= el
		default:
			d.Allowed, d.RetryAfter = true, 0
		}
		d.Reset = max(d.Reset-el, 0)
		out[i] = d
	}
	return true
}
