// Package redisstore is a ratelimit.Store whose counters live in Redis
// (standalone, Sentinel or Cluster), so that a fleet of gateways shares them.
//
// Every algorithm runs inside one Lua script (decide.lua, embedded) that
// mirrors the Go window math of package ratelimit bit for bit: integer ticks
// (µs), doubles in the order ARCHITECTURE.md writes them, doubles stored
// bit-exact as packed little-endian IEEE 754 values. All hits of one request are decided by one EVALSHA on standalone and
// Sentinel: the script checks every hit first and counts only if every
// enforced hit allows. Every key is passed in KEYS, and every key carries a
// TTL just longer than the state it holds (concurrency keys: a lease TTL
// refreshed on every acquire).
//
// Scripts run with redis.Script.Run: EVALSHA, and EVAL only when Redis
// answers NOSCRIPT (a restarted server or SCRIPT FLUSH). No other failure is
// retried: an increment whose reply was lost may have been applied.
//
// Failures return errors wrapping ratelimit.ErrStore; the caller applies its
// on_error policy. A circuit breaker fails calls fast while Redis is down and
// probes it to recover, and a local deny cache answers a request that Redis
// has denied until T without a round trip until T.
package redisstore

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/ratelimit"
)

//go:embed decide.lua
var decideSrc string

//go:embed release.lua
var releaseSrc string

// Clock selects whose clock a decision uses.
type Clock uint8

const (
	// ClockLocal decides at the now passed to Decide (the gateway's clock).
	ClockLocal Clock = iota
	// ClockStore decides at redis.call('TIME') read inside the script, so
	// every gateway shares the Redis server's clock at no extra round trip.
	// Redis 7 replicates a script's effects, not the script, so reading TIME
	// in a script that writes is safe.
	ClockStore
)

// Options configure a Store. The zero value is usable.
type Options struct {
	// Prefix is prepended to every key:
	// prefix + hit.Key + ":" + Limit.ID + ":" + stateFormat.
	// Default "" (the gateway passes store.redis.prefix, "tollgate:").
	Prefix string
	// Clock selects the decision clock. Default ClockLocal.
	Clock Clock
	// Timeout bounds one store call, including waiting for a pooled
	// connection. Default 50ms. The client must have ContextTimeoutEnabled
	// for the deadline to bound the socket.
	Timeout time.Duration
	// DenyCacheSize is the number of denied hit sets remembered locally:
	// 0 means 10000, a negative value disables the cache.
	DenyCacheSize int
	// LeaseTTL is the TTL of a concurrency key, refreshed on every acquire,
	// so that the slots of a crashed gateway heal. Default 5 minutes.
	LeaseTTL time.Duration
	// TTLMargin is added to every key's TTL beyond the instant its state
	// expires, to absorb clock skew between gateways with ClockLocal.
	// Default 1s.
	TTLMargin time.Duration
	// BreakerFailures is the number of consecutive failed calls that open
	// the circuit breaker. Default 5.
	BreakerFailures int
	// BreakerCooldown is how long the breaker stays open before one probe
	// call is let through. Default 250ms.
	BreakerCooldown time.Duration
}

// Store is a ratelimit.Store backed by Redis. It is safe for concurrent use.
type Store struct {
	client  redis.UniversalClient
	cluster bool
	opts    Options
	decide  *redis.Script
	release *redis.Script
	breaker breaker
	deny    *lru.Cache[denyKey, *denied]
	seeds   [2]maphash.Seed // of denyKey
	stats   counters
	params  sync.Map // limit ID → packed parameters (limitArg)
	holds   holdSet  // cluster keys that a decision in progress may refund

	// inverseOnly makes refunds skip the exact restore of an untouched
	// key, so tests reach the inverse operations without other traffic.
	inverseOnly bool
}

var _ ratelimit.Store = (*Store)(nil)

// New returns a Store using client, which the caller keeps owning (Close
// does not close it). It fails when the options are invalid.
func New(client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	if opts.Clock != ClockLocal && opts.Clock != ClockStore {
		return nil, fmt.Errorf("redisstore: unknown clock %d", opts.Clock)
	}
	if opts.Timeout < 0 || opts.LeaseTTL < 0 || opts.TTLMargin < 0 || opts.BreakerCooldown < 0 || opts.BreakerFailures < 0 {
		return nil, errors.New("redisstore: negative timeout, lease, margin or breaker setting")
	}
	if opts.Timeout == 0 {
		opts.Timeout = 50 * time.Millisecond
	}
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = 5 * time.Minute
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
	s := &Store{
		client:  client,
		opts:    opts,
		decide:  redis.NewScript(decideSrc),
		release: redis.NewScript(releaseSrc),
	}
	s.breaker.init(opts.BreakerFailures, opts.BreakerCooldown)
	_, s.cluster = client.(*redis.ClusterClient)
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
	return s.opts.Prefix + k + ":" + l.ID + ":" + stateFormat
}

