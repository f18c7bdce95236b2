// Package redisstore is a ratelimit.Store whose counters live in Redis
// (standalone, Sentinel or Cluster), so that a fleet of gateways shares them.
// A request's hits are decided by one Lua call (lua/) that mirrors
// package window's math bit for bit, so that a gateway decides alike on
// either store. A call is sent again only when Redis proves that it did not
// run, because a lost reply may hide an applied count. ARCHITECTURE.md "The
// Redis store's code" describes the layout, engines, replies and failures.
package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/ratelimit"
)

// Options configure a Store. The zero value is usable.
type Options struct {
	// Prefix is prepended to every key:
	// prefix + hit.Key + ":" + Limit.ID + ":" + stateFormat.
	// Default "" (the gateway passes store.redis.prefix, "tollgate:").
	Prefix string
	// Clock selects the decision clock: ratelimit.ClockStore reads redis.call('TIME')
	// inside the script (Redis 7 replicates a script's effects, not the
	// script, so reading TIME in a script that writes is safe). Zero means
	// ratelimit.ClockLocal.
	Clock ratelimit.Clock
	// Timeout bounds one store call, including waiting for a pooled
	// connection (which may end up to an eighth of it late: budget.go).
	// Default 50ms. The client must have ContextTimeoutEnabled for the
	// deadline to bound the socket.
	Timeout time.Duration
	// DenyCacheSize is the number of denied hit sets remembered locally:
	// 0 means 10000, a negative value disables the cache.
	DenyCacheSize int
	// DenyCacheTTL bounds how long a denial is answered from the deny
	// cache, and so how long a reset made through another gateway (or by
	// anyone deleting the key) goes unseen here. Default 1s.
	DenyCacheTTL time.Duration
	// LeaseTTL is the lease of a concurrency slot: the Store renews the
	// slots it holds every third of it, and a slot not renewed for a whole
	// lease (its holder crashed) is given back by the next call on its key.
	// Default 30 seconds.
	LeaseTTL time.Duration
	// MaxPendingReleases bounds the releases kept for retry while Redis
	// cannot be reached; past it a release is dropped and its slot stays
	// held until its lease ends. Default 100000.
	MaxPendingReleases int
	// TTLMargin is added to every key's TTL beyond the instant its state
	// expires, to absorb clock skew between gateways with ratelimit.ClockLocal.
	// Default 1s.
	TTLMargin time.Duration
	// BreakerFailures is the number of consecutive failed calls that open
	// the circuit breaker. Default 5.
	BreakerFailures int
	// BreakerCooldown is how long the breaker stays open before one probe
	// call is let through. Default 250ms.
	BreakerCooldown time.Duration
	// NoFunctions runs the decide script with EVALSHA even on a Redis
	// that supports Function libraries (tests and benchmarks compare the
	// two; FUNCTION LOAD refused by Redis selects EVALSHA by itself).
	NoFunctions bool
	// Coalesce lets decisions that arrive together share one round trip
	// (a pipeline; coalesce.go) on standalone and Sentinel clients. A
	// decision that finds a connection free is still sent at once, alone.
	// The coalescer's lanes send on connections of their own (lane.go),
	// dialed with the options of a *redis.Client (see NewLaneClient):
	// hooks added to the client do not see the decisions sent on them.
	// Default false.
	Coalesce bool
	// NewLaneClient builds the one-connection client of a coalescer lane
	// from options the Store derives from its client's (the same server,
	// credentials and TLS; one connection; a dialer that lets the lane
	// check the connection before each use). The Store takes clients, it
	// does not choose how they are built: the gateway passes
	// redis.NewClient. Nil: lanes send through the Store's client and its
	// pool.
	NewLaneClient func(*redis.Options) *redis.Client
	// CoalesceLanes is how many decide calls or batches may be on the
	// wire at once when Coalesce is set. Default 4.
	CoalesceLanes int
	// Now is the clock of the breaker, the deny cache and the holds of
	// Cluster refunds. Default time.Now. (Decisions use the instant passed
	// to Decide, or Redis TIME with ratelimit.ClockStore.)
	Now func() time.Time
}

