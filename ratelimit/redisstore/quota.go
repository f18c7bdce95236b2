package redisstore

import (
	"encoding/binary"
	"math"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// periodArgs are a quota limit's packed parameters for the calendar
// periods around one instant, valid for the caller's instants in
// [from, until).
type periodArgs struct {
	from, until int64
	args        string
}

// hitArg returns the packed parameters of l for a call at now (the
// caller's clock): limitArg, and for a quota the boundaries of its periods
// in each window's W, P and N (lua/quota.lua): the current period's start
// and end and the next one's end, computed here because Lua has no zone
// data. They change once a period, so they are cached until the earliest
// current period ends. The result is a *string or a string, both
// arguments go-redis writes as the text.
func (s *Store) hitArg(l *ratelimit.Limit, now time.Time) any {
	base := s.limitArg(l)
	if l.Algorithm != ratelimit.Quota {
		return base
	}
	t := now.UnixMicro()
	var cache *atomic.Pointer[periodArgs]
	if v, ok := s.params.Load(l.ID); ok {
		for _, pl := range *v.(*[]packedLimit) {
			if pl.lim == l {
				cache = pl.periods
			}
		}
	}
	if cache != nil {
		if pa := cache.Load(); pa != nil && pa.from <= t && t < pa.until {
			return pa.args
		}
	}
	b := []byte(*base)
	from, until := int64(math.MinInt64), int64(math.MaxInt64)
	for w := range l.Windows() {
		c := l.ParamsOf(w).Calendar
		start, end := c.Bounds(t)
		_, next := c.Bounds(end)
		off := 8 * (3 + 5*w) // the window's L, W, capacity, P, N
		for i, v := range [...]int64{start, end, next} {
			binary.LittleEndian.PutUint64(b[off+8*[...]int{1, 3, 4}[i]:], math.Float64bits(float64(v)))
		}
		from, until = max(from, start), min(until, end)
	}
	pa := &periodArgs{from: from, until: until, args: string(b)}
	if cache != nil {
		cache.Store(pa)
	}
	return pa.args
}
