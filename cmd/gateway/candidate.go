package main

import (
	"log/slog"
	"path/filepath"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/candidate"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/redisstore"
	"github.com/tollgate/gateway/rls"
	"github.com/tollgate/gateway/rls/envoyconf"
)

// candidateManager wires the candidate configuration: posted bodies are
// validated like a reload, counted on a store of their own, promoted
// through the reload path.
func (g *gateway) candidateManager() *candidate.Manager {
	return candidate.NewManager(candidate.Options{
		Handler: g.handler,
		Compile: func(data []byte) (*policy.Policy, error) {
			// Files the candidate names are found beside the live one,
			// and must lie there unless the live configuration names
			// them: the caller may not read the gateway's file system.
			path := filepath.Join(filepath.Dir(g.path), "candidate.toml")
			var live map[string]bool
			if f := g.liveFiles.Load(); f != nil {
				live = *f
			}
			r := fileReader{guard: newFileGuard(g.path, live)}
			p, err := compileData(path, data, g.environ, r.ReadFile, liveAdmin(g.handler.Policy()))
			if err == nil {
				err = requireRoutes(p, g.allowEmpty)
			}
			if err == nil {
				g.bindLiveKeys(p)
			}
			return p, err
		},
		NewStore: g.candidateStore,
		// Clients appear as in the access log and /admin/top.
		Client: func(kind, value string) string {
			cur := g.handler.Policy()
			return accesslog.Options{RawClient: cur.AccessLog.RawClient, Salt: []byte(cur.AccessLog.Salt.Reveal()),
				IPv6Prefix: cur.Identity.IPv6Prefix()}.Client(kind, value)
		},
		RLS: g.rlsCandidate,
		Promote: func(p *policy.Policy) error {
			g.reloadMu.Lock()
			defer g.reloadMu.Unlock()
			return g.apply(p, "candidate")
		},
	})
}

// liveAdmin makes a candidate's configuration take the admin listener's
// settings (server.admin_listen and [admin]) of the live policy: a
// candidate does not use its own, so they must neither refuse it (an
// admin listener beyond loopback whose token only the live file names)
// nor warn about it, nor look changed when it is promoted.
func liveAdmin(live *policy.Policy) func(*config.Config) {
	return func(c *config.Config) {
		c.Server.AdminListen, c.Admin = live.Config.Server.AdminListen, live.Config.Admin
	}
}

// loadCandidate reads and validates the configuration at path
// (--candidate; "" for none) as a reload would, with the admin settings
// of the live policy.
func loadCandidate(path string, live *policy.Policy, environ []string, allowEmpty bool, log *slog.Logger) (*policy.Policy, error) {
	if path == "" {
		return nil, nil
	}
	data, err := readRegular(path)
	if err != nil {
		return nil, err
	}
	var r fileReader
	p, err := compileData(path, data, environ, r.ReadFile, liveAdmin(live))
	if err == nil {
		err = requireRoutes(p, allowEmpty)
	}
	if err != nil {
		return nil, err
	}
	for _, w := range p.Warnings {
		log.Warn("candidate: " + w)
	}
	return p, nil
}

// candidateStore returns a fresh store for a candidate's counters, on the
// live backend: a memory store of its own, or the live Redis under the
// prefix "<prefix>candidate:" (its keys expire like any counter's).
// Batched limits are decided exactly there: a candidate holds no leases.
func (g *gateway) candidateStore(p *policy.Policy) (ratelimit.Store, error) {
	live := g.handler.Policy().Store
	if g.rr == nil {
		return memstore.New(memstore.Options{MaxKeys: live.MemoryMaxKeys, MaxBytes: live.MemoryMaxBytes}), nil
	}
	return redisstore.New(g.rr.client, redisstore.Options{NewLaneClient: redis.NewClient, Prefix: live.Redis.Prefix + "candidate:", Clock: live.Clock,
		Timeout: live.Timeout, LeaseTTL: live.Redis.LeaseTTL, Coalesce: live.Redis.Coalesce})
}

// rlsCandidate runs the candidate p (nil: none) beside the rate limit
// service: its [rls] rules decide every call on st, and the two outcomes
// are recorded as a request's are (method "RLS", the domain as the path,
// the first denied descriptor as the client, the rules' paths as the
// limits). A gateway without [rls] has no calls to decide.
func (g *gateway) rlsCandidate(p *policy.Policy, st ratelimit.Store, record func(*proxy.CandidateOutcome)) {
	if g.rls == nil {
		return
	}
	if p == nil {
		g.rls.srv.SetCandidate(nil)
		return
	}
	var cfg *envoyconf.Config
	if p.RLS != nil {
		cfg = p.RLS.Config
	}
	g.rls.srv.SetCandidate(&rls.Candidate{Config: cfg, Store: st, Timeout: g.handler.Policy().Store.Timeout,
		Record: func(o *rls.CandidateOutcome) {
			out := proxy.CandidateOutcome{At: o.At, Method: "RLS", Path: o.Domain, LiveDenied: o.LiveDenied,
				CandidateDenied: o.CandidateDenied, Err: o.Err}
			if o.Descriptor != "" {
				out.Client, out.ClientKind = o.Descriptor, "descriptor"
			}
			record(&out)
		}})
}