// Store is a ratelimit.Store backed by Redis. It is safe for concurrent use.
type Store struct {
	client  redis.UniversalClient
	cluster bool
	opts    Options
	decide  *redis.Script
	release *redis.Script
	// renewScript renews held slots (lease.go).
	renewScript *redis.Script
	leases      leases
	breaker     breaker
	deny        *lru.Cache[denyKey, *denied]
	seeds       [2]maphash.Seed // of denyKey
	// denyUntil is the latest instant (Unix ns) until which a cached
	// denial answers: past it no entry can, and a decision skips hashing
	// its hits and looking them up (the usual case: nothing denied lately).
	denyUntil atomic.Int64
	stats     counters
	params    sync.Map // limit ID → *[]packedLimit (limitArg)
	holds     holdSet  // cluster keys that a decision in progress may refund
	now       func() time.Time
	refused   atomic.Pointer[refusal] // the last readiness probe's refusal
	engine    engineState             // how the decide script runs (engine.go)
	coal      *coalescer              // nil unless Options.Coalesce (and not a Cluster)
	deadlines budgetClock             // the Done channels of the calls' budgets (budget.go)
	retire    retirer                 // the end of old libraries (retire.go)
}

var _ ratelimit.Store = (*Store)(nil)

// New returns a Store using client, which the caller keeps owning (Close
// does not close it). It fails when the options are invalid.
func New(client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	if opts.Clock == 0 {
		opts.Clock = ratelimit.ClockLocal
	}
	if opts.Clock != ratelimit.ClockLocal && opts.Clock != ratelimit.ClockStore {
		return nil, fmt.Errorf("redisstore: unknown clock %d", opts.Clock)
	}
	if opts.Timeout < 0 || opts.LeaseTTL < 0 || opts.MaxPendingReleases < 0 || opts.TTLMargin < 0 || opts.BreakerCooldown < 0 ||
		opts.BreakerFailures < 0 || opts.DenyCacheTTL < 0 || opts.CoalesceLanes < 0 {
		return nil, errors.New("redisstore: negative timeout, lease, pending releases, margin, breaker or deny-cache setting")
	}
	if opts.DenyCacheTTL == 0 {
		opts.DenyCacheTTL = time.Second
	}
	if opts.Timeout == 0 {
		opts.Timeout = 50 * time.Millisecond
	}
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = 30 * time.Second
	}
	if opts.MaxPendingReleases == 0 {
		opts.MaxPendingReleases = 100000
	}
	if opts.TTLMargin == 0 {
		opts.TTLMargin = time.Second
	}
	if opts.BreakerFailures == 0 {
		opts.BreakerFailures = 5
	}
	if opts.BreakerCooldown == 0 {
		opts.BreakerCooldown = 250 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Store{
		now:     opts.Now,
		client:  client,
		opts:    opts,
		decide:  redis.NewScript(decideSrc),
		release: redis.NewScript(releaseSrc),

		renewScript: redis.NewScript(renewSrc),
	}
	s.leases.init()
	s.deadlines.init(opts.Timeout)
	s.breaker.init(opts.BreakerFailures, opts.BreakerCooldown)
	_, s.cluster = client.(*redis.ClusterClient)
	if opts.Coalesce && !s.cluster {
		lanes := opts.CoalesceLanes
		if lanes == 0 {
			lanes = defaultLanes
		}
		s.coal = newCoalescer(s, lanes, defaultMaxBatch)
	}
	if opts.DenyCacheSize >= 0 {
		size := opts.DenyCacheSize
		if size == 0 {
			size = 10000
		}
		s.seeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}
		c, err := lru.New[denyKey, *denied](size)
		if err != nil {
			return nil, fmt.Errorf("redisstore: deny cache: %w", err)
		}
		s.deny = c
	}
	return s, nil
}

// Key returns the Redis key holding limit's counters for hit key k.
func (s *Store) Key(l *ratelimit.Limit, k string) string {
	if l.Algorithm == ratelimit.Concurrency {
		return s.opts.Prefix + k + ":" + l.ID + ":" + concFormat
	}
	if l.Algorithm == ratelimit.Distinct {
		return s.opts.Prefix + k + ":" + l.ID + ":" + distinctFormat
	}
	return s.opts.Prefix + k + ":" + l.ID + ":" + stateFormat
}

// concFormat names the layout of a concurrency key (a sorted set of
// leased slots, see lua/concurrency.lua): a key of another layout under the same
// name would be read as corrupt by one of two gateway versions.
const concFormat = "z1"

// stateFormat names the layout of the values the scripts store. It is part
// of every key, so that gateways of different versions sharing one Redis
// during a rolling upgrade keep separate counters instead of reading each
// other's values as corrupt. Change it whenever a stored layout in lua/ changes.
const stateFormat = "f3"

