package policy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// validate reports every problem of c at once (errors.Join), each prefixed
// with its field path, e.g. `routes[2].limits[0]: unknown limit "serch"`.
// It reads no environment and no file: secrets are checked by Compile.
func validate(c *config.Config) error {
	_, errs := build(c)
	return errors.Join(errs...)
}

// Compile validates c and compiles it into a Policy, reading secrets from
// the environment (the `*_env` keys) through getenv and from files (the
// `*_file` keys, rs256_public_key_file, server.tls's certificates, keys and
// client CAs) through readFile. The error joins
// every problem with its field path.
func Compile(c config.Config, getenv func(string) string, readFile func(string) ([]byte, error)) (*Policy, error) {
	p, errs := build(&c)
	if len(errs) > 0 {
		if p.Consumers.Enabled() {
			// The registry's problems too, in the same run.
			var e problems
			compileRegistry(p, &c, getenv, readFile, &e)
			errs = append(errs, e...)
		}
		return nil, errors.Join(errs...)
	}
	var e problems
	if c.Store.Backend == "redis" {
		p.Store.Redis.Password = Secret(passwordSource(c.Store.Redis).read(getenv, readFile, &e))
	}
	p.AdminToken = Secret(tokenSource(c.Admin).read(getenv, readFile, &e))
	checkAdminToken(tokenSource(c.Admin), p.AdminToken.Reveal(), &e)
	if p.Server.TLS != nil {
		checkTLSFiles(&c.Server.TLS, p.Server.TLS, "server.tls", readFile, &e)
	}
	p.AccessLog.Salt = Secret(saltSource(c.AccessLog).read(getenv, readFile, &e))
	kc := p.identity
	if j := c.Identity.JWT; j.Enabled() {
		switch hs := hs256Source(j); {
		case hs.set():
			kc.JWT.HS256Secret = []byte(hs.read(getenv, readFile, &e))
		case j.JWKSURL != "" || j.OIDCIssuer != "":
			// The keys are fetched by whoever serves the policy.
		default:
			pem, err := readFile(j.RS256PublicKeyFile)
			if err != nil {
				e.add("identity.jwt.rs256_public_key_file", "%v", err)
				break
			}
			kc.JWT.RS256Key, err = keys.LoadRSAPublicKey(pem)
			if err != nil {
				e.add("identity.jwt.rs256_public_key_file", "%s: %v", j.RS256PublicKeyFile, err)
			}
		}
	}
	if p.Consumers.Enabled() {
		compileRegistry(p, &c, getenv, readFile, &e)
		if p.Consumers.Registry != nil {
			kc.Consumers = &keys.ConsumerConfig{Directory: p.Consumers.Registry, UnknownKey: p.Consumers.UnknownKey,
				JWTClaim: p.Consumers.JWTClaim, PlanClaim: p.Consumers.PlanClaim, Plans: p.Plans}
		}
	}
	if p.RLS != nil {
		compileRLS(p.RLS, &c.RLS, p.Store.Backend == BackendRedis, readFile, &e)
	}
	if len(e) == 0 {
		ex, err := keys.NewExtractor(kc)
		if err != nil {
			e = append(e, err)
		}
		p.Identity = ex
	}
	for i, lc := range c.Limits {
		src := apiKeysSource(lc.Exempt, fmt.Sprintf("limits[%d]", i))
		if !src.set() {
			continue
		}
		l := p.Limits[i]
		list := strings.NewReplacer("\r\n", ",", "\n", ",").Replace(src.read(getenv, readFile, &e))
		for _, k := range strings.Split(list, ",") {
			if k = strings.TrimSpace(k); k != "" {
				if l.exemptKeys == nil {
					l.exemptKeys = make(map[[32]byte]struct{})
				}
				l.exemptKeys[keys.HashAPIKey(k)] = struct{}{}
			}
		}
	}
	if len(e) > 0 {
		return nil, errors.Join(e...)
	}
	return p, nil
}

