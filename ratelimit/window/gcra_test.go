package window

import (
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// TestGCRAFullBurstAtRealInstants is a regression test: at real Unix
// instants (~1.7e15 ticks) the old form max(tat, now) + c·T − now rounded
// c·T up, so a cost equal to the burst was never admitted and the
// RetryAfter search looped forever.
func TestGCRAFullBurstAtRealInstants(t *testing.T) {
	now := time.Date(2026, 11, 22, 1, 2, 3, 456789000, time.UTC).UnixMicro()
	for _, tc := range []struct {
		limit, burst int64
		window       time.Duration
	}{
		{3, 3, time.Second},
		{7, 7, 10 * time.Second},
		{1000, 1000, time.Hour},
		{3, 5, time.Second},
		{100, 100, time.Minute},
	} {
		p := ratelimit.Params{Limit: tc.limit, Window: int64(tc.window / ratelimit.Tick), Capacity: tc.burst}
		var s GCRAState
		s.Init(&p, now)
		if ok, _ := s.allow(&p, now, tc.burst); !ok {
			t.Fatalf("%+v: a fresh key denies a cost equal to the burst", tc)
		}
		s.take(&p, now, tc.burst)
		ok, ra := s.allow(&p, now, tc.burst)
		if ok || ra <= 0 || ra > int64(tc.window/ratelimit.Tick)*tc.burst/tc.limit+1 {
			t.Fatalf("%+v: after draining: allowed=%v retryAfter=%d", tc, ok, ra)
		}
		if ok, _ := s.allow(&p, now+ra, tc.burst); !ok {
			t.Errorf("%+v: denied at now+RetryAfter", tc)
		}
		if ok, _ := s.allow(&p, now+ra-1, tc.burst); ok {
			t.Errorf("%+v: allowed one tick before now+RetryAfter", tc)
		}
	}
}