// Decide implements ratelimit.Store.
func (s *Store) Decide(ctx context.Context, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) (bool, error) {
	if len(out) < len(hits) {
		return false, fmt.Errorf("redisstore: %d decisions for %d hits", len(out), len(hits))
	}
	for i, h := range hits {
		if err := h.Check(); err != nil {
			return false, fmt.Errorf("redisstore: hit %d: %w", i, err)
		}
	}
	if len(hits) == 0 {
		return true, nil
	}
	var ck denyKey
	keyed := false
	cache := s.deny != nil && !bypassDenyCache(hits)
	if cache && s.denyMayHold(now) {
		ck, keyed = s.cacheKey(hits), true
		if s.denyLookup(ck, now, out[:len(hits)]) {
			s.stats.denyCacheHits.Add(1)
			return false, nil
		}
	}
	slots := s.newSlots(hits)
	var allowed bool
	err := s.call(ctx, func(ctx context.Context) error {
		var err error
		if s.cluster {
			allowed, err = s.decideCluster(ctx, now, hits, out, slots, false)
		} else {
			allowed, _, err = s.decideHits(ctx, s.client, modeDecide, now, hits, out, nil, slots)
		}
		return err
	})
	if err != nil {
		if slots != nil && !errors.Is(err, ErrBreakerOpen) {
			// The script may have run and its reply been lost.
			s.giveBackLater(hits, slots)
		}
		return false, err
	}
	if slots != nil && allowed {
		s.hold(hits, out, slots)
	}
	if !allowed && cache && !s.heldDenial(hits, out) {
		if !keyed {
			ck = s.cacheKey(hits)
		}
		s.denyStore(ck, now, hits, out[:len(hits)])
	}
	return allowed, nil
}

// Usage implements ratelimit.Store. It runs the decision script in check
// mode (cost 1), which changes nothing.
func (s *Store) Usage(ctx context.Context, now time.Time, limit *ratelimit.Limit, key string) ([]ratelimit.WindowUsage, error) {
	hits := []ratelimit.Hit{{Limit: limit, Key: key, Cost: 1}}
	if err := hits[0].Check(); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	dec := make([]ratelimit.Decision, 1)
	var rem, reset []int64
	err := s.call(ctx, func(ctx context.Context) error {
		keys := []string{s.Key(limit, key)}
		args := []any{&bytesArg{s.header(nil, modeCheck, now, false, hits)}, s.hitArg(limit, now)}
		res, err := s.run(ctx, s.client, keys, args, nil)
		if err != nil {
			return err
		}
		if _, _, err := parseReply(res, hits, dec, false, now.UnixMicro(), s.opts.Clock == ratelimit.ClockLocal); err != nil {
			return err
		}
		// parseReply validated the layout: allowed, now, counted, never,
		// old-exists, then ok, retry, remaining, reset per window.
		packed, _ := res.(string)
		r := replyReader{b: packed, pos: 5 * 8}
		for range limit.Windows() {
			r.next()
			r.next()
			rem = append(rem, r.next())
			reset = append(reset, r.next())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	n := limit.Windows()
	out := make([]ratelimit.WindowUsage, n)
	for w := range n {
		p := limit.Params(w)
		u := ratelimit.WindowUsage{Used: p.Capacity - rem[w], Remaining: rem[w], Reset: time.Duration(reset[w]) * ratelimit.Tick}
		if w < len(limit.Rates) {
			u.Rate = limit.Rates[w]
		}
		out[w] = u
	}
	return out, nil
}

// Reset implements ratelimit.Store. It also forgets every locally cached
// denial, which may involve the key. Other gateways' deny caches see the
// reset within Options.DenyCacheTTL.
func (s *Store) Reset(ctx context.Context, limit *ratelimit.Limit, key string) error {
	if limit == nil || limit.ID == "" {
		return errors.New("redisstore: reset of an unfinished limit")
	}
	if s.deny != nil {
		s.deny.Purge()
	}
	return s.call(ctx, func(ctx context.Context) error {
		return s.client.Del(ctx, s.resetKeys(limit, key)...).Err()
	})
}

// PurgeDenials forgets every locally cached denial. The gateway calls it
// when it swaps in a new policy: a limit switched to shadow, loosened or
// removed must not keep denying from the cache.
func (s *Store) PurgeDenials() {
	if s.deny != nil {
		s.deny.Purge()
	}
}

// Close implements ratelimit.Store: it stops renewing the slots still held
// (their leases end by themselves), makes a last attempt at the pending
// releases and closes the coalescer's own connections (lane.go). It does
// not close the client, which the caller owns.
func (s *Store) Close() error {
	if s.coal != nil {
		s.coal.close()
	}
	s.closeLeases()
	s.closeRetire()
	if s.deny != nil {
		s.deny.Purge()
	}
	return nil
}
