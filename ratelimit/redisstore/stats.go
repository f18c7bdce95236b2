package redisstore

import (
	_ "embed"
	"sync/atomic"
)

// Stats are cumulative counters of a Store, for metrics.
type Stats struct {
	// Calls is the number of store calls attempted (decisions answered by
	// the deny cache are not calls).
	Calls uint64
	// Timeouts counts calls that hit their deadline.
	Timeouts uint64
	// Canceled counts calls abandoned by their caller (a client that went
	// away); they are not store failures and do not move the breaker.
	Canceled uint64
	// StateErrors counts calls failed by a key of the wrong type or with
	// unreadable content.
	StateErrors uint64
	// OtherErrors counts every other failed call (connection refused,
	// READONLY, CLUSTERDOWN, ...).
	OtherErrors uint64
	// BreakerRejects counts calls failed fast by the open breaker.
	BreakerRejects uint64
	// DenyCacheHits counts decisions answered by the local deny cache.
	DenyCacheHits uint64
	// Refunds counts Cluster refunds of earlier slots after a later denial.
	Refunds uint64
	// Batches counts the pipelines the coalescer sent; Batched the calls
	// they carried (calls sent alone are in neither).
	Batches, Batched uint64
	// LaneRedials counts the coalescer's connections found closed by the
	// server (or out of step) when about to be used, and replaced before
	// anything was sent on them.
	LaneRedials uint64
	// Breaker is the breaker's state now.
	Breaker BreakerState
	// HeldSlots is the number of concurrency slots this Store holds now
	// (acquired, not yet released), whose leases it renews.
	HeldSlots int
	// PendingReleases is the number of concurrency releases that could not
	// reach Redis and wait to be retried now.
	PendingReleases int
	// ReleasesRetried counts releases that landed on a retry.
	ReleasesRetried uint64
	// ReleasesDropped counts releases given up: their lease ended before
	// Redis answered (Redis drops the slot by itself), or the pending queue
	// was full (the slot stays held until its lease ends).
	ReleasesDropped uint64
	// LeaseRenewals counts the batched renewals of the held slots' leases.
	LeaseRenewals uint64
	// Engine is how the decide script runs: "function" (a Function
	// library, Redis >= 7), "script" (EVALSHA), or "unknown" before the
	// first call has reached Redis.
	Engine string
	// LibraryLoads counts the loads of the Function library: the first,
	// and one after each time Redis had lost it (FUNCTION FLUSH, an empty
	// restart).
	LibraryLoads uint64
	// LibrariesRetired counts the libraries of other gateway versions this
	// Store deleted, unused for LibraryGrace (retire.go).
	LibrariesRetired uint64
	// LeasesLost counts held slots a renewal did not find: their lease had
	// ended (Redis unreachable for a whole lease) or the key was reset.
	LeasesLost uint64
}

type counters struct {
	calls, timeouts, canceled, stateErrors, otherErrors, breakerRejects, denyCacheHits, refunds, libraryLoads, batches, batched, librariesRetired, laneRedials atomic.Uint64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	s.leases.mu.Lock()
	held, pending := len(s.leases.held), len(s.leases.pending)+s.leases.retrying
	s.leases.mu.Unlock()
	return Stats{
		Calls:          s.stats.calls.Load(),
		Timeouts:       s.stats.timeouts.Load(),
		Canceled:       s.stats.canceled.Load(),
		StateErrors:    s.stats.stateErrors.Load(),
		OtherErrors:    s.stats.otherErrors.Load(),
		BreakerRejects: s.stats.breakerRejects.Load(),
		DenyCacheHits:  s.stats.denyCacheHits.Load(),
		Refunds:        s.stats.refunds.Load(),
		Batches:        s.stats.batches.Load(),
		Batched:        s.stats.batched.Load(),
		LaneRedials:    s.stats.laneRedials.Load(),
		Breaker:        s.breaker.state(s.now()),

		HeldSlots:        held,
		PendingReleases:  pending,
		ReleasesRetried:  s.leases.retried.Load(),
		ReleasesDropped:  s.leases.dropped.Load(),
		LeaseRenewals:    s.leases.renewals.Load(),
		LeasesLost:       s.leases.lost.Load(),
		Engine:           engine(s.engine.v.Load()).String(),
		LibraryLoads:     s.stats.libraryLoads.Load(),
		LibrariesRetired: s.stats.librariesRetired.Load(),
	}
}
