package telemetry

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// Metric names of the Redis store's own figures.
const (
	MetricStoreBreakerState    = "tollgate.store.breaker.state"
	MetricStoreCalls           = "tollgate.store.calls"
	MetricStoreCanceled        = "tollgate.store.canceled"
	MetricStoreDenyCacheHits   = "tollgate.store.deny_cache.hits"
	MetricStoreRefunds         = "tollgate.store.refunds"
	MetricStoreReleasesPending = "tollgate.store.releases.pending"
	MetricStoreReleasesDropped = "tollgate.store.releases.dropped"
	MetricStoreSlotsHeld       = "tollgate.store.slots.held"
	MetricStoreClockSkew       = "tollgate.store.clock.skew"
	MetricStoreCoalesced       = "tollgate.store.coalesced"
	MetricStoreLeases          = "tollgate.store.leases"
	MetricStoreLocalDecisions  = "tollgate.store.local_decisions"
	MetricStoreLeaseReturned   = "tollgate.store.lease_units.returned"
	MetricStoreLeaseDropped    = "tollgate.store.lease_units.dropped"
)

// RedisStats are the Redis store's figures exported by RegisterRedisStats,
// as the store reports them at a collection. Counters are cumulative.
type RedisStats struct {
	// Breaker is the circuit breaker's state: 0 closed, 1 open, 2 half-open.
	Breaker int64
	// Calls counts calls to Redis attempted (denials answered by the deny
	// cache are not calls).
	Calls uint64
	// Canceled counts calls abandoned by their caller; not store failures.
	Canceled uint64
	// DenyCacheHits counts decisions answered by the local deny cache.
	DenyCacheHits uint64
	// Refunds counts Cluster refunds of earlier slots after a later slot
	// denied.
	Refunds uint64
	// PendingReleases is the number of concurrency releases waiting to be
	// retried now.
	PendingReleases int
	// ReleasesDropped counts concurrency releases given up.
	ReleasesDropped uint64
	// HeldSlots is the number of concurrency slots held in Redis now.
	HeldSlots int
	// ClockSkew is Redis's clock minus the gateway's, last measured;
	// reported only when SkewKnown.
	ClockSkew time.Duration
	// SkewKnown reports whether ClockSkew holds a measurement.
	SkewKnown bool
	// Coalesced counts decide calls sent in a coalesced pipeline rather
	// than alone (store.redis.coalesce).
	Coalesced uint64
	// Leases counts the leases batched limits asked Redis for;
	// LocalDecisions the hits of batched limits decided from a lease or a
	// repeated denial, without a call.
	Leases, LocalDecisions uint64
	// LeaseReturned counts the unused lease units given back to Redis;
	// LeaseDropped those whose give-back failed (not retried).
	LeaseReturned, LeaseDropped uint64
}

// RegisterRedisStats exports the Redis store's figures as observable
// instruments on meter; read is called at each collection, off the request
// path. Unregister the returned registration when the store closes.
func RegisterRedisStats(meter metric.Meter, read func() RedisStats) (metric.Registration, error) {
	var err error
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, e := meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return g
	}
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, e := meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	breaker := gauge(MetricStoreBreakerState, "", "The Redis store's circuit breaker: 0 closed, 1 open, 2 half-open.")
	calls := counter(MetricStoreCalls, "{call}", "Calls to Redis attempted (denials answered by the deny cache are not calls).")
	canceled := counter(MetricStoreCanceled, "{call}", "Calls abandoned by their caller (a client that went away); not store failures.")
	hits := counter(MetricStoreDenyCacheHits, "{decision}", "Decisions answered by the Redis store's local deny cache.")
	refunds := counter(MetricStoreRefunds, "{refund}", "Cluster refunds of earlier slots after a later slot denied.")
	pending := gauge(MetricStoreReleasesPending, "{release}", "Concurrency releases that could not reach Redis and wait to be retried.")
	dropped := counter(MetricStoreReleasesDropped, "{release}", "Concurrency releases given up (lease ended, or the pending queue was full).")
	held := gauge(MetricStoreSlotsHeld, "{slot}", "Concurrency slots this gateway holds in Redis now.")
	coalesced := counter(MetricStoreCoalesced, "{call}", "Decide calls sent to Redis in a coalesced pipeline rather than alone.")
	leases := counter(MetricStoreLeases, "{lease}", "Leases of a key's budget that batched limits asked Redis for.")
	local := counter(MetricStoreLocalDecisions, "{decision}", "Hits of batched limits decided from a lease or a repeated denial, without a Redis call.")
	returned := counter(MetricStoreLeaseReturned, "{unit}", "Unused units of batched limits' leases given back to Redis when their lease ended.")
	ldropped := counter(MetricStoreLeaseDropped, "{unit}", "Unused lease units whose give-back failed; not retried (they stay counted until their window ends).")
	skew, e := meter.Float64ObservableGauge(MetricStoreClockSkew, metric.WithUnit("s"),
		metric.WithDescription("Redis's clock (TIME) minus this gateway's, measured at startup and every minute."))
	err = errors.Join(err, e)
	if err != nil {
		return nil, err
	}
	return meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := read()
		o.ObserveInt64(breaker, st.Breaker)
		o.ObserveInt64(calls, int64(st.Calls))
		o.ObserveInt64(canceled, int64(st.Canceled))
		o.ObserveInt64(hits, int64(st.DenyCacheHits))
		o.ObserveInt64(refunds, int64(st.Refunds))
		o.ObserveInt64(pending, int64(st.PendingReleases))
		o.ObserveInt64(dropped, int64(st.ReleasesDropped))
		o.ObserveInt64(held, int64(st.HeldSlots))
		o.ObserveInt64(coalesced, int64(st.Coalesced))
		o.ObserveInt64(leases, int64(st.Leases))
		o.ObserveInt64(local, int64(st.LocalDecisions))
		o.ObserveInt64(returned, int64(st.LeaseReturned))
		o.ObserveInt64(ldropped, int64(st.LeaseDropped))
		if st.SkewKnown {
			o.ObserveFloat64(skew, st.ClockSkew.Seconds())
		}
		return nil
	}, breaker, calls, canceled, hits, refunds, pending, dropped, held, coalesced, leases, local, returned, ldropped, skew)
}
