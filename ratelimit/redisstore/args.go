package redisstore

import (
	_ "embed"
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// callArgs is the reusable argument set of one decide call. Its
// arguments are boxed as pointers (*string, *bytesArg), which go-redis
// writes like the values and which cost no allocation.
type callArgs struct {
	keys []string
	args []any
	hdr  bytesArg
	cmd  []any // the FCALL command sent at once (fcall)
}

// bytesArg is a []byte argument passed by pointer: boxing a slice
// header in an interface allocates, boxing a pointer does not.
type bytesArg struct{ b []byte }

// MarshalBinary implements encoding.BinaryMarshaler, which go-redis
// writes as a bulk string.
func (a *bytesArg) MarshalBinary() ([]byte, error) { return a.b, nil }

var argPool = sync.Pool{New: func() any { return new(callArgs) }}

// appendF64 appends v as a little-endian double (the decide script reads '<d').
func appendF64(b []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

// packedLimit is a limit's packed parameters, cached under its ID.
type packedLimit struct {
	lim  *ratelimit.Limit // the limit they were packed from
	args string
	// periods caches a quota's arguments for its current periods
	// (hitArg); nil for other algorithms. A pointer, so that the copies
	// of the cache's slice share it.
	periods *atomic.Pointer[periodArgs]
}

// maxVariants bounds the definitions cached under one ID: a limit and its
// variants (plans, consumers' own rates, overrides) that keep its windows
// share its ID.
const maxVariants = 16

// limitArg returns the packed parameters of l (the decide script's
// ARGV[1+h], lua/common.lua): algorithm, shadow, windows, then L, W, capacity, P, N per window. They
// are built once per limit and cached under its ID; a cached value is
// used only for the very limit it was built from, because a reload that
// changes a limit's counts keeps its ID (the counters carry over) but not
// its parameters, and so does a variant of a limit with other counts (a
// plan, an override). The cache holds the last maxVariants definitions
// per ID, so requests alternating between a limit and its variants do not
// repack on every call, and reloads do not grow it.
func (s *Store) limitArg(l *ratelimit.Limit) *string {
	var old []packedLimit
	if v, ok := s.params.Load(l.ID); ok {
		old = *v.(*[]packedLimit)
		for i := range old {
			if old[i].lim == l {
				return &old[i].args
			}
		}
	}
	n := l.Windows()
	b := make([]byte, 0, 8*(3+5*n))
	b = appendF64(b, float64(l.Algorithm))
	b = appendF64(b, float64(b2i(l.Shadow)))
	b = appendF64(b, float64(n))
	for w := range n {
		p := l.Params(w)
		for _, v := range [...]int64{p.Limit, p.Window, p.Capacity, p.Precision, p.Buckets} {
			b = appendF64(b, float64(v))
		}
	}
	b = appendMaxDelay(b, l)
	if l.Penalty > 0 {
		if l.MaxDelay <= 0 {
			b = appendF64(b, 0) // no max delay: the penalty comes second
		}
		b = appendF64(b, float64(l.Penalty/ratelimit.Tick))
	}
	v := string(b)
	// Copy on write: readers hold the old slice. A racing writer may
	// drop this entry; it is packed again on its next use.
	keep := old[max(0, len(old)-maxVariants+1):]
	pl := packedLimit{lim: l, args: v}
	if l.Algorithm == ratelimit.Quota {
		pl.periods = new(atomic.Pointer[periodArgs])
	}
	next := append(append(make([]packedLimit, 0, len(keep)+1), keep...), pl)
	s.params.Store(l.ID, &next)
	return &next[len(next)-1].args
}

// header packs the decide script's ARGV[1] (lua/common.lua).
func (s *Store) header(b []byte, mode int, now time.Time, wantOld bool, hits []ratelimit.Hit) []byte {
	useTime, t := 1.0, 0.0
	if s.opts.Clock == ratelimit.ClockLocal {
		useTime, t = 0, float64(now.UnixMicro())
	}
	b = appendF64(b, t)
	b = appendF64(b, useTime)
	b = appendF64(b, float64(mode))
	b = appendF64(b, float64(b2i(wantOld)))
	b = appendF64(b, float64(s.opts.LeaseTTL.Milliseconds()))
	b = appendF64(b, float64(s.opts.TTLMargin.Milliseconds()))
	b = appendF64(b, float64(len(hits)))
	for _, h := range hits {
		b = appendF64(b, float64(h.Cost))
	}
	return b
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