// stateFormat names the layout of the values the scripts store. It is part
// of every key, so that gateways of different versions sharing one Redis
// during a rolling upgrade keep separate counters instead of reading each
// other's values as corrupt. Change it whenever decide.lua's layout changes.
const stateFormat = "f2"

// call runs f under the store's timeout and the circuit breaker, and wraps
// its error in ratelimit.ErrStore.
func (s *Store) call(ctx context.Context, f func(ctx context.Context) error) error {
	s.stats.calls.Add(1)
	if !s.breaker.allow(time.Now()) {
		s.stats.breakerRejects.Add(1)
		return fmt.Errorf("redis store: %w: %w", ratelimit.ErrStore, ErrBreakerOpen)
	}
	// Bound the call by the store's budget, unless the caller's deadline
	// is already at least as tight (the gateway sets one per request): a
	// second timer would cost three allocations and change nothing.
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > s.opts.Timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
	}
	err := f(ctx)
	switch {
	case err == nil:
		s.breaker.success()
		return nil
	case isStateError(err):
		// Redis is healthy; this key holds something we cannot read.
		s.breaker.success()
		s.stats.stateErrors.Add(1)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		s.breaker.failure(time.Now())
		s.stats.timeouts.Add(1)
	default:
		s.breaker.failure(time.Now())
		s.stats.otherErrors.Add(1)
	}
	return fmt.Errorf("redis store: %w: %w", ratelimit.ErrStore, err)
}

// isStateError reports whether err is a script error about one key's
// content (wrong type or corrupt state) rather than an unhealthy server.
func isStateError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "WRONGTYPE") || strings.Contains(msg, "tollgate: corrupt")
}

// ErrBreakerOpen is wrapped (with ratelimit.ErrStore) by every call failed
// fast while the circuit breaker is open.
var ErrBreakerOpen = errors.New("circuit breaker open")

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
	if s.deny != nil {
		ck = s.cacheKey(hits)
		if s.denyLookup(ck, now, out[:len(hits)]) {
			s.stats.denyCacheHits.Add(1)
			return false, nil
		}
	}
	var allowed bool
	err := s.call(ctx, func(ctx context.Context) error {
		var err error
		if s.cluster {
			allowed, err = s.decideCluster(ctx, now, hits, out)
		} else {
			allowed, _, err = s.run(ctx, s.client, 0, now, hits, out, nil)
		}
		return err
	})
	if err != nil {
		return false, err
	}
	if !allowed && s.deny != nil && !s.heldDenial(hits, out) {
		s.denyStore(ck, now, hits, out[:len(hits)])
	}
	return allowed, nil
}

// Script modes (ARGV[2] of decide.lua).
const (
	modeDecide = 0
	modeCheck  = 1
	modeRefund = 2
)

// written is what one decide call did to one key: whether it counted there,
// the value it read (old, oldOK: the key existed) and the value it wrote.
type written struct {
	counted bool
	old     string
	oldOK   bool
	new     string
}

// taken is what one modeDecide call on a cluster counted, so that a refund
// can undo it: the call's instant (ticks, as the script used it) and, per
// hit, the values it read and wrote.
type taken struct {
	at   int64
	keys []written
}

// refund asks a modeRefund call to undo t, applying the inverse operations
// at instant at (ticks; ignored with ClockStore, which reads TIME).
type refund struct {
	t  taken
	at int64
}

// callArgs is the reusable argument set of one decide call.
type callArgs struct {
	keys []string
	args []any
	hdr  []byte
}

var argPool = sync.Pool{New: func() any { return new(callArgs) }}

