package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"time"

	"github.com/tollgate/gateway/admin"
	"github.com/tollgate/gateway/jwks"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// checkAdminBound refuses an admin listener without a token (and without
// admin.insecure) that is bound beyond loopback. The policy allowed it by
// its address as written, and "localhost" is a name: the hosts file or a
// DNS search list may resolve it to an interface others reach. So the
// address the listener got is checked too.
func checkAdminBound(addr net.Addr, p *policy.Policy) error {
	if p.AdminToken.Reveal() != "" || p.Config.Admin.Insecure {
		return nil
	}
	if a, ok := addr.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap().IsLoopback() {
			return nil
		}
	}
	return fmt.Errorf("server.admin_listen: %q bound %s, which is not a loopback address, and the admin API has no token, so anyone who reaches the port could replace the configuration: set admin.token_env or admin.token_file, bind 127.0.0.1, or accept the risk with admin.insecure = true",
		p.Server.AdminListen, addr)
}

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
		Upstreams:    func() any { return map[string]any{"routes": g.upstreamsView()} },
		Adaptive:     g.adaptiveView,
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
// draining, a configuration loaded, the store reachable, with a JWKS some
// key fetched, and every forwarding route with at least one healthy
// target (a route with one upstream and no health check always has).
func (g *gateway) readyz(w http.ResponseWriter, r *http.Request) {
	type status struct {
		Ready      bool          `json:"ready"`
		Draining   bool          `json:"draining"`
		Store      string        `json:"store"`
		StoreError string        `json:"store_error,omitempty"`
		LastReload *reloadResult `json:"last_reload"`
		// JWKS is the key set's state, absent without one.
		JWKS *jwks.Status `json:"jwks,omitempty"`
		// Upstreams is "ok", or "unhealthy" when some forwarding route
		// has no healthy target: UnhealthyRoutes names the first ones,
		// UnhealthyRouteCount counts them all.
		Upstreams           string         `json:"upstreams"`
		UnhealthyRoutes     []unreadyRoute `json:"unhealthy_routes,omitempty"`
		UnhealthyRouteCount int            `json:"unhealthy_route_count,omitempty"`
	}
	st := status{Ready: true, Draining: g.draining.Load(), Store: "ok", LastReload: g.lastReload.Load(), Upstreams: "ok"}
	if ks, ok := g.jwksStatus(); ok {
		st.JWKS = &ks
		// Without a key every token is refused: a gateway that never got
		// one is not ready. One that keeps its last good keys through a
		// failing provider is (the error shows).
		if ks.Keys == 0 {
			st.Ready = false
		}
	}
	if st.UnhealthyRoutes, st.UnhealthyRouteCount = g.unreadyUpstreams(); st.UnhealthyRouteCount > 0 {
		st.Upstreams, st.Ready = "unhealthy", false
	}
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
