package adaptive_test

import (
	"testing"
	"time"

	"github.com/tollgate/gateway/adaptive"
)

// BenchmarkDecision is the request path's cost of an adaptive limit: the
// decision (TryAcquire) and the release that records the sample, on one
// goroutine and on all of them at once.
func BenchmarkDecision(b *testing.B) {
	l := adaptive.New(adaptive.Config{InitialLimit: 1000, MaxLimit: 1000, MinSamples: 1 << 40}, t0)
	now := t0.Add(time.Second)
	b.Run("acquire", func(b *testing.B) {
		// The decision and the slot's return, no sample.
		b.ReportAllocs()
		for b.Loop() {
			if l.TryAcquire(adaptive.Normal) == adaptive.Admit {
				l.Release(now, 0, adaptive.Ignore)
			}
		}
	})
	b.Run("acquire+release", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if l.TryAcquire(adaptive.Normal) == adaptive.Admit {
				l.Release(now, time.Millisecond, adaptive.Success)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if l.TryAcquire(adaptive.Normal) == adaptive.Admit {
					l.Release(now, time.Millisecond, adaptive.Success)
				}
			}
		})
	})
}