// build checks c and compiles everything that needs no secret. The Policy
// it returns is complete except for Identity, Redis.Password and exempt
// API keys; it is meaningful only when no error is returned.
func build(c *config.Config) (*Policy, []error) {
	var e problems
	p := &Policy{Config: *c, byName: make(map[string]*Limit, len(c.Limits))}
	p.Server = buildServer(&c.Server, &e)
	checkMTLS(c, p.Server, &e)
	p.Store = buildStore(&c.Store, &e)
	p.identity, p.JWKS = identityConfig(&c.Identity, &e)
	p.Warnings = append(p.Warnings, p.identity.Warnings()...)
	p.Headers = buildStyles(c.Headers.Emit, &e)
	p.AccessLog = buildAccessLog(&c.AccessLog, &e)
	p.AdminHosts = buildAdmin(c, p, &e)
	p.Plans = buildPlans(c.Plans, &e)
	p.Consumers = buildConsumers(c, &e)
	p.RLS = buildRLS(&c.RLS, p.Server, &e)
	p.Usage = buildUsage(&c.Usage, &e)

	for i := range c.Limits {
		path := fmt.Sprintf("limits[%d]", i)
		l := buildLimit(&c.Limits[i], path, &e)
		if p.Store.Backend == BackendRedis {
			l.redisLog = true
			if l.ID != "" {
				if msg := l.checkRedisLog(l.Limit); msg != "" {
					e.add(path+".rates", "%s", msg)
				}
			}
		}
		buildPlanRates(l, &c.Limits[i], p.Plans, path, &e)
		buildNotifyAt(l, c.Limits[i].NotifyAt, p.Usage, path, &e)
		if !p.Consumers.Enabled() {
			if len(c.Limits[i].Exempt.Consumers) > 0 {
				e.add(path+".exempt.consumers", "set, but no [consumers] file is configured")
			}
			for k, part := range l.By {
				if part.Kind == keys.PartConsumer {
					e.add(fmt.Sprintf("%s.by[%d]", path, k), "key part consumer needs a [consumers] file")
				}
			}
		}
		if name := c.Limits[i].Name; name != "" {
			if _, dup := p.byName[name]; dup {
				e.add(fmt.Sprintf("limits[%d].name", i), "duplicate limit name %q", name)
			} else {
				p.byName[name] = l
			}
		}
		p.Limits = append(p.Limits, l)
		p.noteExtras(l) // limit_rollout.go
	}
	p.Warnings = append(p.Warnings, quotaWarnings(p)...)
	p.Warnings = append(p.Warnings, penaltyWarnings(p)...)
	global := resolveLimits(c.Gateway.Limits, p.byName, "gateway.limits", &e)

	// Earlier routes by name and by host and loose path prefix, so that
	// the duplicate and shadow checks look at the few that can match
	// rather than at every earlier route (quadratic in a large table).
	byRouteName := make(map[string]int, len(c.Routes))
	byPrefix := make(map[string][]int, len(c.Routes))
	for i := range c.Routes {
		path := fmt.Sprintf("routes[%d]", i)
		rt := buildRoute(&c.Routes[i], path, &e)
		buildRouteMessages(rt, &c.Routes[i], c, path, &e)
		own := resolveLimits(c.Routes[i].Limits, p.byName, path+".limits", &e)
		rt.Limits, rt.Adaptive = splitAdaptive(mergeLimits(global, own))
		rl := make([]*ratelimit.Limit, len(rt.Limits))
		for k, l := range rt.Limits {
			rl[k] = l.Limit
		}
		rt.RateLimitPolicy = headers.PolicyValue(rl)
		buildPlanPolicies(rt, len(p.Plans))
		rt.quotaPolicy = newPeriodPolicy(rl)
		dup := -1
		if j, ok := byRouteName[rt.Name]; ok && rt.Name != "" {
			dup = j
			e.add(path+".name", "duplicate route name %q (also routes[%d])", rt.Name, j)
		} else if rt.Name != "" {
			byRouteName[rt.Name] = i
		}
		if rt.PathPrefix != "" {
			k := rt.Host + "\x00" + looseKey(rt.PathPrefix)
			for _, j := range byPrefix[k] {
				if prev := p.Routes[j]; j != dup && shadows(prev.Methods, rt.Methods) {
					e.add(path, "matches the same host, path_prefix and methods as routes[%d] (%q), so it would never be chosen", j, prev.Name)
					break
				}
			}
			byPrefix[k] = append(byPrefix[k], i)
		}
		p.Routes = append(p.Routes, rt)
	}
	compilePriorities(p, c, &e) // compile_adaptive.go
	for i, rt := range p.Routes {
		if rt.Respond != nil && rt.Respond.Quota != nil {
			resolveQuota(rt.Respond.Quota, c.Routes[i].Respond.Routes, p.Routes, fmt.Sprintf("routes[%d].respond.routes", i), &e)
			if len(rt.Limits) == 0 {
				p.Warnings = append(p.Warnings, fmt.Sprintf("routes[%d]: quota route %q has no limit, so any client may make it read the store as often as it likes; give it one (limits = [...])", i, rt.Name))
			}
		}
	}
	return p, e
}
