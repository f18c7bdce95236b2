package redisstore

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of the
// hash tag — the part between the first "{" and the next "}" when that part
// is non-empty — or of the whole key, modulo 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial 0), as Redis Cluster
// uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// groupBySlot returns the indices of keys grouped by slot, the groups in
// ascending slot order and the indices within a group ascending.
func groupBySlot(keys []string) [][]int {
	slots := make([]int, len(keys))
	for i, k := range keys {
		slots[i] = Slot(k)
	}
	order := make([]int, len(keys))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return slots[a] - slots[b] })
	var groups [][]int
	for i, idx := range order {
		if i == 0 || slots[idx] != slots[order[i-1]] {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], idx)
	}
	return groups
}

// decideCluster decides hits whose keys may live in several slots. Keys of
// one client share a hash tag and so one slot; a limit keyed by something
// else (e.g. a shared `by = []` limit) lives elsewhere. Each slot's hits are
// decided by one script, the slots in ascending order. When a later slot
// denies, the earlier slots' counts are refunded and their hits re-checked,
// so a denied request consumes nothing; the remaining slots are only
// checked.
//
// Residual race: between an earlier slot's count and its refund (one round
// trip), other requests see those units as taken and may be denied although
// the request holding them ends up denied too (under-admission, never
// over-admission). A refund restores the key's previous value only if the
// key still holds exactly what this call wrote; if another request changed
// it in between, the refund is skipped and the denied request's units stay
// counted until the window passes (again under-admission). Across slots the
// decision is not atomic: two slots are decided at two slightly different
// instants with ClockStore.
func (s *Store) decideCluster(ctx context.Context, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) (bool, error) {
	keys := make([]string, len(hits))
	for i, h := range hits {
		keys[i] = s.Key(h.Limit, h.Key)
	}
	groups := groupBySlot(keys)
	if len(groups) == 1 {
		allowed, _, err := s.run(ctx, s.client, modeDecide, now, hits, out, nil)
		return allowed, err
	}
	type done struct {
		idx  []int
		hits []ratelimit.Hit
		out  []ratelimit.Decision
		ws   []written
	}
	var counted []done
	allowed := true
	for _, g := range groups {
		gh := make([]ratelimit.Hit, len(g))
		for j, i := range g {
			gh[j] = hits[i]
		}
		gout := make([]ratelimit.Decision, len(g))
		mode := modeDecide
		if !allowed {
			mode = modeCheck
		}
		ok, ws, err := s.run(ctx, s.client, mode, now, gh, gout, nil)
		if err != nil {
			// Give back what earlier slots took, on a fresh budget: the
			// call's own may be spent. Best effort.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Timeout)
			for _, d := range counted {
				if _, _, rerr := s.run(rctx, s.client, modeRefund, now, d.hits, d.out, d.ws); rerr == nil {
					s.stats.refunds.Add(1)
				}
			}
			cancel()
			return false, err
		}
		for j, i := range g {
			out[i] = gout[j]
		}
		if mode == modeDecide && ok {
			counted = append(counted, done{g, gh, gout, ws})
		}
		if !ok {
			allowed = false
		}
	}
	if allowed {
		return true, nil
	}
	// Refund and re-check every slot that counted, with one script each.
	for _, d := range counted {
		if _, _, err := s.run(ctx, s.client, modeRefund, now, d.hits, d.out, d.ws); err != nil {
			return false, err
		}
		s.stats.refunds.Add(1)
		for j, i := range d.idx {
			out[i] = d.out[j]
		}
	}
	return false, nil
}
