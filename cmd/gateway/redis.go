package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// openRedis builds the Redis store for p, with mem as the local fallback,
// and checks that it can make a decision. With store.require_at_startup a
// store that cannot is an error naming the cause; otherwise the gateway
// starts degraded (store.on_error decides until Redis does).
func (g *gateway) openRedis(p *policy.Policy, mem *memstore.Store) error {
	client, err := newRedisClient(p.Store.Redis, p.Store.Timeout)
	if err != nil {
		return fmt.Errorf("store.redis: %w", err)
	}
	clock := redisstore.ClockLocal
	if p.Store.Clock == policy.ClockStore {
		clock = redisstore.ClockStore
	}
	rs, err := redisstore.New(client, redisstore.Options{Prefix: p.Store.Redis.Prefix, Clock: clock, Timeout: p.Store.Timeout,
		LeaseTTL: p.Store.Redis.LeaseTTL})
	if err != nil {
		client.Close()
		return fmt.Errorf("store.redis: %w", err)
	}
	health := &storeHealth{ready: rs.Ready, log: g.log}
	g.store, g.local = rs, mem
	g.rr = &redisRuntime{client: client, store: rs, log: g.log, localClock: clock == redisstore.ClockLocal,
		stop: make(chan struct{})}
	g.ready = health.check
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := health.check(ctx); err != nil {
		if p.Store.RequireAtStartup {
			// newGateway's cleanup closes the store and the client.
			return fmt.Errorf("store.require_at_startup: the Redis store cannot make a decision: %w", err)
		}
		// Start degraded: store.on_error decides until Redis answers; the
		// breaker probes it in the background.
		g.log.Warn("starting degraded", "on_error", p.Store.OnError)
		return nil
	}
	g.rr.eviction = warnEvictionPolicy(ctx, client, g.log, "")
	return nil
}

// Intervals of the Redis store's background checks.
const (
	skewEvery     = time.Minute
	evictionEvery = 5 * time.Minute
	// skewWarn is the clock skew against Redis above which a gateway
	// deciding on its own clock warns: two gateways that far apart admit
	// noticeably more than a limit of a few seconds' window.
	skewWarn = 250 * time.Millisecond
)

// redisRuntime is what the gateway runs beside the Redis store: the client
// it owns, the background checks (clock skew, eviction policy) and the
// store's metrics.
type redisRuntime struct {
	client     redis.UniversalClient
	store      *redisstore.Store
	log        *slog.Logger
	localClock bool // store.clock = "local"

	skew     atomic.Int64 // the last measured skew (ns)
	skewOK   atomic.Bool  // skew holds a measurement
	eviction string       // the last maxmemory-policy seen; watch only
	stop     chan struct{}
	wg       sync.WaitGroup
	reg      metric.Registration
}

// start registers the store's metrics with meter and starts the
// background checks; now is the gateway's decision clock.
func (r *redisRuntime) start(meter metric.Meter, now func() time.Time) error {
	if now == nil {
		now = time.Now
	}
	if err := r.register(meter); err != nil {
		return err
	}
	r.checkSkew(now)
	r.wg.Add(1)
	go r.watch(now)
	return nil
}

// watch re-measures the clock skew every skewEvery and re-reads the
// eviction policy every evictionEvery (a later CONFIG SET is common).
func (r *redisRuntime) watch(now func() time.Time) {
	defer r.wg.Done()
	skew := time.NewTicker(skewEvery)
	defer skew.Stop()
	evict := time.NewTicker(evictionEvery)
	defer evict.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-skew.C:
			r.checkSkew(now)
		case <-evict.C:
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			r.eviction = warnEvictionPolicy(ctx, r.client, r.log, r.eviction)
			cancel()
		}
	}
}

