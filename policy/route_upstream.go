package policy

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/upstream"
)

// Bounds of a route's upstream settings: a configuration beyond them is a
// mistake, and each costs memory, probes or retries.
const (
	maxTargets        = 1024
	maxWeight         = 1000
	maxRetries        = 10
	maxRetryBodyBytes = 16 << 20
	maxHealthCount    = 100
)

// buildUpstreams compiles a route's upstream or upstreams and the settings
// of balancing, health and retries into a Spec; nil (with problems in e)
// when they do not compile.
func buildUpstreams(c *config.RouteConfig, path string, e *problems) *upstream.Spec {
	before := len(*e)
	s := &upstream.Spec{}
	if c.Upstream != "" {
		if u, h2c, ok := targetURL(c.Upstream, path+".upstream", e); ok {
			s.Targets = append(s.Targets, upstream.TargetSpec{URL: u, H2C: h2c, Weight: 1})
		}
	}
	if len(c.Upstreams) > maxTargets {
		e.add(path+".upstreams", "at most %d targets, got %d", maxTargets, len(c.Upstreams))
	}
	seen := map[string]bool{}
	for i, t := range c.Upstreams {
		if i >= maxTargets {
			break
		}
		p := fmt.Sprintf("%s.upstreams[%d]", path, i)
		u, h2c, ok := targetURL(t.URL, p+".url", e)
		if t.Weight < 1 || t.Weight > maxWeight {
			e.add(p+".weight", "must be in 1..%d, got %d", maxWeight, t.Weight)
		}
		if !ok {
			continue
		}
		if k := u.String(); seen[k] {
			e.add(p+".url", "%q is listed twice (give it a weight instead)", t.URL)
		} else {
			seen[k] = true
		}
		s.Targets = append(s.Targets, upstream.TargetSpec{URL: u, H2C: h2c, Weight: t.Weight})
	}
	switch c.Balance {
	case "round_robin", "":
		s.Balance = upstream.RoundRobin
	case "least_request":
		s.Balance = upstream.LeastRequest
	case "hash":
		s.Balance = upstream.Hash
	default:
		e.add(path+".balance", "unknown value %q (want %s)", c.Balance, strings.Join(config.BalanceNames(), ", "))
	}
	switch on := c.HashOn; {
	case on == "client" || on == "":
	case strings.HasPrefix(on, "header:"):
		name := strings.TrimPrefix(on, "header:")
		if !keys.IsToken(name) {
			e.add(path+".hash_on", "invalid header name %q", name)
			break
		}
		s.HashHeader = http.CanonicalHeaderKey(name)
	default:
		e.add(path+".hash_on", "unknown value %q (want \"client\" or \"header:<Name>\")", on)
	}
	if hc := c.HealthCheck; hc != nil {
		s.Health = buildHealthCheck(hc, path+".health_check", e)
	}
	o := c.OutlierDetection
	if o.ConsecutiveFailures < 0 || o.ConsecutiveFailures > 1000 {
		e.add(path+".outlier_detection.consecutive_failures", "must be in 0..1000, got %d", o.ConsecutiveFailures)
	}
	s.Outlier = upstream.Outlier{ConsecutiveFailures: o.ConsecutiveFailures,
		BaseEjection: duration(o.BaseEjection, path+".outlier_detection.base_ejection", true, e),
		MaxEjection:  duration(o.MaxEjection, path+".outlier_detection.max_ejection", true, e)}
	if s.Outlier.MaxEjection < s.Outlier.BaseEjection {
		e.add(path+".outlier_detection.max_ejection", "must not be shorter than base_ejection (%s)", o.BaseEjection)
	}
	if c.Retries < 0 || c.Retries > maxRetries {
		e.add(path+".retries", "must be in 0..%d, got %d", maxRetries, c.Retries)
	}
	s.Retries = c.Retries
	if c.RetryBodyBytes < 0 || c.RetryBodyBytes > maxRetryBodyBytes {
		e.add(path+".retry_body_bytes", "must be in 0..%d, got %d", maxRetryBodyBytes, c.RetryBodyBytes)
	}
	s.RetryBodyBytes = c.RetryBodyBytes
	b := c.RetryBudget
	if b.Percent < 0 || b.Percent > 100 {
		e.add(path+".retry_budget.percent", "must be in 0..100, got %d", b.Percent)
	}
	if b.MinRetries < 0 || b.MinRetries > 1000 {
		e.add(path+".retry_budget.min_retries", "must be in 0..1000, got %d", b.MinRetries)
	}
	s.Budget = upstream.RetryBudget{Percent: b.Percent, MinRetries: b.MinRetries,
		Window: duration(b.Window, path+".retry_budget.window", true, e)}
	s.ResolveInterval = duration(c.ResolveInterval, path+".resolve_interval", false, e)
	if s.ResolveInterval > 0 && s.ResolveInterval < minResolveInterval {
		e.add(path+".resolve_interval", "must be \"0s\" (resolve once) or at least %s, got %s", minResolveInterval, c.ResolveInterval)
	}
	if len(*e) > before || len(s.Targets) == 0 {
		return nil
	}
	return s
}