// appendF64 appends v as a little-endian double (decide.lua reads '<d').
func appendF64(b []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

// limitArg returns the packed parameters of l (decide.lua's ARGV[1+h]):
// algorithm, shadow, windows, then L, W, capacity, P, N per window. They
// are built once per limit ID.
func (s *Store) limitArg(l *ratelimit.Limit) string {
	if v, ok := s.params.Load(l.ID); ok {
		return v.(string)
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
	v := string(b)
	s.params.Store(l.ID, v)
	return v
}

// header packs decide.lua's ARGV[1].
func (s *Store) header(b []byte, mode int, now time.Time, wantOld bool, costs func(yield func(int64) bool), n int) []byte {
	useTime, t := 1.0, 0.0
	if s.opts.Clock == ClockLocal {
		useTime, t = 0, float64(now.UnixMicro())
	}
	b = appendF64(b, t)
	b = appendF64(b, useTime)
	b = appendF64(b, float64(mode))
	b = appendF64(b, float64(b2i(wantOld)))
	b = appendF64(b, float64(s.opts.LeaseTTL.Milliseconds()))
	b = appendF64(b, float64(s.opts.TTLMargin.Milliseconds()))
	b = appendF64(b, float64(n))
	for c := range costs {
		b = appendF64(b, float64(c))
	}
	return b
}

// run executes decide.lua for hits in one round trip and fills out. With
// rf non-nil (mode modeRefund) it first gives back what rf took. It
// returns what it counted when mode is modeDecide on a cluster.
func (s *Store) run(ctx context.Context, c redis.Scripter, mode int, now time.Time, hits []ratelimit.Hit,
	out []ratelimit.Decision, rf *refund) (bool, taken, error) {
	ca := argPool.Get().(*callArgs)
	defer func() {
		clear(ca.keys)
		clear(ca.args)
		ca.keys, ca.args, ca.hdr = ca.keys[:0], ca.args[:0], ca.hdr[:0]
		argPool.Put(ca)
	}()
	wantOld := s.cluster && mode == modeDecide
	costs := func(yield func(int64) bool) {
		for _, h := range hits {
			if !yield(h.Cost) {
				return
			}
		}
	}
	ca.hdr = s.header(ca.hdr, mode, now, wantOld, costs, len(hits))
	ca.args = append(ca.args, ca.hdr)
	for _, h := range hits {
		ca.keys = append(ca.keys, s.Key(h.Limit, h.Key))
		ca.args = append(ca.args, s.limitArg(h.Limit))
	}
	if rf != nil {
		var ts [16]byte
		binary.LittleEndian.PutUint64(ts[:], math.Float64bits(float64(rf.t.at)))
		binary.LittleEndian.PutUint64(ts[8:], math.Float64bits(float64(rf.at)))
		ca.args = append(ca.args, string(ts[:]))
		for _, r := range rf.t.keys {
			nw := r.new
			if s.inverseOnly {
				nw = "" // never equals a value read: always the inverse
			}
			ca.args = append(ca.args, strconv.Itoa(b2i(r.counted)), nw, strconv.Itoa(b2i(r.oldOK)), r.old)
		}
	}
	res, err := s.decide.Run(ctx, c, ca.keys, ca.args...).Result()
	if err != nil {
		return false, taken{}, err
	}
	return parseReply(res, hits, out, wantOld)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// replyReader reads decide.lua's packed reply: little-endian doubles, each
// an integer.
type replyReader struct {
	b   string
	pos int
	bad bool
}

func (r *replyReader) next() int64 {
	if r.pos+8 > len(r.b) {
		r.bad = true
		return 0
	}
	b := r.b[r.pos : r.pos+8]
	u := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
	v := math.Float64frombits(u)
	r.pos += 8
	return int64(v)
}

// parseReply turns decide.lua's reply into Decisions, choosing the reported
// window exactly as ratelimit.Check and ratelimit.Report do.
func parseReply(res any, hits []ratelimit.Hit, out []ratelimit.Decision, wantOld bool) (bool, taken, error) {
	var packed string
	var olds []any
	switch v := res.(type) {
	case string:
		packed = v
	case []any:
		if len(v) > 0 {
			packed, _ = v[0].(string)
			olds = v[1:]
		}
	}
	r := replyReader{b: packed}
	allowed := r.next() == 1
	at := r.next()
	var existed [16]bool
	for i, h := range hits {
		l := h.Limit
		d := ratelimit.Decision{}
		counted := r.next() == 1
		never := int(r.next())
		if e := r.next() == 1; i < len(existed) {
			existed[i] = e
		}
		n := l.Windows()
		var ok [8]bool
		var ra, rem, reset [8]int64
		okS, raS, remS, resetS := ok[:0], ra[:0], rem[:0], reset[:0]
		for range n {
			okS = append(okS, r.next() == 1)
			raS = append(raS, r.next())
			remS = append(remS, r.next())
			resetS = append(resetS, r.next())
		}
		switch {
		case never > 0:
			d = ratelimit.Decision{Never: true, Window: never - 1}
		default:
			d.Allowed = true
			longest := int64(-1)
			for w := range n {
				if okS[w] {
					continue
				}
				d.Allowed = false
				if raS[w] > longest {
					longest, d.Window = raS[w], w
				}
			}
			if !d.Allowed {
				d.RetryAfter = time.Duration(longest) * ratelimit.Tick
			}
		}
		if d.Allowed {
			best := -1.0
			for w := range n {
				frac := float64(remS[w]) / float64(l.Params(w).Capacity)
				if best < 0 || frac < best {
					best, d.Window = frac, w
				}
			}
		}
		d.Counted = counted
		d.Limit = l.Params(d.Window).Capacity
		if !r.bad {
			d.Remaining = remS[d.Window]
			d.Reset = time.Duration(resetS[d.Window]) * ratelimit.Tick
		}
		out[i] = d
	}
	if r.bad || r.pos != len(packed) {
		return false, taken{}, fmt.Errorf("script reply of %d bytes does not match %d hits", len(packed), len(hits))
	}
	if !wantOld {
		return allowed, taken{}, nil
	}
	if len(olds) != 2*len(hits) || len(hits) > len(existed) {
		return false, taken{}, fmt.Errorf("short script reply (%d old values for %d hits)", len(olds), len(hits))
	}
	ws := make([]written, len(hits))
	for i := range hits {
		old, _ := olds[2*i].(string)
		nw, _ := olds[2*i+1].(string)
		ws[i] = written{counted: out[i].Counted, old: old, oldOK: existed[i], new: nw}
	}
	return allowed, taken{at: at, keys: ws}, nil
}

// Release implements ratelimit.Store.
func (s *Store) Release(ctx context.Context, hits []ratelimit.Hit) error {
	var keys []string
	var args []any
	for i, h := range hits {
		if err := h.Check(); err != nil {
			return fmt.Errorf("redisstore: hit %d: %w", i, err)
		}
		if h.Limit.Algorithm != ratelimit.Concurrency {
			continue
		}
		keys = append(keys, s.Key(h.Limit, h.Key))
		args = append(args, h.Cost)
	}
	if len(keys) == 0 {
		return nil
	}
	return s.call(ctx, func(ctx context.Context) error {
		if !s.cluster {
			return s.release.Run(ctx, s.client, keys, args...).Err()
		}
		// One script per slot.
		for _, g := range groupBySlot(keys) {
			ks, as := make([]string, len(g)), make([]any, len(g))
			for j, i := range g {
				ks[j], as[j] = keys[i], args[i]
			}
			if err := s.release.Run(ctx, s.client, ks, as...).Err(); err != nil {
				return err
			}
		}
		return nil
	})
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
		one := func(yield func(int64) bool) { yield(1) }
		args := []any{s.header(nil, modeCheck, now, false, one, 1), s.limitArg(limit)}
		res, err := s.decide.Run(ctx, s.client, keys, args...).Result()
		if err != nil {
			return err
		}
		if _, _, err := parseReply(res, hits, dec, false); err != nil {
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
// denial, which may involve the key.
func (s *Store) Reset(ctx context.Context, limit *ratelimit.Limit, key string) error {
	if limit == nil || limit.ID == "" {
		return errors.New("redisstore: reset of an unfinished limit")
	}
	if s.deny != nil {
		s.deny.Purge()
	}
	return s.call(ctx, func(ctx context.Context) error {
		return s.client.Del(ctx, s.Key(limit, key)).Err()
	})
}

// Close implements ratelimit.Store. It does not close the client, which
// the caller owns.
func (s *Store) Close() error {
	if s.deny != nil {
		s.deny.Purge()
	}
	return nil
}

// Ready reports whether the store can serve decisions: nil when the breaker
// is closed (or due to probe) and Redis answers PING within the timeout.
// It is meant for /readyz.
func (s *Store) Ready(ctx context.Context) error {
	if st := s.breaker.state(time.Now()); st == BreakerOpen {
		return fmt.Errorf("redis store: %w: %w", ratelimit.ErrStore, ErrBreakerOpen)
	}
	return s.call(ctx, func(ctx context.Context) error { return s.client.Ping(ctx).Err() })
}

// Stats are cumulative counters of a Store, for metrics.
type Stats struct {
	// Calls is the number of store calls attempted (decisions answered by
	// the deny cache are not calls).
	Calls uint64
	// Timeouts counts calls that hit their deadline.
	Timeouts uint64
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
	// Breaker is the breaker's state now.
	Breaker BreakerState
}

type counters struct {
	calls, timeouts, stateErrors, otherErrors, breakerRejects, denyCacheHits, refunds atomic.Uint64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{
		Calls:          s.stats.calls.Load(),
		Timeouts:       s.stats.timeouts.Load(),
		StateErrors:    s.stats.stateErrors.Load(),
		OtherErrors:    s.stats.otherErrors.Load(),
		BreakerRejects: s.stats.breakerRejects.Load(),
		DenyCacheHits:  s.stats.denyCacheHits.Load(),
		Refunds:        s.stats.refunds.Load(),
		Breaker:        s.breaker.state(time.Now()),
	}
}

// denied is a cached denial: the decisions Redis returned at instant at,
// valid until until (the earliest RetryAfter among the denying enforced
// hits), so every denying hit still denies until then.
type denied struct {
	at, until time.Time
	out       []ratelimit.Decision
}

// denyKey identifies a hit set (limit IDs, keys and costs) in the deny
// cache: two 64-bit hashes under independent random seeds, so building it
// allocates nothing and two different hit sets collide with probability
// about 2^-128 (the seeds are per process, so no client can aim at one).
type denyKey [2]uint64

// cacheKey returns the deny-cache key of hits.
func (s *Store) cacheKey(hits []ratelimit.Hit) denyKey {
	var k denyKey
	for j := range k {
		var h maphash.Hash
		h.SetSeed(s.seeds[j])
		for _, hit := range hits {
			h.WriteString(hit.Limit.ID)
			h.WriteByte(0)
			h.WriteString(hit.Key)
			h.WriteByte(0)
			var c [8]byte
			binary.LittleEndian.PutUint64(c[:], uint64(hit.Cost))
			h.Write(c[:])
		}
		k[j] = h.Sum64()
	}
	return k
}

// denyStore caches a denial when every denying enforced hit promises a
// RetryAfter (not Never, not Concurrency's unknown 0).
func (s *Store) denyStore(ck denyKey, now time.Time, hits []ratelimit.Hit, out []ratelimit.Decision) {
	var wait time.Duration = -1
	for i, h := range hits {
		d := out[i]
		if h.Limit.Shadow || d.Allowed {
			continue
		}
		if d.Never || d.RetryAfter <= 0 {
			return
		}
		if wait < 0 || d.RetryAfter < wait {
			wait = d.RetryAfter
		}
	}
	if wait <= 0 {
		return
	}
	s.deny.Add(ck, &denied{at: now, until: now.Add(wait), out: append([]ratelimit.Decision(nil), out...)})
}

// heldDenial reports whether an enforced hit that denied has a key that a
// cluster decision of this Store holds or held moments ago (holdSet): the
// denial may be due to units given back since, so it must not be cached
// until its RetryAfter.
func (s *Store) heldDenial(hits []ratelimit.Hit, out []ratelimit.Decision) bool {
	if !s.cluster {
		return false
	}
	return s.holds.held(func(yield func(string) bool) {
		for i, h := range hits {
			if !h.Limit.Shadow && !out[i].Allowed && !yield(s.Key(h.Limit, h.Key)) {
				return
			}
		}
	}, time.Now())
}

// denyLookup answers from the cache if a denial for ck is still valid at
// now, with RetryAfter and Reset shortened by the time elapsed.
func (s *Store) denyLookup(ck denyKey, now time.Time, out []ratelimit.Decision) bool {
	e, ok := s.deny.Get(ck)
	if !ok {
		return false
	}
	if !now.Before(e.until) || now.Before(e.at) {
		s.deny.Remove(ck)
		return false
	}
	el := now.Sub(e.at)
	for i, d := range e.out {
		d.Counted = false
		if d.RetryAfter > 0 {
			d.RetryAfter -= el
		}
		d.Reset = max(d.Reset-el, 0)
		out[i] = d
	}
	return true
}
