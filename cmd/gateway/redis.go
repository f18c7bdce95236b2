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
	"time"

	"github.com/redis/go-redis/v9"

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
	if p.Store.Clock == "store" {
		clock = redisstore.ClockStore
	}
	rs, err := redisstore.New(client, redisstore.Options{Prefix: p.Store.Redis.Prefix, Clock: clock, Timeout: p.Store.Timeout,
		LeaseTTL: p.Store.Redis.LeaseTTL})
	if err != nil {
		client.Close()
		return fmt.Errorf("store.redis: %w", err)
	}
	health := &storeHealth{ready: rs.Ready, log: g.log}
	g.store, g.local, g.redis = rs, mem, client
	g.ready = health.check
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := health.check(ctx); err != nil {
		if p.Store.RequireAtStartup {
			rs.Close()
			client.Close()
			g.redis = nil
			return fmt.Errorf("store.require_at_startup: the Redis store cannot make a decision: %w", err)
		}
		// Start degraded: store.on_error decides until Redis answers; the
		// breaker probes it in the background.
		g.log.Warn("starting degraded", "on_error", p.Store.OnError)
		return nil
	}
	warnEvictionPolicy(ctx, client, g.log)
	return nil
}

// storeHealth runs the store's readiness check and logs when its outcome
// changes, so that a store that cannot decide is said once with its cause,
// not on every probe.
type storeHealth struct {
	ready func(context.Context) error
	log   *slog.Logger

	mu   sync.Mutex
	last string // the last failure's text; "" while healthy
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
	case err != nil && err.Error() != h.last:
		h.log.Warn("the Redis store cannot make a decision", "cause", err.Error())
		h.last = err.Error()
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
			Password:                   rc.Password,
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
			Password:              rc.Password,
			SentinelUsername:      rc.Username,
			SentinelPassword:      rc.Password,
			DialTimeout:           dial,
			ReadTimeout:           io,
			WriteTimeout:          io,
			PoolTimeout:           io,
			PoolSize:              poolSize,
			MaxRetries:            -1,
			ContextTimeoutEnabled: true,
		}), nil
	}
	opt, err := redis.ParseURL(rc.URL)
	if err != nil {
		// ParseURL's errors never echo the password, but keep ours generic.
		return nil, fmt.Errorf("store.redis.url: %w", err)
	}
	if rc.Username != "" {
		opt.Username = rc.Username
	}
	if rc.Password != "" {
		opt.Password = rc.Password
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

// warnEvictionPolicy logs a warning when Redis may evict counter keys under
// memory pressure, which silently resets limits. A Redis that refuses
// CONFIG (managed services often do) is not an error.
func warnEvictionPolicy(ctx context.Context, client redis.UniversalClient, log *slog.Logger) {
	res, err := client.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		log.Debug("cannot read Redis maxmemory-policy", "err", err)
		return
	}
	if policy := res["maxmemory-policy"]; strings.HasPrefix(policy, "allkeys-") {
		log.Warn("Redis may evict rate-limit counters under memory pressure, resetting limits early; "+
			"prefer maxmemory-policy volatile-lru/volatile-ttl/noeviction (every counter key has a TTL)",
			"maxmemory-policy", policy)
	}
}
