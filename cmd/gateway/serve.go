package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/admin"
	"github.com/tollgate/gateway/candidate"
	"github.com/tollgate/gateway/internal/gcpace"
	"github.com/tollgate/gateway/listener"
	"github.com/tollgate/gateway/override"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/redisstore"
	"github.com/tollgate/gateway/telemetry"
	"github.com/tollgate/gateway/topk"
)

// serveCommand implements `gateway [serve]`.
func serveCommand(args, environ []string, stdout, stderr io.Writer) int {
	var f commonFlags
	fs := newFlagSet("serve", stderr, &f)
	f.addAllowEmpty(fs)
	candPath := fs.String("candidate", "", "a configuration whose limits decide every request beside the live ones, without affecting responses (see GET /admin/candidate)")
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	log, err := newLogger(stderr, &f)
	if err != nil {
		fmt.Fprintln(stderr, "gateway:", err)
		return exitInvalid
	}
	p, files, err := loadPolicyFiles(f.config, environ)
	for _, w := range unknownEnv(environ, policyEnvNamed(p)) {
		log.Warn(w)
	}
	if err == nil {
		err = requireRoutes(p, f.allowEmpty)
	}
	if err != nil {
		log.Error("invalid configuration", "config", f.config, "problems", problems(err))
		return exitInvalid
	}
	for _, w := range p.Warnings {
		log.Warn(w)
	}
	// The candidate is checked before anything listens.
	cp, err := loadCandidate(*candPath, p, environ, f.allowEmpty, log)
	if err != nil {
		log.Error("invalid candidate configuration", "candidate", *candPath, "problems", problems(err))
		return exitInvalid
	}
	g, err := newGateway(p, f.config, environ, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return exitFailure
	}
	g.liveFiles.Store(&files)
	g.allowEmpty = f.allowEmpty
	if cp != nil {
		if err := g.cand.Start(cp, *candPath); err != nil {
			log.Error("cannot start the candidate", "candidate", *candPath, "err", err)
			g.close()
			return exitFailure
		}
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	if err := g.run(sigs); err != nil {
		log.Error("gateway stopped with an error", "err", err)
		return exitFailure
	}
	return exitOK
}

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
	mem      *memstore.Store
	rr       *redisRuntime // nil unless the backend is Redis
	// overrides is this gateway's copy of the store's override table.
	overrides *override.Sync
	// now is the decision clock (nil: time.Now), which the admin API
	// reads usage and resets counters by too: on another clock it would
	// read other windows and periods than the requests counted in.
	now func() time.Time

	otel      *otelSetup
	metrics   *telemetry.Metrics
	top       *topk.Tracker
	accessLog *accesslog.Writer
	logFile   *os.File

	public, admin     *http.Server
	publicLn, adminLn net.Listener
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

// reloadResult is the outcome of the latest reload, shown by /readyz.
type reloadResult struct {
	At    time.Time `json:"at"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
}

// newGateway builds the stores, the handler and both listeners for p. When
// a step fails, everything the earlier steps opened is released (one
// deferred cleanup, gateway.close), so a failed start leaks nothing.
func newGateway(p *policy.Policy, path string, environ []string, log *slog.Logger) (_ *gateway, err error) {
	g := &gateway{log: log, path: path, environ: environ, storeCfg: p.Store}
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
	h, err := proxy.New(p, opts)
	if err != nil {
		return nil, err
	}
	g.handler = h
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
		g.admin = &http.Server{
			Handler:           g.adminMux(),
			ReadHeaderTimeout: p.Server.ReadHeaderTimeout,
			IdleTimeout:       p.Server.IdleTimeout,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		}
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
	for _, ln := range []net.Listener{g.publicLn, g.adminLn} {
		if ln != nil {
			ln.Close() // already closed after a server's Shutdown; the error says so
		}
	}
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
func (o inflightObservers) End()   { o.inflight.End() }

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

// certPollInterval is how often the TLS files are checked for a change.
const certPollInterval = time.Second

// run serves until SIGTERM or SIGINT, reloading on SIGHUP.
func (g *gateway) run(sigs <-chan os.Signal) error {
	p := g.handler.Policy()
	attrs := []any{"listen", g.publicLn.Addr().String(), "store", p.Store.Backend, "clock", p.Store.Clock,
		"routes", len(p.Routes), "limits", len(p.Limits), "version", version}
	if g.adminLn != nil {
		attrs = append(attrs, "admin_listen", g.adminLn.Addr().String())
	}
	attrs = append(attrs, "tls", g.certs != nil, "h2c", p.Server.H2C)
	// The listeners are bound already: logged before they serve, the line
	// comes before the first answer, healthz included, so whoever waits
	// for the gateway to be healthy finds it in the log.
	g.log.Info("tollgate listening", attrs...)
	errc := make(chan error, 2)
	go func() { errc <- serve(g.public, g.publicLn) }()
	if g.admin != nil {
		go func() { errc <- serve(g.admin, g.adminLn) }()
	}
	stopWatch := g.startWatch()
	if g.certs != nil {
		stopCerts := g.certs.Watch(certPollInterval, g.log)
		defer stopCerts()
	}

	for {
		select {
		case err := <-errc:
			stopWatch()
			g.shutdown()
			return err
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				g.reload()
				continue
			}
			g.log.Info("shutting down", "signal", sig.String())
			stopWatch()
			g.shutdown()
			return nil
		}
	}
}

func serve(srv *http.Server, ln net.Listener) error {
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// shutdown drains in-flight requests up to server.shutdown_timeout, then
// releases everything (close).
func (g *gateway) shutdown() {
	g.draining.Store(true)
	p := g.handler.Policy()
	ctx, cancel := context.WithTimeout(context.Background(), p.Server.ShutdownTimeout)
	defer cancel()
	if err := g.public.Shutdown(ctx); err != nil {
		g.log.Warn("shutdown deadline passed; closing remaining connections", "err", err)
		g.public.Close()
	}
	if g.admin != nil {
		actx, acancel := context.WithTimeout(context.Background(), time.Second)
		_ = g.admin.Shutdown(actx)
		acancel()
	}
	g.close()
	g.log.Info("stopped")
}

// reload reads the configuration again and swaps it in if it is valid. An
// invalid file is rejected with every problem logged; the old policy keeps
// serving. Counters survive a change of a limit's numbers because its ID
// does (see ratelimit.Limit.ID).
func (g *gateway) reload() error {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	p, files, err := loadPolicyFiles(g.path, g.environ)
	if err == nil {
		err = requireRoutes(p, g.allowEmpty)
	}
	if err == nil && g.certs != nil && p.Server.TLS != nil {
		// The certificates are re-read even when their paths are the
		// same: a reload is how an operator says "the files changed".
		if cerr := g.certs.Reload(p.Server.TLS); cerr != nil {
			err = fmt.Errorf("server.tls: %w", cerr)
		}
	}
	if err != nil {
		g.metrics.Reload(false)
		g.lastReload.Store(&reloadResult{At: time.Now(), OK: false, Error: err.Error()})
		g.log.Error("reload rejected; keeping the previous configuration", "config", g.path, "problems", problems(err))
		return err
	}
	if err := g.apply(p, g.path); err != nil {
		return err
	}
	g.liveFiles.Store(&files)
	return nil
}

// apply makes the valid policy p live (a reload, or a promoted candidate
// from source); the caller holds reloadMu.
func (g *gateway) apply(p *policy.Policy, source string) error {
	g.metrics.Reload(true)
	old := g.handler.Policy()
	for _, w := range p.Warnings {
		g.log.Warn(w)
	}
	if !sameStore(g.storeCfg, p.Store) {
		g.log.Warn("store settings changed; they take effect on restart (other changes applied now)")
	}
	if !policy.SameListener(old.Server, p.Server) || old.AdminToken != p.AdminToken || old.AccessLog != p.AccessLog ||
		old.Config.Admin.TopK != p.Config.Admin.TopK || !slices.Equal(old.AdminHosts, p.AdminHosts) {
		g.log.Warn("server, admin or access_log settings changed; they take effect on restart (other changes applied now)")
	}
	if err := g.handler.Swap(p); err != nil {
		g.lastReload.Store(&reloadResult{At: time.Now(), OK: false, Error: err.Error()})
		g.log.Error("reload rejected", "err", err)
		return err
	}
	if g.pacer != nil {
		g.pacer.Set(p.Server.GCMinHeap)
	}
	// A limit switched to shadow, loosened or removed must not keep
	// denying from the Redis store's deny cache.
	if dc, ok := g.store.(interface{ PurgeDenials() }); ok {
		dc.PurgeDenials()
	}
	// Removed limits leave the dashboard and /admin/top; the others keep
	// their figures.
	names := make([]string, len(p.Limits))
	for i, l := range p.Limits {
		names[i] = l.Name
	}
	g.top.Retain(names)
	// Leases belong to the limits they were taken for: those of a limit
	// reloaded away would stay counted until their windows end.
	g.flushLeases()
	g.lastReload.Store(&reloadResult{At: time.Now(), OK: true})
	g.log.Info("configuration reloaded", "config", source, "routes", len(p.Routes), "limits", len(p.Limits),
		"consumers", p.Consumers.Registry.Len())
	return nil
}

// sameStore reports whether two store settings need the same store object.
// Every field counts, the password included (a JSON comparison, as before,
// skipped it).
func sameStore(a, b policy.Store) bool { return reflect.DeepEqual(a, b) }

// adminMux serves the admin listener, every route behind admin.Guard
// (the probes and /metrics too: a rebound DNS name must not read them).
func (g *gateway) adminMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", g.readyz)
	// The admin token, when set, guards everything but the probes. It is
	// read at startup: changing it takes a restart.
	token := g.handler.Policy().AdminToken.Reveal()
	mux.Handle("GET /metrics", admin.RequireToken(token, g.otel.MetricsHandler()))
	mux.Handle("/admin/candidate", admin.RequireToken(token, g.cand))
	mux.Handle("/admin/candidate/promote", admin.RequireToken(token, g.cand))
	mux.Handle("/admin/", admin.Handler(admin.Options{
		Config:       func() any { return g.handler.Policy().Config },
		Store:        g.store,
		Policy:       g.handler.Policy,
		Reload:       g.reload,
		Token:        token,
		Logger:       g.log,
		Overrides:    g.overrideTable(),
		OverrideSync: g.adminOverrideSync(),
		Top:          g.top,
		Now:          g.now,
		Status:       g.uiStatus,
	}))
	debug := http.NewServeMux()
	debug.HandleFunc("/debug/pprof/", pprof.Index)
	debug.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	debug.HandleFunc("/debug/pprof/profile", pprof.Profile)
	debug.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	debug.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/debug/pprof/", admin.RequireToken(token, debug))
	return admin.Guard(g.handler.Policy().AdminHosts, mux)
}

// overrideTable is the override table of the store that counts: the Redis
// store's (under whatever wraps it), else the memory store's.
func (g *gateway) overrideTable() ratelimit.OverrideTable {
	if g.rr != nil {
		return g.rr.store
	}
	if t, ok := g.store.(ratelimit.OverrideTable); ok {
		return t
	}
	return nil
}

// adminOverrideSync is the override copy the admin API reads, nil when
// the store has no override table.
func (g *gateway) adminOverrideSync() admin.OverrideSync {
	if g.overrides == nil {
		return nil
	}
	return g.overrides
}

// readyz reports 200 when the gateway should receive traffic: not
// draining, a configuration loaded, and the store reachable.
func (g *gateway) readyz(w http.ResponseWriter, r *http.Request) {
	type status struct {
		Ready      bool          `json:"ready"`
		Draining   bool          `json:"draining"`
		Store      string        `json:"store"`
		StoreError string        `json:"store_error,omitempty"`
		LastReload *reloadResult `json:"last_reload"`
	}
	st := status{Ready: true, Draining: g.draining.Load(), Store: "ok", LastReload: g.lastReload.Load()}
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	if err := g.ready(ctx); err != nil {
		st.Store, st.StoreError = "unavailable", err.Error()
		// With on_error = "local" or "allow" the gateway still serves
		// correctly without a reachable store; only "deny" makes it
		// unready. A store that answers but refuses every decision is a
		// configuration error, which no waiting heals: unready always.
		if g.handler.Policy().Store.OnError == policy.OnErrorDeny || errors.Is(err, redisstore.ErrRefused) {
			st.Ready = false
		}
	}
	if st.Draining {
		st.Ready = false
	}
	w.Header().Set("Content-Type", "application/json")
	if !st.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(st)
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