// minResolveInterval keeps a configuration from resolving its names in a
// loop.
const minResolveInterval = time.Second

// targetURL parses one upstream URL: http, https or h2c (returned as http
// with h2c set), a host, no query or fragment.
func targetURL(raw, path string, e *problems) (*url.URL, bool, bool) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		e.add(path, "invalid URL %q (want http://host:port or https://...)", raw)
	case u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "h2c":
		e.add(path, "scheme must be http or https, got %q (want http://host:port or https://..., or h2c://host:port for cleartext HTTP/2)", raw)
	case u.Host == "":
		e.add(path, "missing host in %q", raw)
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		e.add(path, "must not have a query or fragment, got %q", raw)
	case u.User != nil:
		e.add(path, "must not carry user information, got %q", raw)
	default:
		h2c := u.Scheme == "h2c"
		if h2c {
			u.Scheme = "http"
		}
		return u, h2c, true
	}
	return nil, false, false
}

// buildHealthCheck compiles a route's health_check table, its unset keys
// defaulted.
func buildHealthCheck(c *config.HealthCheckConfig, path string, e *problems) *upstream.HealthCheck {
	hc := *c
	if hc.Path == "" {
		hc.Path = "/healthz"
	}
	if hc.Interval == "" {
		hc.Interval = "5s"
	}
	if hc.Timeout == "" {
		hc.Timeout = "1s"
	}
	if hc.UnhealthyAfter == 0 {
		hc.UnhealthyAfter = 2
	}
	if hc.HealthyAfter == 0 {
		hc.HealthyAfter = 2
	}
	h := &upstream.HealthCheck{Path: hc.Path, UnhealthyAfter: hc.UnhealthyAfter, HealthyAfter: hc.HealthyAfter,
		Interval: duration(hc.Interval, path+".interval", true, e),
		Timeout:  duration(hc.Timeout, path+".timeout", true, e)}
	if !strings.HasPrefix(hc.Path, "/") || !probePath(hc.Path) || len(hc.Path) > 1024 {
		e.add(path+".path", "must be a path starting with '/' (no spaces, control bytes or '#', at most 1024 bytes), got %q", hc.Path)
	}
	if h.Interval > 0 && h.Interval < minHealthInterval {
		e.add(path+".interval", "must be at least %s, got %s", minHealthInterval, hc.Interval)
	}
	if h.Timeout > h.Interval && h.Interval > 0 {
		e.add(path+".timeout", "must not be longer than interval (%s)", hc.Interval)
	}
	for _, n := range []struct {
		key string
		v   int
	}{{"unhealthy_after", hc.UnhealthyAfter}, {"healthy_after", hc.HealthyAfter}} {
		if n.v < 1 || n.v > maxHealthCount {
			e.add(path+"."+n.key, "must be in 1..%d, got %d", maxHealthCount, n.v)
		}
	}
	return h
}

// probePath reports whether a health check path can be sent as written:
// no space, no control byte (DEL included) and no '#'. The plain-HTTP
// probe writes the path into its request line as it is, and a target
// answers 400 to a request line holding a control byte: every probe
// would fail and every target go out of service.
func probePath(p string) bool {
	for i := 0; i < len(p); i++ {
		if c := p[i]; c <= ' ' || c == 0x7f || c == '#' {
			return false
		}
	}
	return true
}

// minHealthInterval keeps probes from flooding the targets.
const minHealthInterval = 100 * time.Millisecond
