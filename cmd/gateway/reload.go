package main

import (
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/tollgate/gateway/policy"
)

// reloadResult is the outcome of the latest reload, shown by /readyz.
type reloadResult struct {
	At    time.Time `json:"at"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
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
	for _, w := range p.Warnings {
		g.log.Warn(w)
	}
	if !sameStore(g.storeCfg, p.Store) {
		g.log.Warn("store settings changed; they take effect on restart (other changes applied now)")
	}
	if !g.started.same(restartOnlyOf(p)) {
		g.log.Warn("server, admin or access_log settings changed; they take effect on restart (other changes applied now)")
	}
	if !reflect.DeepEqual(g.startedUsage, p.Usage) {
		g.log.Warn("usage settings changed; they take effect on restart (the export keeps its aggregate; other changes applied now)")
	}
	set, err := g.keysFor(p)
	if err != nil {
		g.lastReload.Store(&reloadResult{At: time.Now(), OK: false, Error: err.Error()})
		g.log.Error("reload rejected", "err", err)
		return err
	}
	if err := g.handler.Swap(p); err != nil {
		g.dropKeys(set)
		g.lastReload.Store(&reloadResult{At: time.Now(), OK: false, Error: err.Error()})
		g.log.Error("reload rejected", "err", err)
		return err
	}
	g.useKeys(set)
	g.swapRLS(p)
	if g.usage != nil {
		g.usage.SetNotify(p.NotifyAt())
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
	g.top.Retain(append(names, p.RLSLimitNames()...))
	// Leases belong to the limits they were taken for: those of a limit
	// reloaded away would stay counted until their windows end.
	g.flushLeases()
	g.lastReload.Store(&reloadResult{At: time.Now(), OK: true})
	g.log.Info("configuration reloaded", "config", source, "routes", len(p.Routes), "limits", len(p.Limits),
		"consumers", p.Consumers.Registry.Len())
	return nil
}

// restartOnly are the settings of a policy that a reload does not apply:
// the listeners, the admin token, allowed hosts and top_k, the access log.
type restartOnly struct {
	server    policy.Server
	token     policy.Secret
	hosts     []string
	topK      int
	accessLog policy.AccessLog
}

func restartOnlyOf(p *policy.Policy) restartOnly {
	return restartOnly{server: p.Server, token: p.AdminToken, hosts: p.AdminHosts, topK: p.Config.Admin.TopK, accessLog: p.AccessLog}
}

// same reports whether r and o need no restart between them. A reload is
// compared with the settings the gateway started with, not with the
// previous reload: those are the ones in force, so every reload whose
// file still differs says so (an admin token rotated in its file after a
// leak is not taken until a restart, however many reloads follow), and
// one that puts the file back says nothing.
func (r restartOnly) same(o restartOnly) bool {
	return sameListener(r.server, o.server) && r.token == o.token && slices.Equal(r.hosts, o.hosts) &&
		r.topK == o.topK && r.accessLog == o.accessLog
}

// sameStore reports whether two store settings need the same store object.
// Every field counts, the password included (a JSON comparison, as before,
// skipped it).
func sameStore(a, b policy.Store) bool { return reflect.DeepEqual(a, b) }
