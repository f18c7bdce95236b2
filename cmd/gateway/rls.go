package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/listener"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
	"github.com/tollgate/gateway/rls"
	"github.com/tollgate/gateway/telemetry"
)

// rlsRuntime is the rate limit service: its gRPC server, listener and
// health.
type rlsRuntime struct {
	srv    *rls.Server
	grpc   *grpc.Server
	health *health.Server
	ln     net.Listener
	listen string
	// certs are the listener's certificates, nil for cleartext.
	certs *listener.Certs
	// stopWatch ends the health watch (watchRLSHealth).
	stopWatch context.CancelFunc
}

// rlsService is the service name the health service reports beside "".
const rlsService = "envoy.service.ratelimit.v3.RateLimitService"

// rlsHealthEvery is how often the health service's answer is brought up
// to date with the store's.
const rlsHealthEvery = time.Second

// watchRLSHealth keeps the health service's answer in step with what
// /readyz says of the store: NOT_SERVING while the store cannot decide and
// store.on_error is "deny" (every call would be answered UNAVAILABLE: a
// caller's health check should send it elsewhere), or the store refuses
// every decision; SERVING otherwise. It runs until ctx ends.
func (g *gateway) watchRLSHealth(ctx context.Context, hs *health.Server) {
	t := time.NewTicker(rlsHealthEvery)
	defer t.Stop()
	last := healthpb.HealthCheckResponse_SERVING
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := g.ready(cctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		st := healthpb.HealthCheckResponse_SERVING
		if err != nil && (g.handler.Policy().Store.OnError == policy.OnErrorDeny || errors.Is(err, redisstore.ErrRefused)) {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		if st != last {
			g.log.Warn("rate limit service health", "status", st.String(), "err", err)
			hs.SetServingStatus("", st)
			hs.SetServingStatus(rlsService, st)
			last = st
		}
	}
}

// rlsTop feeds the service's decisions to /admin/top and the dashboard:
// each descriptor is a client of its rule's limit, of kind "descriptor".
type rlsTop struct{ top telemetry.Top }

// ObserveCall implements rls.Observer.
func (o rlsTop) ObserveCall(now time.Time, hits []ratelimit.Hit, ds []ratelimit.Decision, descriptors []string, latency time.Duration, err error) {
	for i := range hits {
		ev := proxy.Event{Start: now, ClientKind: "descriptor", Client: descriptors[i], Hits: hits[i : i+1], Decisions: ds[i : i+1]}
		if i == 0 {
			ev.StoreLatency, ev.StoreErr = latency, err
		}
		o.top.Observe(&ev)
	}
}

// rlsAccessLog writes one access log line per call of the service.
type rlsAccessLog struct{ w *accesslog.Writer }

// LogCall implements rls.CallLogger.
func (l rlsAccessLog) LogCall(c *rls.Call) {
	req := c.Request
	call := accesslog.RLSCall{Domain: req.GetDomain(), HitsAddend: req.GetHitsAddend(), StoreLatency: c.StoreLatency,
		Descriptors: make([]accesslog.RLSDescriptor, len(req.GetDescriptors()))}
	for i, d := range req.GetDescriptors() {
		ld := &call.Descriptors[i]
		ld.Code = c.Codes[i]
		if a := d.GetHitsAddend(); a != nil {
			ld.HasAddend, ld.Addend = true, a.GetValue()
		}
		ld.Entries = make([]accesslog.RLSEntry, len(d.GetEntries()))
		// A rule applied (any code but no_limit): the configuration
		// names every key of the descriptor.
		named := ld.Code != "no_limit"
		for j, e := range d.GetEntries() {
			ld.Entries[j] = accesslog.RLSEntry{Key: e.GetKey(), Value: e.GetValue(), Matched: c.ByValue(i, j), Named: named}
		}
	}
	e := accesslog.Entry{Time: c.At, Latency: c.Latency, Status: 200, Outcome: "ok", Decision: "allowed", RLS: &call}
	if c.Overall == rlpb.RateLimitResponse_OVER_LIMIT {
		e.Status, e.Outcome, e.Decision = 429, "over_limit", "denied"
	}
	if c.StoreErr != nil {
		e.Outcome = "store_error"
	}
	call.Code = "ok"
	if e.Decision == "denied" {
		call.Code = "over_limit"
	}
	l.w.Log(&e)
}

// rlsSnapshot is what a reload swaps into the service.
func rlsSnapshot(r *policy.RLS) rls.Snapshot {
	if r == nil {
		return rls.Snapshot{}
	}
	return rls.Snapshot{Config: r.Config, Headers: r.Headers, DynamicMetadata: r.DynamicMetadata}
}

// openRLS binds the rate limit service's listener and builds its server
// for p's [rls] table; nothing when it has none.
func (g *gateway) openRLS(p *policy.Policy) error {
	if p.RLS == nil {
		return nil
	}
	onError := rls.ErrorLocal
	switch p.Store.OnError {
	case policy.OnErrorAllow:
		onError = rls.ErrorAllow
	case policy.OnErrorDeny:
		onError = rls.ErrorDeny
	}
	opts := rls.Options{Store: g.store, Local: g.local, OnError: onError, Timeout: p.Store.Timeout,
		Now: g.now, Logger: g.log, Meter: g.otel.Meter(), Observer: rlsTop{telemetry.Top{T: g.top}}}
	if g.accessLog != nil {
		opts.CallLog = rlsAccessLog{g.accessLog}
	}
	srv, err := rls.New(opts, rlsSnapshot(p.RLS))
	if err != nil {
		return fmt.Errorf("rls: %w", err)
	}
	ln, err := net.Listen("tcp", p.RLS.Listen)
	if err != nil {
		return fmt.Errorf("rls.listen: %w", err)
	}
	gopts := []grpc.ServerOption{grpc.MaxRecvMsgSize(rls.MaxRecvBytes), grpc.MaxConcurrentStreams(1024)}
	var certs *listener.Certs
	if p.RLS.TLS != nil {
		// The public listener's certificate handling: every handshake
		// takes the current set, so a reload needs no new listener.
		if certs, err = listener.Load(p.RLS.TLS); err != nil {
			ln.Close()
			return fmt.Errorf("rls.tls: %w", err)
		}
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(certs.TLSConfig())))
	}
	gs := grpc.NewServer(gopts...)
	rls.Register(gs, srv)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(rlsService, healthpb.HealthCheckResponse_SERVING)
	ctx, stop := context.WithCancel(context.Background())
	g.rls = &rlsRuntime{srv: srv, grpc: gs, health: hs, ln: ln, listen: p.RLS.Listen, certs: certs, stopWatch: stop}
	go g.watchRLSHealth(ctx, hs)
	return nil
}