// checkSkew measures the skew of now against Redis's TIME and, when the
// gateway decides on its own clock, warns above skewWarn.
func (r *redisRuntime) checkSkew(now func() time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	d, err := r.store.ClockSkew(ctx, now)
	if err != nil {
		r.log.Debug("cannot measure the clock skew against Redis", "err", err)
		return
	}
	r.skew.Store(int64(d))
	r.skewOK.Store(true)
	if r.localClock && d.Abs() > skewWarn {
		r.log.Warn("this gateway's clock differs from Redis's; with store.clock = \"local\" gateways that disagree admit more than a limit "+
			"(set store.clock = \"store\", or synchronise the clocks)", "skew", d.String(), "warn_above", skewWarn.String())
	}
}

// close stops the background checks and closes the client.
func (r *redisRuntime) close() {
	close(r.stop)
	r.wg.Wait()
	if r.reg != nil {
		_ = r.reg.Unregister()
	}
	r.client.Close()
}

// Metric names of the Redis store's own figures.
const (
	metricBreakerState    = "tollgate.store.breaker.state"
	metricStoreCalls      = "tollgate.store.calls"
	metricStoreCanceled   = "tollgate.store.canceled"
	metricDenyCacheHits   = "tollgate.store.deny_cache.hits"
	metricRefunds         = "tollgate.store.refunds"
	metricReleasesPending = "tollgate.store.releases.pending"
	metricReleasesDropped = "tollgate.store.releases.dropped"
	metricSlotsHeld       = "tollgate.store.slots.held"
	metricClockSkew       = "tollgate.store.clock.skew"
)

// register exports the store's Stats and the measured clock skew as
// observable instruments, read at each scrape.
func (r *redisRuntime) register(meter metric.Meter) error {
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
	breaker := gauge(metricBreakerState, "", "The Redis store's circuit breaker: 0 closed, 1 open, 2 half-open.")
	calls := counter(metricStoreCalls, "{call}", "Calls to Redis attempted (denials answered by the deny cache are not calls).")
	canceled := counter(metricStoreCanceled, "{call}", "Calls abandoned by their caller (a client that went away); not store failures.")
	hits := counter(metricDenyCacheHits, "{decision}", "Decisions answered by the Redis store's local deny cache.")
	refunds := counter(metricRefunds, "{refund}", "Cluster refunds of earlier slots after a later slot denied.")
	pending := gauge(metricReleasesPending, "{release}", "Concurrency releases that could not reach Redis and wait to be retried.")
	dropped := counter(metricReleasesDropped, "{release}", "Concurrency releases given up (lease ended, or the pending queue was full).")
	held := gauge(metricSlotsHeld, "{slot}", "Concurrency slots this gateway holds in Redis now.")
	skew, e := meter.Float64ObservableGauge(metricClockSkew, metric.WithUnit("s"),
		metric.WithDescription("Redis's clock (TIME) minus this gateway's, measured at startup and every minute."))
	err = errors.Join(err, e)
	if err != nil {
		return err
	}
	r.reg, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := r.store.Stats()
		o.ObserveInt64(breaker, int64(st.Breaker))
		o.ObserveInt64(calls, int64(st.Calls))
		o.ObserveInt64(canceled, int64(st.Canceled))
		o.ObserveInt64(hits, int64(st.DenyCacheHits))
		o.ObserveInt64(refunds, int64(st.Refunds))
		o.ObserveInt64(pending, int64(st.PendingReleases))
		o.ObserveInt64(dropped, int64(st.ReleasesDropped))
		o.ObserveInt64(held, int64(st.HeldSlots))
		if r.skewOK.Load() {
			o.ObserveFloat64(skew, time.Duration(r.skew.Load()).Seconds())
		}
		return nil
	}, breaker, calls, canceled, hits, refunds, pending, dropped, held, skew)
	return err
}

// testClockEnv names a test-only environment variable: a Go duration
// added to the gateway's decision clock, so that tests can run gateways
// whose clocks disagree. It is not configuration; never set it in
// production.
const testClockEnv = "GATEWAY_TEST_CLOCK_OFFSET"

