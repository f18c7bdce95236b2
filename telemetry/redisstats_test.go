package telemetry

import (
	"context"
	"maps"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// TestRegisterRedisStats: each figure reaches the instrument of its
// documented name at a collection; the clock skew only once measured;
// nothing after the registration is unregistered.
func TestRegisterRedisStats(t *testing.T) {
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	st := RedisStats{Breaker: 1, Calls: 7, Canceled: 2, DenyCacheHits: 3, Refunds: 4, PendingReleases: 5,
		ReleasesDropped: 6, HeldSlots: 8, Coalesced: 9, Leases: 10, LocalDecisions: 11,
		LeaseReturned: 12, LeaseDropped: 13}
	reg, err := RegisterRedisStats(mp.Meter("test"), func() RedisStats { return st })
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"tollgate.store.breaker.state{}":        1,
		"tollgate.store.calls{}":                7,
		"tollgate.store.canceled{}":             2,
		"tollgate.store.deny_cache.hits{}":      3,
		"tollgate.store.refunds{}":              4,
		"tollgate.store.releases.pending{}":     5,
		"tollgate.store.releases.dropped{}":     6,
		"tollgate.store.slots.held{}":           8,
		"tollgate.store.coalesced{}":            9,
		"tollgate.store.leases{}":               10,
		"tollgate.store.local_decisions{}":      11,
		"tollgate.store.lease_units.returned{}": 12,
		"tollgate.store.lease_units.dropped{}":  13,
	}
	if got, _ := collect(t, &testReader{rd: rd}); !maps.Equal(got, want) {
		t.Errorf("before a skew measurement:\n got %v\nwant %v", got, want)
	}
	st.ClockSkew, st.SkewKnown = -1500*time.Millisecond, true
	want["tollgate.store.clock.skew{}"] = -1.5
	if got, _ := collect(t, &testReader{rd: rd}); !maps.Equal(got, want) {
		t.Errorf("with a skew of -1.5s:\n got %v\nwant %v", got, want)
	}
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	if got, _ := collect(t, &testReader{rd: rd}); len(got) != 0 {
		t.Errorf("after Unregister: %v, want nothing", got)
	}
}
