package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/candidate"
	"github.com/tollgate/gateway/internal/gcpace"
	"github.com/tollgate/gateway/jwks"
	"github.com/tollgate/gateway/listener"
	"github.com/tollgate/gateway/override"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/telemetry"
	"github.com/tollgate/gateway/topk"
	"github.com/tollgate/gateway/upstream"
	usagex "github.com/tollgate/gateway/usage"
)

// gateway is one running Tollgate process: its stores, handler, servers
// and reload state.
type gateway struct {
	log     *slog.Logger
	path    string
	environ []string
	// allowEmpty accepts a reloaded configuration without routes
	// (--allow-empty).
	allowEmpty bool
	handler    *proxy.Handler
	// cand runs a candidate configuration beside the live one.
	cand     *candidate.Manager
	store    ratelimit.Store
	local    ratelimit.Store
	ready    func(context.Context) error
	storeCfg policy.Store
	// started holds the settings a reload cannot change as the gateway
	// started with them: they stay in force until a restart.
	started restartOnly
	mem     *memstore.Store
	rr      *redisRuntime // nil unless the backend is Redis
	// jwks is the key set identity.jwt fetches (jwks_url, oidc_issuer),
	// nil without one. It outlives reloads that keep its URL.
	jwks atomic.Pointer[jwks.Set]
	// overrides is this gateway's copy of the store's override table.
	overrides *override.Sync
	// upstreams holds the routes' targets, their health checks and DNS
	// resolution, across reloads.
	upstreams *upstream.Registry
	// upstreamsReg exports the upstreams' health as metrics.
	upstreamsReg metric.Registration
	// adaptiveReg exports the adaptive limits' state as metrics.
	adaptiveReg metric.Registration
	// now is the decision clock (nil: time.Now), which the admin API
	// reads usage and resets counters by too: on another clock it would
	// read other windows and periods than the requests counted in.
	now func() time.Time

	otel      *otelSetup
	metrics   *telemetry.Metrics
	top       *topk.Tracker
	accessLog *accesslog.Writer
	logFile   *os.File
	// usage is the usage export ([usage]), nil without a sink; it lives
	// across reloads, so its aggregate does.
	usage    *usagex.Exporter
	usageReg metric.Registration
	// startedUsage is the [usage] the export started with (restart only).
	startedUsage *policy.UsageExport

	public, admin     *http.Server
	publicLn, adminLn net.Listener
	// rls is the rate limit service, nil without [rls].
	rls *rlsRuntime
	// certs are the public listener's TLS certificates, nil without TLS.
	certs *listener.Certs

	// pacer holds the collector's minimum heap (server.gc_min_heap); nil
	// when the GOGC environment variable decides.
	pacer *gcpace.Pacer

	reloadMu sync.Mutex
	// liveFiles are the files the live configuration's compile read: a
	// posted candidate may name them besides files in its directory.
	liveFiles  atomic.Pointer[map[string]bool]
	draining   atomic.Bool
	lastReload atomic.Pointer[reloadResult]
}