// testClock returns base (nil: time.Now) shifted by testClockEnv from
// environ, or base itself when the variable is unset or invalid.
func testClock(environ []string, base func() time.Time) func() time.Time {
	var off time.Duration
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, testClockEnv+"="); ok {
			off, _ = time.ParseDuration(v)
		}
	}
	if off == 0 {
		return base
	}
	if base == nil {
		base = time.Now
	}
	return func() time.Time { return base().Add(off) }
}

// storeHealth runs the store's readiness check and logs when its outcome
// changes, so that a store that cannot decide is said once with its cause,
// not on every probe.
type storeHealth struct {
	ready func(context.Context) error
	log   *slog.Logger

	mu   sync.Mutex
	last string // the last failure's kind (healthKind); "" while healthy
}

// healthKind is what storeHealth compares between checks: a refusal's
// cause, or "unavailable" for every outage (unreachable, breaker open), so
// that an outage alternating between those two texts logs once.
func healthKind(err error) string {
	if errors.Is(err, redisstore.ErrRefused) {
		return err.Error()
	}
	return "unavailable"
}

// check runs the readiness check and logs a change of outcome.
func (h *storeHealth) check(ctx context.Context) error {
	err := h.ready(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil && h.last != "":
		h.log.Info("the Redis store makes decisions again")
		h.last = ""
	case err != nil && healthKind(err) != h.last:
		h.log.Warn("the Redis store cannot make a decision", "cause", err.Error())
		h.last = healthKind(err)
	}
	return err
}

// newRedisClient builds the go-redis client for the Redis store from the
// compiled [store.redis] settings: a Cluster client when cluster seed
// addresses are given, a Sentinel failover client when a master name is
// given, otherwise a standalone client parsed from the URL (redis:// or
// rediss:// for TLS). The username and password (from the environment,
// never from the TOML) override any credentials in the URL when non-empty.
// The settings were validated when the policy was compiled.
//
// Every client honours the caller's context deadline on the socket
// (ContextTimeoutEnabled), so store.timeout really bounds a call; dial, read
// and write timeouts are derived from timeout as a second guard. Commands
// are never retried by the client (MaxRetries -1): an EVALSHA whose reply
// was lost may have been applied, and retrying it would count twice. Cluster
// redirections (MOVED/ASK), which mean the command did not run, are still
// followed.
//
// A Cluster client follows a failover within about two seconds of the
// Cluster itself: it reloads the slot map every second (clusterReload) and
// at once when a node fails at the connection level. go-redis's Cluster
// client retries a command whose connection broke after it was sent (EOF,
// a read timeout) on the same or another node; clusterHook turns those
// errors into lost replies that are never retried, since the increment may
// have been applied.
func newRedisClient(rc policy.RedisStore, timeout time.Duration) (redis.UniversalClient, error) {
	if timeout <= 0 {
		timeout = 50 * time.Millisecond
	}
	dial := max(4*timeout, 250*time.Millisecond)
	io := max(2*timeout, 100*time.Millisecond)
	// A call holds a connection for about one round trip; with the socket
	// bounded by timeout, 10 connections per CPU serve tens of thousands of
	// decisions per second. Waiting for a connection is bounded by the
	// call's own deadline (PoolTimeout is a backstop).
	poolSize := 10 * runtime.GOMAXPROCS(0)
	switch {
	case len(rc.Cluster) > 0:
		cc := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                      rc.Cluster,
			Username:                   rc.Username,
			Password:                   rc.Password.Reveal(),
			DialTimeout:                dial,
			ReadTimeout:                io,
			WriteTimeout:               io,
			PoolTimeout:                io,
			PoolSize:                   poolSize,
			MaxRetries:                 -1,
			MaxRedirects:               3,
			ContextTimeoutEnabled:      true,
			ClusterStateReloadInterval: clusterReload,
		})
		cc.OnNewNode(func(node *redis.Client) { node.AddHook(clusterHook{cluster: cc}) })
		return cc, nil
	case rc.SentinelMaster != "":
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            rc.SentinelMaster,
			SentinelAddrs:         rc.SentinelAddrs,
			Username:              rc.Username,
			Password:              rc.Password.Reveal(),
			SentinelUsername:      rc.Username,
			SentinelPassword:      rc.Password.Reveal(),
			DialTimeout:           dial,
			ReadTimeout:           io,
			WriteTimeout:          io,
			PoolTimeout:           io,
			PoolSize:              poolSize,
			MaxRetries:            -1,
			ContextTimeoutEnabled: true,
		}), nil
	}
	opt, err := redis.ParseURL(rc.URL.Reveal())
	if err != nil {
		// ParseURL's errors never echo the password, but keep ours generic.
		return nil, fmt.Errorf("store.redis.url: %w", err)
	}
	if rc.Username != "" {
		opt.Username = rc.Username
	}
	if rc.Password != "" {
		opt.Password = rc.Password.Reveal()
	}
	opt.DialTimeout = dial
	opt.ReadTimeout = io
	opt.WriteTimeout = io
	opt.PoolTimeout = io
	opt.PoolSize = poolSize
	opt.MaxRetries = -1
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), nil
}

