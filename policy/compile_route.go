package policy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
)

func buildRoute(c *config.RouteConfig, path string, e *problems) *Route {
	rt := &Route{Name: c.Name, StripPrefix: c.StripPrefix}
	if !validName(c.Name, true) {
		if c.Name == "" {
			e.add(path+".name", "is required")
		} else {
			e.add(path+".name", "invalid name %q (1..64 letters, digits, '-', '_' and '.')", c.Name)
		}
	}
	if c.Host != "" {
		rt.Host = strings.ToLower(strings.TrimSuffix(c.Host, "."))
		if !validHost(rt.Host) {
			e.add(path+".host", "invalid host %q (a name or address, no port, scheme or path)", c.Host)
		}
	}
	switch {
	case c.PathPrefix == "" || c.PathPrefix[0] != '/':
		e.add(path+".path_prefix", "must start with '/', got %q", c.PathPrefix)
	case strings.ContainsAny(c.PathPrefix, "?#"):
		e.add(path+".path_prefix", "must not contain '?' or '#', got %q", c.PathPrefix)
	default:
		p, err := normalPrefix(c.PathPrefix)
		if err != nil {
			e.add(path+".path_prefix", "%q: must not contain %s", c.PathPrefix, err.(*PathError).Reason)
			break
		}
		rt.PathPrefix = p
		rt.loose, rt.foldedPrefix = foldPrefix(p)
	}
	for i, m := range c.Methods {
		if !keys.IsToken(m) {
			e.add(fmt.Sprintf("%s.methods[%d]", path, i), "invalid method %q", m)
			continue
		}
		rt.Methods = append(rt.Methods, strings.ToUpper(m))
	}
	hasUpstream := c.Upstream != "" || len(c.Upstreams) > 0
	switch {
	case c.Upstream != "" && len(c.Upstreams) > 0:
		e.add(path, "set only one of upstream and upstreams")
	case hasUpstream && c.Respond != nil:
		e.add(path, "set only one of upstream (or upstreams) and respond")
	case !hasUpstream && c.Respond == nil:
		e.add(path, "set upstream, upstreams or respond")
	case hasUpstream:
		rt.Upstreams = buildUpstreams(c, path, e)
		if rt.Upstreams != nil {
			first := rt.Upstreams.Targets[0]
			rt.Upstream, rt.H2C = first.URL, first.H2C
		}
	case c.Respond.Quota:
		r := c.Respond
		if r.Status != 0 || r.Body != "" || r.ContentType != "" {
			e.add(path+".respond.quota", "a quota answer is JSON the gateway writes: drop status, body and content_type")
		}
		rt.Respond = &Respond{Status: 200, ContentType: "application/json", Quota: &Quota{}}
	default:
		r := *c.Respond
		if len(r.Routes) > 0 {
			e.add(path+".respond.routes", "applies only with quota = true")
		}
		if r.Status == 0 {
			r.Status = 200
		}
		if r.Status < 100 || r.Status > 599 {
			e.add(path+".respond.status", "must be in 100..599, got %d", r.Status)
		}
		if r.ContentType == "" {
			r.ContentType = "text/plain; charset=utf-8"
		}
		rt.Respond = &Respond{Status: r.Status, Body: r.Body, ContentType: r.ContentType,
			ContentTypeHeader:   []string{r.ContentType},
			ContentLengthHeader: []string{strconv.Itoa(len(r.Body))}}
	}
	rt.Upgrades = buildUpgrades(c.Upgrades, rt, path+".upgrades", e)
	rt.Timeout = duration(c.Timeout, path+".timeout", true, e)
	if c.IdleTimeout != "" {
		rt.IdleTimeout = duration(c.IdleTimeout, path+".idle_timeout", false, e)
	}
	return rt
}

// validHost reports whether h is a lower-case host name, IPv4 address or
// bracketed IPv6 address, without a port.
func validHost(h string) bool {
	if inner, ok := strings.CutPrefix(h, "["); ok {
		inner, ok = strings.CutSuffix(inner, "]")
		a, err := netip.ParseAddr(inner)
		return ok && err == nil && a.Is6()
	}
	return h != "" && !strings.ContainsAny(h, "/:?#@[]*% \t")
}

// shadows reports whether an earlier route with methods a wins every
// request that a later route with methods b (same host and prefix) could
// match: empty means all methods, and a listed method beats "all".
func shadows(a, b []string) bool {
	switch {
	case len(a) == 0:
		return len(b) == 0
	case len(b) == 0:
		return false
	}
	for _, y := range b {
		if !covers(a, y) {
			return false
		}
	}
	return true
}
