package policy

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/rls/envoyconf"
)

// RLS is the compiled [rls] table: Envoy's rate limit service.
type RLS struct {
	// Listen is the gRPC listener's address.
	Listen string
	// Headers adds the IETF RateLimit fields to every answer.
	Headers bool
	// DynamicMetadata fills every answer's dynamic_metadata.
	DynamicMetadata bool
	// TLS is the listener's TLS (rls.tls, the keys of server.tls); nil
	// for cleartext.
	TLS *TLS
	// Files are the envoyproxy/ratelimit files read, in the order read.
	Files []string
	// Config holds their domains and descriptors, compiled.
	Config *envoyconf.Config
	// limits are the rules' limits by name (RLSLimit).
	limits map[string]*ratelimit.Limit
}

// RLSLimit returns the limit of the rate limit service's rule whose full
// path is name (e.g. "edge.remote_address"), nil if there is none: the
// admin API's /admin/top reports those limits beside the routes'.
func (p *Policy) RLSLimit(name string) *ratelimit.Limit {
	if p == nil || p.RLS == nil {
		return nil
	}
	return p.RLS.limits[name]
}

// RLSLimitNames lists the names of the rate limit service's limits.
func (p *Policy) RLSLimitNames() []string {
	if p == nil || p.RLS == nil {
		return nil
	}
	out := p.RLS.Config.RequestLimitNames()
	for _, r := range p.RLS.Config.Rules() {
		if r.Limit != nil {
			out = append(out, r.Limit.Name)
		}
	}
	return out
}

// maxRLSPatterns bounds rls.envoy_config's entries; envoyconf.MaxFiles
// and MaxTotalBytes bound the files they name together.
const maxRLSPatterns = 64

// buildRLS checks the [rls] table without reading any file; nil when the
// table is not enabled.
func buildRLS(c *config.RLSConfig, srv Server, e *problems) *RLS {
	if c.Listen == "" {
		if len(c.EnvoyConfig) > 0 || c.Headers || c.DynamicMetadata || c.TLS.Enabled() {
			e.add("rls.listen", "is required when any other [rls] setting is set")
		}
		return nil
	}
	checkAddr(c.Listen, "rls.listen", false, e)
	if c.Listen == srv.Listen || c.Listen == srv.AdminListen {
		e.add("rls.listen", "must differ from server.listen and server.admin_listen (%s)", c.Listen)
	}
	if len(c.EnvoyConfig) == 0 {
		e.add("rls.envoy_config", "is required: the envoyproxy/ratelimit configuration files, e.g. [\"ratelimit/config/*.yaml\"]")
	}
	if len(c.EnvoyConfig) > maxRLSPatterns {
		e.add("rls.envoy_config", "%d entries, more than %d", len(c.EnvoyConfig), maxRLSPatterns)
	}
	for i, f := range c.EnvoyConfig {
		if strings.TrimSpace(f) == "" {
			e.add(fmt.Sprintf("rls.envoy_config[%d]", i), "is empty")
		} else if _, err := filepath.Match(f, ""); err != nil {
			e.add(fmt.Sprintf("rls.envoy_config[%d]", i), "bad pattern %q: %v", f, err)
		}
	}
	r := &RLS{Listen: c.Listen, Headers: c.Headers, DynamicMetadata: c.DynamicMetadata}
	if c.TLS.Enabled() {
		r.TLS = buildTLS(&c.TLS, "rls.tls", e)
	}
	return r
}

// compileRLS reads the files rls.envoy_config names through readFile (a
// pattern is expanded first; one that matches nothing is a problem, as a
// missing file is) and compiles them. Each problem names the entry and
// the file. On the Redis store (redis), a rule's sliding_window_log is
// bounded as a limit's is (checkRedisLog).
func compileRLS(r *RLS, c *config.RLSConfig, redis bool, readFile func(string) ([]byte, error), e *problems) {
	if r.TLS != nil {
		checkTLSFiles(&c.TLS, r.TLS, "rls.tls", readFile, e)
	}
	before := len(*e)
	var files []envoyconf.File
	total := 0
	seen := make(map[string]bool)
	for i, pattern := range c.EnvoyConfig {
		path := fmt.Sprintf("rls.envoy_config[%d]", i)
		names := []string{pattern}
		if strings.ContainsAny(pattern, `*?[\`) {
			var err error
			names, err = filepath.Glob(pattern)
			if err != nil || len(names) == 0 {
				e.add(path, "%q matches no file", pattern)
				continue
			}
		}
		for _, name := range names {
			if seen[name] {
				continue
			}
			seen[name] = true
			if len(files) >= envoyconf.MaxFiles {
				e.add(path, "more than %d files", envoyconf.MaxFiles)
				return
			}
			data, err := readFile(name)
			if err != nil {
				e.add(path, "%v", err)
				continue
			}
			if total += len(data); total > envoyconf.MaxTotalBytes {
				e.add(path, "more than %d bytes in all files", envoyconf.MaxTotalBytes)
				return
			}
			files = append(files, envoyconf.File{Name: name, Data: data})
			r.Files = append(r.Files, name)
		}
	}
	// The files that were read are checked even when others were not,
	// so one run names every problem.
	cfg, err := envoyconf.Load(files)
	for _, one := range flattenErr(err) {
		e.add("rls.envoy_config", "%v", one)
	}
	if cfg != nil && redis {
		for _, rule := range cfg.Rules() {
			if msg := redisLogProblem(rule.Limit); msg != "" {
				e.add("rls.envoy_config", "rule %q: %s", rule.Limit.Name, msg)
			}
		}
	}
	if len(*e) == before && cfg != nil {
		r.Config = cfg
		r.limits = make(map[string]*ratelimit.Limit, len(cfg.Rules()))
		for _, rule := range cfg.Rules() {
			// A rule's name is its path, "domain.key...": it holds a dot,
			// which no [[limits]] name may, so the two never meet in
			// /admin/top or the dashboard.
			if rule.Limit != nil {
				r.limits[rule.Limit.Name] = rule.Limit
			}
		}
		// Each domain's descriptors that carry their own limit are
		// reported under one name: a fixed window, its numbers the
		// request's (these stand for the family, and are never decided).
		for _, name := range cfg.RequestLimitNames() {
			l := &ratelimit.Limit{Name: name, Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{{Limit: 1, Window: time.Second}}, Scope: "rls"}
			if l.Finish() == nil {
				r.limits[name] = l
			}
		}
	}
}

// flattenErr returns the errors a Join holds, or err alone; none for nil.
func flattenErr(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