// newGateway builds the stores, the handler and both listeners for p. When
// a step fails, everything the earlier steps opened is released (one
// deferred cleanup, gateway.close), so a failed start leaks nothing.
func newGateway(p *policy.Policy, path string, environ []string, log *slog.Logger) (_ *gateway, err error) {
	g := &gateway{log: log, path: path, environ: environ, storeCfg: p.Store, started: restartOnlyOf(p), startedUsage: p.Usage}
	defer func() {
		if err != nil {
			g.close()
		}
	}()
	g.startPacer(p.Server.GCMinHeap)
	if err := g.openStores(p); err != nil {
		return nil, err
	}
	opts, err := g.observe(p)
	if err != nil {
		return nil, err
	}
	g.openOverrides()
	if g.overrides != nil {
		opts.Overrides = g.overrides
	}
	g.upstreams = upstream.NewRegistry(upstream.Options{Logger: log, Resolver: newResolver(p.Server.Resolver)})
	opts.Upstreams = g.upstreams
	set, err := g.keysFor(p)
	if err != nil {
		return nil, err
	}
	g.useKeys(set)
	if g.upstreamsReg, err = g.registerUpstreams(g.otel.Meter()); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	h, err := proxy.New(p, opts)
	if err != nil {
		return nil, err
	}
	g.handler = h
	if g.adaptiveReg, err = g.registerAdaptive(g.otel.Meter()); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	g.cand = g.candidateManager()
	g.lastReload.Store(&reloadResult{At: time.Now(), OK: true})

	g.publicLn, err = net.Listen("tcp", p.Server.Listen)
	if err != nil {
		return nil, fmt.Errorf("server.listen: %w", err)
	}
	g.public = &http.Server{
		Handler:           h,
		ReadHeaderTimeout: p.Server.ReadHeaderTimeout,
		IdleTimeout:       p.Server.IdleTimeout,
		MaxHeaderBytes:    p.Server.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	listener.Configure(g.public, p.Server)
	if p.Server.TLS != nil {
		if g.certs, err = listener.Load(p.Server.TLS); err != nil {
			return nil, fmt.Errorf("server.tls: %w", err)
		}
		g.publicLn = tls.NewListener(g.publicLn, g.certs.TLSConfig())
	}
	if p.Server.AdminListen != "" {
		g.adminLn, err = net.Listen("tcp", p.Server.AdminListen)
		if err != nil {
			return nil, fmt.Errorf("server.admin_listen: %w", err)
		}
		if err := checkAdminBound(g.adminLn.Addr(), p); err != nil {
			return nil, err
		}
		g.admin = &http.Server{
			Handler:           g.adminMux(),
			ReadHeaderTimeout: p.Server.ReadHeaderTimeout,
			IdleTimeout:       p.Server.IdleTimeout,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		}
	}
	if err := g.openRLS(p); err != nil {
		return nil, err
	}
	if g.overrides != nil {
		g.overrides.Start()
	}
	return g, nil
}

// openOverrides makes this gateway's copy of the store's override table,
// read once now so that overrides apply from the first request. A cached
// denial may predate a change, so a change forgets them.
func (g *gateway) openOverrides() {
	t := g.overrideTable()
	if t == nil {
		return
	}
	g.overrides = override.New(t, override.Options{Logger: g.log, Changed: func() {
		if dc, ok := g.store.(interface{ PurgeDenials() }); ok {
			dc.PurgeDenials()
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = g.overrides.Refresh(ctx) // a failure is logged; the poll retries
}

// close releases what newGateway opened, whatever it got to: listeners,
// stores and the Redis client, the access log and its file, telemetry.
// It is the one cleanup of a failed start and of a shutdown (after the
// servers have drained).
func (g *gateway) close() {
	if g.pacer != nil {
		g.pacer.Stop()
	}
	if g.overrides != nil {
		g.overrides.Stop()
	}
	if g.adaptiveReg != nil {
		_ = g.adaptiveReg.Unregister()
	}
	if g.upstreamsReg != nil {
		_ = g.upstreamsReg.Unregister()
	}
	if g.upstreams != nil {
		g.upstreams.Close() // health probes and DNS resolution
	}
	g.useKeys(nil)
	if g.rls != nil {
		g.rls.stopWatch()
		g.rls.grpc.Stop() // no-op after a graceful stop
		g.rls.ln.Close()
	}
	for _, ln := range []net.Listener{g.publicLn, g.adminLn} {
		if ln != nil {
			ln.Close() // already closed after a server's Shutdown; the error says so
		}
	}
	// Before the stores: the final flush may claim notices on Redis.
	g.closeUsage()
	if g.store != nil {
		g.flushLeases() // the servers have drained: no lease is in use
		g.store.Close()
	}
	if g.mem != nil && ratelimit.Store(g.mem) != g.store {
		g.mem.Close() // the local fallback of the Redis store
	}
	if g.rr != nil {
		g.rr.close() // its background checks, then the client
	}
	if g.accessLog != nil {
		if err := g.accessLog.Close(); err != nil {
			g.log.Warn("access log", "err", err)
		}
	}
	if g.logFile != nil {
		g.logFile.Close()
	}
	if g.otel != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := g.otel.Shutdown(ctx); err != nil {
			g.log.Warn("telemetry shutdown", "err", err)
		}
		cancel()
	}
}

// observe sets up metrics, tracing and the access log, and returns the
// proxy options that feed them.
func (g *gateway) observe(p *policy.Policy) (proxy.Options, error) {
	opts := proxy.Options{Store: g.store, Local: g.local, Logger: g.log}
	if p.Store.Backend != policy.BackendRedis {
		// The memory store counts on this process's monotonic clock, so a
		// wall-clock step (NTP, an operator) neither refills buckets nor
		// locks clients out. Redis with clock = "local"
		// needs the wall clock every replica shares.
		opts.Now = monotonicClock()
	}
	opts.Now = testClock(g.environ, opts.Now)
	g.now = opts.Now
	ot, err := setupTelemetry(context.Background(), g.environ, g.log)
	if err != nil {
		return opts, fmt.Errorf("telemetry: %w", err)
	}
	g.otel = ot
	g.metrics, err = telemetry.NewMetrics(ot.Meter(), telemetry.MetricsOptions{
		LiveKeys:  func() int64 { return int64(g.mem.Len()) },
		Bytes:     func() int64 { return g.mem.Bytes() },
		Evictions: func() int64 { return int64(g.mem.Evictions()) },
		JWKS: func() (int64, time.Time, bool) {
			st, ok := g.jwksStatus()
			return int64(st.Keys), st.LastSuccess, ok
		},
	})
	if err != nil {
		return opts, fmt.Errorf("metrics: %w", err)
	}
	ot.SetMetrics(g.metrics)
	if g.rr != nil {
		if err := g.rr.start(ot.Meter(), opts.Now); err != nil {
			return opts, fmt.Errorf("metrics: %w", err)
		}
	}
	// Clients appear in /admin/top as the access log shows them, with its
	// settings, like top_k read at startup.
	label := accesslog.Options{RawClient: p.AccessLog.RawClient, Salt: []byte(p.AccessLog.Salt.Reveal()),
		IPv6Prefix: p.Identity.IPv6Prefix()}
	g.top = topk.New(p.Config.Admin.TopK, label.Client)
	// Header rules name a client ({client}) as the log does.
	opts.ClientLabel = label.Client
	observers := telemetry.Observers{g.metrics, telemetry.Top{T: g.top}}
	if al := p.AccessLog; al.Path != "" {
		var out io.Writer
		switch al.Path {
		case "stdout":
			out = os.Stdout
		case "stderr":
			out = os.Stderr
		default:
			g.logFile, err = os.OpenFile(al.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
			if err != nil {
				return opts, fmt.Errorf("access_log.path: %w", err)
			}
			out = g.logFile
		}
		format := accesslog.JSONL
		if al.Format == policy.LogCombined {
			format = accesslog.Combined
		}
		g.accessLog, err = accesslog.NewWriter(out, accesslog.Options{
			Format: format, RawClient: al.RawClient, Salt: []byte(al.Salt), FlushInterval: al.FlushInterval,
			IPv6Prefix: p.Identity.IPv6Prefix(),
		})
		if err != nil {
			return opts, fmt.Errorf("access_log: %w", err)
		}
		observers = append(observers, telemetry.AccessLog{W: g.accessLog})
	}
	if err := g.openUsage(p); err != nil {
		return opts, fmt.Errorf("usage: %w", err)
	}
	if g.usage != nil {
		observers = append(observers, g.usage)
	}
	// The metrics observer first: it also counts requests in flight.
	opts.Observer = inflightObservers{observers, g.metrics}
	if tr := telemetry.NewTracing(ot.TracerProvider(), nil); tr.Enabled() {
		opts.Tracer = tr
	}
	return opts, nil
}

// inflightObservers fans events out to several observers and counts
// requests in flight with one of them.
type inflightObservers struct {
	telemetry.Observers
	inflight proxy.InFlight
}

func (o inflightObservers) Begin() { o.inflight.Begin() }

func (o inflightObservers) End() { o.inflight.End() }

// openStores builds the configured store and the local fallback.
func (g *gateway) openStores(p *policy.Policy) error {
	mem := memstore.New(memstore.Options{MaxKeys: p.Store.MemoryMaxKeys, MaxBytes: p.Store.MemoryMaxBytes})
	g.mem = mem
	if p.Store.Backend == policy.BackendRedis {
		return g.openRedis(p, mem)
	}
	g.store, g.local = mem, mem
	g.ready = func(context.Context) error { return nil }
	return nil
}

// monotonicClock returns a clock that reads the wall time once and then
// advances with the monotonic clock only.
func monotonicClock() func() time.Time {
	base := time.Now()
	return func() time.Time { return base.Add(time.Since(base)) }
}

// flushLeases gives the unused units of the hybrid store's leases back to
// the shared store (batched limits), bounded by a second.
func (g *gateway) flushLeases() {
	f, ok := g.store.(interface {
		Flush(context.Context, time.Time)
	})
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	now := testClock(g.environ, time.Now) // the clock decisions use
	f.Flush(ctx, now())
}
