package main

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/tollgate/gateway/internal/logthrottle"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit/hybrid"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/redisstore"
	"github.com/tollgate/gateway/telemetry"
)

// openRedis builds the Redis store for p, with mem as the local fallback,
// and checks that it can make a decision. With store.require_at_startup a
// store that cannot is an error naming the cause; otherwise the gateway
// starts degraded (store.on_error decides until Redis does).
func (g *gateway) openRedis(p *policy.Policy, mem *memstore.Store) error {
	// Before the first client exists: go-redis logs from its pool's
	// background dials as soon as there is one.
	redis.SetLogger(&redisLog{log: g.log})
	client, err := newRedisClient(p.Store.Redis, p.Store.Timeout)
	if err != nil {
		return fmt.Errorf("store.redis: %w", err)
	}
	rs, err := redisstore.New(client, redisstore.Options{NewLaneClient: redis.NewClient, Prefix: p.Store.Redis.Prefix, Clock: p.Store.Clock, Timeout: p.Store.Timeout,
		LeaseTTL: p.Store.Redis.LeaseTTL, Coalesce: p.Store.Redis.Coalesce})
	if err != nil {
		client.Close()
		return fmt.Errorf("store.redis: %w", err)
	}
	health := &redisstore.Health{Ready: rs.Ready, Log: g.log}
	// Batched limits (sync = "batched") admit from leases of the shared
	// budget; every other hit goes to Redis as it is.
	g.store, g.local = hybrid.Wrap(rs, hybrid.Options{}), mem
	g.rr = &redisRuntime{client: client, store: rs, monitor: redisstore.NewMonitor(rs, g.log)}
	if hs, ok := g.store.(interface{ Stats() hybrid.Stats }); ok {
		g.rr.hybrid = hs.Stats
	}
	g.ready = health.Check
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := health.Check(ctx); err != nil {
		if p.Store.RequireAtStartup {
			// newGateway's cleanup closes the store and the client.
			return fmt.Errorf("store.require_at_startup: the Redis store cannot make a decision: %w", err)
		}
		// Start degraded: store.on_error decides until Redis answers; the
		// breaker probes it in the background.
		g.log.Warn("starting degraded", "on_error", p.Store.OnError)
		return nil
	}
	g.rr.monitor.CheckEviction(ctx)
	return nil
}

// redisLog carries the go-redis library's own messages (a failed dial of
// its pool, a dropped connection) into the gateway's log, which is JSON by
// default: left to itself the library writes plain-text lines to standard
// error, several a second while Redis is down, breaking every consumer
// that parses the log as JSON lines. Each message becomes a warning with
// source "go-redis" and the library's text as detail, at most one a second
// (logthrottle), counting the ones held back; the store's own failures are
// logged, and counted in metrics, by the gateway anyway.
//
// go-redis's logger is one for the whole process (redis.SetLogger): the
// latest gateway opened logs them all, which in a process is one.
type redisLog struct {
	log *slog.Logger
	t   logthrottle.Throttle
}

// Printf implements go-redis's internal.Logging.
func (l *redisLog) Printf(ctx context.Context, format string, v ...any) {
	n, ok := l.t.Allow(time.Now())
	if !ok {
		return
	}
	if ctx == nil {
		ctx = context.Background()
	}
	detail := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.log.Log(ctx, slog.LevelWarn, "redis client", "source", "go-redis", "detail", detail,
		"suppressed_since_last_line", n)
}

// redisRuntime is what the gateway runs beside the Redis store: the client
// it owns, the store's background checks (clock skew, eviction policy) and
// the store's metrics.
type redisRuntime struct {
	client  redis.UniversalClient
	store   *redisstore.Store
	monitor *redisstore.Monitor
	reg     metric.Registration
	hybrid  func() hybrid.Stats // the batched limits' figures
}

// start registers the store's metrics with meter and starts the
// background checks; now is the gateway's decision clock.
func (r *redisRuntime) start(meter metric.Meter, now func() time.Time) error {
	if err := r.register(meter); err != nil {
		return err
	}
	r.monitor.Start(now)
	return nil
}

// close stops the background checks and closes the client.
func (r *redisRuntime) close() {
	r.monitor.Stop()
	if r.reg != nil {
		_ = r.reg.Unregister()
	}
	r.client.Close()
}

// register exports the store's Stats and the measured clock skew as
// observable instruments, read at each scrape.
func (r *redisRuntime) register(meter metric.Meter) error {
	reg, err := telemetry.RegisterRedisStats(meter, func() telemetry.RedisStats {
		st := r.store.Stats()
		skew, known := r.monitor.Skew()
		out := telemetry.RedisStats{Breaker: int64(st.Breaker), Calls: st.Calls, Canceled: st.Canceled,
			DenyCacheHits: st.DenyCacheHits, Refunds: st.Refunds, PendingReleases: st.PendingReleases,
			ReleasesDropped: st.ReleasesDropped, HeldSlots: st.HeldSlots, ClockSkew: skew, SkewKnown: known,
			Coalesced: st.Batched}
		if r.hybrid != nil {
			hs := r.hybrid()
			out.Leases, out.LocalDecisions = hs.Leases, hs.LocalAdmits+hs.LocalDenials
			out.LeaseReturned, out.LeaseDropped = hs.Returned, hs.Dropped
		}
		return out
	})
	r.reg = reg
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
// a read timeout) on the same or another node; redisstore.HookCluster turns
// those errors into lost replies that are never retried, since the
// increment may have been applied.
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
			Protocol:                   resp,
			ContextTimeoutEnabled:      true,
			ClusterStateReloadInterval: clusterReload,
		})
		redisstore.HookCluster(cc)
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
			Protocol:              resp,
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
	opt.Protocol = resp
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), nil
}

// resp is the protocol the gateway speaks to Redis: RESP2. The store uses
// nothing RESP3 adds (push notifications, client-side caching), and with
// RESP3 go-redis checks every reply for pending push notifications
// first, about 1–2k instructions per decision (BENCHMARKS.md "Gateway
// side of a Redis decision").
const resp = 2

// clusterReload is how often a Cluster client reloads its slot map (on the
// first command after the interval; go-redis's default is a minute).
const clusterReload = time.Second
