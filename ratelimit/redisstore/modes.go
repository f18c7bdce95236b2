package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// modeCancel is the script mode that gives back reservations
// (lua/modes.lua).
const modeCancel = 3

var _ ratelimit.Canceler = (*Store)(nil)

// appendModes appends the hits' modes to the header (lua/common.lua) when
// any hit is not an ordinary count; the script reads them only then.
func appendModes(b []byte, hits []ratelimit.Hit) []byte {
	plain := true
	for i := range hits {
		plain = plain && hits[i].Mode == ratelimit.HitCount
	}
	if plain {
		return b
	}
	for i := range hits {
		b = appendF64(b, float64(hits[i].Mode))
	}
	return b
}

// appendMaxDelay appends a delaying limit's max delay in ticks to its
// packed parameters.
func appendMaxDelay(b []byte, l *ratelimit.Limit) []byte {
	if l.MaxDelay <= 0 {
		return b
	}
	return appendF64(b, float64(l.MaxDelay/ratelimit.Tick))
}

// bypassDenyCache reports whether a call must reach Redis whatever the
// deny cache holds: a take is never denied, a delaying limit's denial
// turns into a reservation before its RetryAfter has passed, and a
// distinct limit's denial of one value says nothing of another.
func bypassDenyCache(hits []ratelimit.Hit) bool {
	for i := range hits {
		if hits[i].Mode == ratelimit.HitTake || hits[i].Limit.MaxDelay > 0 || hits[i].Limit.Algorithm == ratelimit.Distinct {
			return true
		}
	}
	return false
}

// readDelays reads the reply's trailer of reserved slots (hit index,
// delay, mark) into out.
func (r *replyReader) readDelays(out []ratelimit.Decision, n int) {
	for !r.bad && r.pos < len(r.b) {
		h := int(r.next()) - 1
		d := r.next()
		mk := r.nextFloat()
		if h < 0 || h >= n {
			r.bad = true
			return
		}
		out[h].Delay, out[h].Mark = time.Duration(d)*ratelimit.Tick, mk
	}
}

// Cancel implements ratelimit.Canceler: one script call per hit that
// reserved a slot (counted, Delay > 0), giving it back as far as it is
// still ahead (lua/modes.lua, on Redis's clock with ratelimit.ClockStore). A call
// whose reply is lost is not retried: it may have given the slot back.
func (s *Store) Cancel(ctx context.Context, now time.Time, hits []ratelimit.Hit, ds []ratelimit.Decision) error {
	if len(ds) < len(hits) {
		return fmt.Errorf("redisstore: %d decisions for %d hits", len(ds), len(hits))
	}
	for i, h := range hits {
		if err := h.Check(); err != nil {
			return fmt.Errorf("redisstore: hit %d: %w", i, err)
		}
		if !ds[i].Counted || ds[i].Delay <= 0 {
			continue
		}
		hdr := s.header(nil, modeCancel, now, false, hits[i:i+1])
		keys := []string{s.Key(h.Limit, h.Key)}
		args := []any{hdr, s.limitArg(h.Limit), string(appendF64(nil, ds[i].Mark))}
		if err := s.call(ctx, func(ctx context.Context) error {
			_, err := s.run(ctx, s.client, keys, args, nil)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}
