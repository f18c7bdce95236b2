package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tollgate/gateway/consumers"
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// Consumers is the compiled [consumers] table with its registry.
type Consumers struct {
	// File is the registry file; "" when no registry is configured (then
	// every other field is zero).
	File string
	// UnknownKey is what an API key no consumer owns means.
	UnknownKey keys.UnknownKey
	// JWTClaim and PlanClaim are the verified token's claims that name a
	// consumer and a plan ("" for none).
	JWTClaim, PlanClaim string
	// ForwardConsumer and ForwardPlan are the canonical names of the
	// request headers that carry the consumer and the plan upstream (""
	// for none).
	ForwardConsumer, ForwardPlan string
	// Registry holds the consumers; nil without a registry.
	Registry *consumers.Registry
	// Challenge is the WWW-Authenticate value of the 401 answer to an
	// unknown API key, built once.
	Challenge []string
}

// Enabled reports whether a registry is configured.
func (c *Consumers) Enabled() bool { return c.File != "" }

// buildPlans checks the [[plans]] entries and returns their names.
func buildPlans(ps []config.PlanConfig, e *problems) []string {
	var names []string
	for i, pc := range ps {
		path := fmt.Sprintf("plans[%d].name", i)
		switch {
		case pc.Name == "":
			e.add(path, "is required")
		case !validName(pc.Name, false):
			e.add(path, "invalid name %q (1..64 letters, digits, '-' and '_')", pc.Name)
		case strings.ToLower(pc.Name) != pc.Name:
			// plan_rates names plans by TOML key, which the decoder
			// reads case-insensitively: "Pro" could never be found.
			e.add(path, "invalid name %q: plan names are lower case", pc.Name)
		case slices.Contains(names, pc.Name):
			e.add(path, "duplicate plan name %q", pc.Name)
		}
		names = append(names, pc.Name)
	}
	return names
}

// buildConsumers checks the [consumers] settings (the registry file is
// read by Compile).
func buildConsumers(c *config.Config, e *problems) Consumers {
	cc := &c.Consumers
	out := Consumers{File: cc.File, JWTClaim: cc.JWTClaim, PlanClaim: cc.PlanClaim}
	switch cc.UnknownAPIKey {
	case "", "reject":
	case "anonymous":
		out.UnknownKey = keys.UnknownKeyAnonymous
	default:
		e.add("consumers.unknown_api_key", "unknown value %q (want reject or anonymous)", cc.UnknownAPIKey)
	}
	fh := cc.ForwardHeaders
	for _, h := range []struct{ path, name string }{
		{"consumers.forward_headers.consumer", fh.Consumer},
		{"consumers.forward_headers.plan", fh.Plan},
	} {
		if h.name != "" && !validHeaderName(h.name) {
			e.add(h.path, "invalid header name %q", h.name)
		}
	}
	if fh.Consumer != "" {
		out.ForwardConsumer = canonicalHeader(fh.Consumer)
	}
	if fh.Plan != "" {
		out.ForwardPlan = canonicalHeader(fh.Plan)
		if out.ForwardPlan == out.ForwardConsumer {
			e.add("consumers.forward_headers.plan", "same header as forward_headers.consumer")
		}
	}
	for _, h := range []string{out.ForwardConsumer, out.ForwardPlan} {
		if h != "" && (h == canonicalHeader(c.Identity.APIKeyHeader) || h == canonicalHeader(c.Identity.UserHeader)) {
			e.add("consumers.forward_headers", "%s is also an identity header", h)
		}
	}
	if cc.File == "" {
		if cc.UnknownAPIKey != "" || cc.JWTClaim != "" || cc.PlanClaim != "" || fh != (config.ForwardHeadersConfig{}) {
			e.add("consumers.file", "is required when any other [consumers] setting is set")
		}
		return Consumers{}
	}
	if (cc.JWTClaim != "" || cc.PlanClaim != "") && !c.Identity.JWT.Enabled() {
		e.add("consumers", "jwt_claim and plan_claim read verified tokens: configure [identity.jwt]")
	}
	out.Challenge = []string{`ApiKey header="` + c.Identity.APIKeyHeader + `"`}
	if cc.PlanClaim != "" && len(c.Plans) == 0 {
		e.add("consumers.plan_claim", "set, but no [[plans]] are configured")
	}
	return out
}

// compileRegistry reads and compiles the registry file, builds the
// variants of the consumers with rates of their own and resolves the
// limits' exempt consumers. Problems carry the file's name and field
// path.
func compileRegistry(p *Policy, c *config.Config, getenv func(string) string, readFile func(string) ([]byte, error), e *problems) {
	cc := &p.Consumers
	data, err := readFile(cc.File)
	if err != nil {
		e.add("consumers.file", "%v", err)
		return
	}
	f, err := consumers.Parse(cc.File, data)
	if err != nil {
		*e = append(*e, err)
		return
	}
	names := make([]string, len(p.Limits))
	for i, l := range p.Limits {
		names[i] = l.Name
	}
	reg, err := consumers.Compile(cc.File, f, consumers.Options{Plans: p.Plans, Limits: names, Getenv: getenv, ReadFile: readFile})
	if err != nil {
		*e = append(*e, err)
		return
	}
	for _, co := range reg.Consumers() {
		for name, rates := range co.Rates {
			l := p.byName[name]
			if l == nil || l.ID == "" {
				continue
			}
			v := variantOf(l, rates, co.Path+".rates."+name, e)
			if v == nil {
				continue
			}
			if l.custom == nil {
				l.custom = make(map[*keys.Consumer]*ratelimit.Limit)
			}
			l.custom[&co.Consumer] = v
		}
	}
	for i, lc := range c.Limits {
		for k, name := range lc.Exempt.Consumers {
			if reg.Consumer(name) == nil {
				e.add(fmt.Sprintf("limits[%d].exempt.consumers[%d]", i, k), "unknown consumer %q (not in %s)", name, cc.File)
				continue
			}
			l := p.Limits[i]
			if l.exemptConsumers == nil {
				l.exemptConsumers = make(map[string]struct{})
			}
			l.exemptConsumers[name] = struct{}{}
		}
	}
	cc.Registry = reg
}