// clusterReload is how often a Cluster client reloads its slot map (on the
// first command after the interval; go-redis's default is a minute).
const clusterReload = time.Second

// clusterHook, on every node of a Cluster client, reloads the slot map when
// a node fails at the connection level (a killed master: its slots will be
// served by a promoted replica) and makes an error after the command was
// sent unretryable.
type clusterHook struct{ cluster *redis.ClusterClient }

func (h clusterHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			h.cluster.ReloadState(ctx)
		}
		return conn, err
	}
}

func (h clusterHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.sent(ctx, next(ctx, cmd))
	}
}

func (h clusterHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.sent(ctx, next(ctx, cmds))
	}
}

// sent classifies the error of a command that reached a connection. A
// Redis error reply (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: the command did not
// run) and a context error (never retried) pass unchanged; so does a
// failure to get a connection (nothing was sent). Any other error means the
// connection broke with the command possibly applied: the slot map is
// reloaded, and the error becomes a lostReply, which go-redis does not
// retry.
func (h clusterHook) sent(ctx context.Context, err error) error {
	var rerr redis.Error
	var op *net.OpError
	switch {
	case err == nil, errors.As(err, &rerr), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed):
		return err
	case errors.As(err, &op) && op.Op == "dial":
		h.cluster.ReloadState(ctx)
		return err
	}
	h.cluster.ReloadState(ctx)
	return &lostReply{err: err}
}

// lostReply is a command whose connection failed after it was sent. It
// unwraps to context.DeadlineExceeded for a timeout (so the store counts a
// timeout) and to nothing else, so that go-redis sees neither an EOF nor a
// network error it would retry.
type lostReply struct{ err error }

func (e *lostReply) Error() string {
	return "reply lost, not retried (the command may have run): " + e.err.Error()
}

func (e *lostReply) Unwrap() error {
	var ne net.Error
	if errors.As(e.err, &ne) && ne.Timeout() {
		return context.DeadlineExceeded
	}
	return nil
}

// warnEvictionPolicy reads Redis's maxmemory-policy and warns when it is
// anything but noeviction: every counter key has a TTL, so the volatile-*
// policies evict counters too, and an evicted counter is a limit silently
// reset. It warns only when the policy differs from last (the policy seen
// at the previous check; "" at startup), and returns the policy seen. A
// Redis that refuses CONFIG (managed services often do) is not an error,
// and stays silent.
func warnEvictionPolicy(ctx context.Context, client redis.UniversalClient, log *slog.Logger, last string) string {
	res, err := client.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		log.Debug("cannot read Redis maxmemory-policy", "err", err)
		return last
	}
	policy, ok := res["maxmemory-policy"]
	if !ok {
		return last
	}
	if policy != "noeviction" && policy != last {
		log.Warn("Redis may evict rate-limit counters under memory pressure, resetting limits early; "+
			"set maxmemory-policy noeviction (every counter key has a TTL, so volatile-* policies evict counters too)",
			"maxmemory-policy", policy)
	}
	return policy
}