// swapRLS makes a reloaded [rls] table live: its files and settings now,
// a new listen address only on restart.
func (g *gateway) swapRLS(p *policy.Policy) {
	if g.rls == nil {
		if p.RLS != nil {
			g.log.Warn("rls settings changed; the rate limit service starts on restart (other changes applied now)")
		}
		return
	}
	if p.RLS == nil || p.RLS.Listen != g.rls.listen {
		g.log.Warn("rls.listen changed; it takes effect on restart (other changes applied now)")
	}
	if g.rls.certs != nil && p.RLS != nil && p.RLS.TLS != nil {
		// Re-read even when the paths are the same: a reload is how an
		// operator says the files changed. A pair that does not load
		// keeps the one served.
		if err := g.rls.certs.Reload(p.RLS.TLS); err != nil {
			g.log.Error("rls.tls: keeping the certificates served", "err", err)
		}
	} else if (g.rls.certs != nil) != (p.RLS != nil && p.RLS.TLS != nil) {
		g.log.Warn("rls.tls turned on or off; it takes effect on restart (other changes applied now)")
	}
	g.rls.srv.Swap(rlsSnapshot(p.RLS))
}

// stopRLS stops the service: health NOT_SERVING, then the calls in
// progress finish within timeout, after which connections are closed.
func (g *gateway) stopRLS(timeout time.Duration) {
	if g.rls == nil {
		return
	}
	g.rls.stopWatch()
	g.rls.health.Shutdown()
	done := make(chan struct{})
	go func() { g.rls.grpc.GracefulStop(); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	select {
	case <-done:
	case <-ctx.Done():
		g.rls.grpc.Stop()
		<-done
	}
}
