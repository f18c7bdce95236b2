package redisstore

import (
	"encoding/binary"
	"math"

	"github.com/tollgate/gateway/ratelimit"
)

// distinctFormat names the layout of a distinct key (lua/distinct.lua: an
// exact set or HyperLogLog registers, not doubles per window), so that no
// other layout is ever read as one.
const distinctFormat = "d1"

// appendDistinctValues appends the decide call's value arguments
// (lua/common.lua): when any hit is a distinct hit, one string per hit,
// its value's hash (8 bytes, little-endian) and '<d' bit × 2^20 +
// register × 64 + rank (ratelimit.DistinctBit and DistinctRegister,
// which Lua cannot compute without 64-bit integers), ” for the other hits. The deny cache is bypassed
// for them (bypassDenyCache): a denial of one value says nothing of a
// value already counted, which passes.
func appendDistinctValues(args []any, hits []ratelimit.Hit) []any {
	has := false
	for i := range hits {
		if hits[i].Limit.Algorithm == ratelimit.Distinct {
			has = true
			break
		}
	}
	if !has {
		return args
	}
	for _, h := range hits {
		if h.Limit.Algorithm != ratelimit.Distinct {
			args = append(args, "")
			continue
		}
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:8], h.Value)
		reg, rank := ratelimit.DistinctRegister(h.Value)
		bit := ratelimit.DistinctBit(h.Value)
		binary.LittleEndian.PutUint64(b[8:], math.Float64bits(float64(bit<<20+reg*64+rank)))
		args = append(args, string(b[:]))
	}
	return args
}
