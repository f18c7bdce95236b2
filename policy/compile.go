package policy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/ratelimit"
)

// Validate reports every problem of c at once (errors.Join), each prefixed
// with its field path, e.g. `routes[2].limits[0]: unknown limit "serch"`.
// It reads no environment and no file: secrets are checked by Compile.
func (c *Config) Validate() error {
	_, errs := build(c)
	return errors.Join(errs...)
}

// Compile validates c and compiles it into a Policy, reading secrets from
// the environment (jwt hs256_secret_env, limits' exempt api_keys_env, the
// Redis password_env) through getenv and key files (rs256_public_key_file)
// through readFile. The error joins every problem with its field path.
func Compile(c Config, getenv func(string) string, readFile func(string) ([]byte, error)) (*Policy, error) {
	p, errs := build(&c)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var e errs_
	if c.Store.Backend == "redis" && c.Store.Redis.PasswordEnv != "" {
		p.Store.Redis.Password = getenv(c.Store.Redis.PasswordEnv)
		if p.Store.Redis.Password == "" {
			e.add("store.redis.password_env", "environment variable %s is empty or unset", c.Store.Redis.PasswordEnv)
		}
	}
	if c.Admin.TokenEnv != "" {
		p.AdminToken = getenv(c.Admin.TokenEnv)
		if p.AdminToken == "" {
			e.add("admin.token_env", "environment variable %s is empty or unset", c.Admin.TokenEnv)
		}
	}
	if c.AccessLog.SaltEnv != "" {
		p.AccessLog.Salt = getenv(c.AccessLog.SaltEnv)
	}
	kc := identityConfig(&c.Identity, nil)
	if j := c.Identity.JWT; j.Enabled() {
		switch {
		case j.HS256SecretEnv != "":
			secret := getenv(j.HS256SecretEnv)
			if secret == "" {
				e.add("identity.jwt.hs256_secret_env", "environment variable %s is empty or unset", j.HS256SecretEnv)
			}
			kc.JWT.HS256Secret = []byte(secret)
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
	if len(e) == 0 {
		ex, err := keys.NewExtractor(kc)
		if err != nil {
			e = append(e, err)
		}
		p.Identity = ex
	}
	for i, lc := range c.Limits {
		if lc.Exempt.APIKeysEnv == "" {
			continue
		}
		l := p.Limits[i]
		for _, k := range strings.Split(getenv(lc.Exempt.APIKeysEnv), ",") {
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

// errs_ collects problems with their field paths.
type errs_ []error

func (e *errs_) add(path, format string, args ...any) {
	*e = append(*e, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

// build checks c and compiles everything that needs no secret. The Policy
// it returns is complete except for Identity, Redis.Password and exempt
// API keys; it is meaningful only when no error is returned.
func build(c *Config) (*Policy, []error) {
	var e errs_
	p := &Policy{Config: *c, byName: make(map[string]*Limit, len(c.Limits))}
	p.Server = buildServer(&c.Server, &e)
	p.Store = buildStore(&c.Store, &e)
	identityConfig(&c.Identity, &e)
	p.Headers = buildStyles(c.Headers.Emit, &e)
	p.AccessLog = buildAccessLog(&c.AccessLog, &e)
	if c.Admin.TokenEnv != "" && !validEnvName(c.Admin.TokenEnv) {
		e.add("admin.token_env", "%q is not an environment variable name", c.Admin.TokenEnv)
	}

	for i := range c.Limits {
		l := buildLimit(&c.Limits[i], fmt.Sprintf("limits[%d]", i), &e)
		if name := c.Limits[i].Name; name != "" {
			if _, dup := p.byName[name]; dup {
				e.add(fmt.Sprintf("limits[%d].name", i), "duplicate limit name %q", name)
			} else {
				p.byName[name] = l
			}
		}
		p.Limits = append(p.Limits, l)
	}
	global := resolveLimits(c.Gateway.Limits, p.byName, "gateway.limits", &e)

	for i := range c.Routes {
		path := fmt.Sprintf("routes[%d]", i)
		rt := buildRoute(&c.Routes[i], path, &e)
		own := resolveLimits(c.Routes[i].Limits, p.byName, path+".limits", &e)
		rt.Limits = mergeLimits(global, own)
		rl := make([]*ratelimit.Limit, len(rt.Limits))
		for k, l := range rt.Limits {
			rl[k] = l.Limit
		}
		rt.RateLimitPolicy = headers.PolicyValue(rl)
		shadowed := false
		for j, prev := range p.Routes {
			if rt.Name != "" && prev.Name == rt.Name {
				e.add(path+".name", "duplicate route name %q (also routes[%d])", rt.Name, j)
			} else if !shadowed && rt.PathPrefix != "" && prev.Host == rt.Host && prev.PathPrefix == rt.PathPrefix && shadows(prev.Methods, rt.Methods) {
				e.add(path, "matches the same host, path_prefix and methods as routes[%d] (%q), so it would never be chosen", j, prev.Name)
				shadowed = true
			}
		}
		p.Routes = append(p.Routes, rt)
	}
	return p, e
}

func buildAccessLog(c *AccessLogConfig, e *errs_) AccessLog {
	a := AccessLog{Path: c.Path, Format: c.Format, RawClient: c.RawClient}
	switch c.Format {
	case "combined", "jsonl":
	default:
		e.add("access_log.format", "unknown format %q (want \"combined\" or \"jsonl\")", c.Format)
	}
	if c.SaltEnv != "" && !validEnvName(c.SaltEnv) {
		e.add("access_log.salt_env", "%q is not an environment variable name", c.SaltEnv)
	}
	a.FlushInterval = duration(c.FlushInterval, "access_log.flush_interval", true, e)
	return a
}

func buildServer(c *ServerConfig, e *errs_) Server {
	s := Server{Listen: c.Listen, AdminListen: c.AdminListen, MaxHeaderBytes: c.MaxHeaderBytes, WatchConfig: c.WatchConfig}
	checkAddr(c.Listen, "server.listen", false, e)
	checkAddr(c.AdminListen, "server.admin_listen", true, e)
	s.ReadHeaderTimeout = duration(c.ReadHeaderTimeout, "server.read_header_timeout", true, e)
	s.IdleTimeout = duration(c.IdleTimeout, "server.idle_timeout", false, e)
	s.ShutdownTimeout = duration(c.ShutdownTimeout, "server.shutdown_timeout", false, e)
	if c.MaxHeaderBytes < 1024 || c.MaxHeaderBytes > 16<<20 {
		e.add("server.max_header_bytes", "must be in 1024..16777216, got %d", c.MaxHeaderBytes)
	}
	if c.Listen != "" && c.Listen == c.AdminListen {
		e.add("server.admin_listen", "must differ from server.listen (%s)", c.Listen)
	}
	return s
}

func checkAddr(addr, path string, optional bool, e *errs_) {
	if addr == "" {
		if !optional {
			e.add(path, "is required")
		}
		return
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		e.add(path, "want host:port, got %q", addr)
	}
}

// duration parses a Go duration string; positive requires > 0, otherwise ≥ 0.
func duration(s, path string, positive bool, e *errs_) time.Duration {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		e.add(path, "invalid duration %q (want e.g. \"50ms\", \"5s\", \"1m\")", s)
	case d < 0 || positive && d == 0:
		if positive {
			e.add(path, "must be positive, got %s", s)
		} else {
			e.add(path, "must not be negative, got %s", s)
		}
	}
	return d
}

func buildStore(c *StoreConfig, e *errs_) Store {
	s := Store{Backend: c.Backend, Clock: c.Clock, MemoryMaxKeys: c.Memory.MaxKeys, RequireAtStartup: c.RequireAtStartup}
	switch c.Backend {
	case "memory", "redis":
	default:
		e.add("store.backend", "unknown backend %q (want memory or redis)", c.Backend)
	}
	switch c.OnError {
	case "local":
		s.OnError = OnErrorLocal
	case "allow":
		s.OnError = OnErrorAllow
	case "deny":
		s.OnError = OnErrorDeny
	default:
		e.add("store.on_error", "unknown value %q (want local, allow or deny)", c.OnError)
	}
	s.Timeout = duration(c.Timeout, "store.timeout", true, e)
	switch c.Clock {
	case "local":
	case "store":
		if c.Backend != "redis" {
			e.add("store.clock", `"store" needs backend = "redis"`)
		}
	default:
		e.add("store.clock", "unknown value %q (want local or store)", c.Clock)
	}
	if c.Memory.MaxKeys < 1 {
		e.add("store.memory.max_keys", "must be positive, got %d", c.Memory.MaxKeys)
	}
	r := &c.Redis
	s.Redis = RedisStore{URL: r.URL, Cluster: r.Cluster, SentinelMaster: r.Sentinel.Master,
		SentinelAddrs: r.Sentinel.Addrs, Prefix: r.Prefix, Username: r.Username}
	if c.Backend != "redis" {
		return s
	}
	set := 0
	for _, b := range []bool{r.URL != "", len(r.Cluster) > 0, r.Sentinel.Master != "" || len(r.Sentinel.Addrs) > 0} {
		if b {
			set++
		}
	}
	if set > 1 {
		e.add("store.redis", "set only one of url, cluster and sentinel")
	}
	if set == 0 {
		s.Redis.URL = DefaultRedisURL
	}
	if r.URL != "" {
		u, err := url.Parse(r.URL)
		switch {
		case err != nil:
			e.add("store.redis.url", "invalid URL: %v", errors.Unwrap(err))
		case u.Scheme != "redis" && u.Scheme != "rediss":
			e.add("store.redis.url", "scheme must be redis or rediss, got %q", u.Scheme)
		case u.Host == "":
			e.add("store.redis.url", "missing host")
		}
	}
	for i, a := range r.Cluster {
		checkAddr(a, fmt.Sprintf("store.redis.cluster[%d]", i), false, e)
	}
	if r.Sentinel.Master != "" || len(r.Sentinel.Addrs) > 0 {
		if r.Sentinel.Master == "" {
			e.add("store.redis.sentinel.master", "is required with sentinel addrs")
		}
		if len(r.Sentinel.Addrs) == 0 {
			e.add("store.redis.sentinel.addrs", "at least one address is required")
		}
		for i, a := range r.Sentinel.Addrs {
			checkAddr(a, fmt.Sprintf("store.redis.sentinel.addrs[%d]", i), false, e)
		}
	}
	if r.Prefix == "" {
		e.add("store.redis.prefix", "must not be empty (keys would share the database's namespace)")
	}
	if r.PasswordEnv != "" && !validEnvName(r.PasswordEnv) {
		e.add("store.redis.password_env", "invalid environment variable name %q", r.PasswordEnv)
	}
	return s
}

// identityConfig checks the [identity] table (when e is not nil) and
// returns the keys.Config it describes, without secrets.
func identityConfig(c *IdentityConfig, e *errs_) keys.Config {
	if e == nil {
		e = new(errs_)
	}
	kc := keys.Config{APIKeyHeader: c.APIKeyHeader, APIKeyQuery: c.APIKeyQuery, UserHeader: c.UserHeader,
		IPv6Prefix: c.IPv6Prefix, MaxValueLen: c.MaxValueLen}
	if len(c.Sources) == 0 {
		e.add("identity.sources", "at least one source is required (api_key, user, ip)")
	}
	for i, s := range c.Sources {
		src, err := keys.ParseSource(s)
		if err != nil {
			e.add(fmt.Sprintf("identity.sources[%d]", i), "%v", err)
			continue
		}
		for _, prev := range kc.Sources {
			if prev == src {
				e.add(fmt.Sprintf("identity.sources[%d]", i), "duplicate source %q", s)
			}
		}
		kc.Sources = append(kc.Sources, src)
	}
	if !validHeaderName(c.APIKeyHeader) {
		e.add("identity.api_key_header", "invalid header name %q", c.APIKeyHeader)
	}
	if c.UserHeader != "" {
		if !validHeaderName(c.UserHeader) {
			e.add("identity.user_header", "invalid header name %q", c.UserHeader)
		} else if len(c.TrustedProxies) == 0 {
			e.add("identity.user_header", "set, but trusted_proxies is empty, so it would never be believed")
		}
	}
	kc.TrustedProxies = prefixes(c.TrustedProxies, "identity.trusted_proxies", e)
	if c.IPv6Prefix < 1 || c.IPv6Prefix > 128 {
		e.add("identity.ipv6_prefix", "must be in 1..128, got %d", c.IPv6Prefix)
	}
	if c.MaxValueLen < 1 || c.MaxValueLen > 1<<16 {
		e.add("identity.max_value_len", "must be in 1..65536, got %d", c.MaxValueLen)
	}
	j := &c.JWT
	if j.Enabled() {
		kc.JWT = &keys.JWTConfig{Header: j.Header, Claim: j.Claim, Audience: j.Audience, Issuer: j.Issuer}
		if j.HS256SecretEnv != "" && j.RS256PublicKeyFile != "" {
			e.add("identity.jwt", "set only one of hs256_secret_env and rs256_public_key_file")
		}
		if j.HS256SecretEnv != "" && !validEnvName(j.HS256SecretEnv) {
			e.add("identity.jwt.hs256_secret_env", "invalid environment variable name %q", j.HS256SecretEnv)
		}
		if !validHeaderName(j.Header) {
			e.add("identity.jwt.header", "invalid header name %q", j.Header)
		}
		if j.Claim == "" {
			e.add("identity.jwt.claim", "must not be empty")
		}
		kc.JWT.Leeway = duration(j.Leeway, "identity.jwt.leeway", false, e)
	} else if j.Audience != "" || j.Issuer != "" {
		e.add("identity.jwt", "audience or issuer set, but neither hs256_secret_env nor rs256_public_key_file")
	}
	return kc
}

// prefixes parses CIDRs; a bare address is its own single-address prefix.
func prefixes(ss []string, path string, e *errs_) []netip.Prefix {
	var out []netip.Prefix
	for i, s := range ss {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				e.add(fmt.Sprintf("%s[%d]", path, i), "invalid CIDR %q", s)
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		a := p.Addr().WithZone("")
		if a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		} else {
			p = netip.PrefixFrom(a, p.Bits())
		}
		out = append(out, p.Masked())
	}
	return out
}

func buildStyles(emit []string, e *errs_) headers.Styles {
	styles := headers.Styles{}
	for i, s := range emit {
		st, err := headers.ParseStyle(s)
		if err != nil {
			e.add(fmt.Sprintf("headers.emit[%d]", i), "%v", err)
			continue
		}
		if styles.Has(st) {
			e.add(fmt.Sprintf("headers.emit[%d]", i), "duplicate style %q", s)
			continue
		}
		styles = append(styles, st)
	}
	return styles
}

func buildLimit(c *LimitConfig, path string, e *errs_) *Limit {
	n := len(*e)
	rl := &ratelimit.Limit{Name: c.Name, Burst: c.Burst, MaxInFlight: c.MaxInFlight}
	l := &Limit{Limit: rl, Cost: c.Cost}
	if !validName(c.Name, false) {
		if c.Name == "" {
			e.add(path+".name", "is required")
		} else {
			e.add(path+".name", "invalid name %q (1..64 letters, digits, '-' and '_')", c.Name)
		}
	}
	alg, err := ratelimit.ParseAlgorithm(c.Algorithm)
	if err != nil {
		e.add(path+".algorithm", "%v", err)
	}
	rl.Algorithm = alg
	for i, s := range c.Rates {
		r, err := ratelimit.ParseRate(s)
		if err != nil {
			e.add(fmt.Sprintf("%s.rates[%d]", path, i), "%v", err)
			continue
		}
		for _, prev := range rl.Rates {
			if prev.Window == r.Window {
				e.add(fmt.Sprintf("%s.rates[%d]", path, i), "window %s appears twice", r.Window)
			}
		}
		rl.Rates = append(rl.Rates, r)
	}
	switch c.Mode {
	case "enforce":
	case "shadow":
		rl.Shadow = true
	default:
		e.add(path+".mode", "unknown mode %q (want enforce or shadow)", c.Mode)
	}
	if c.Burst < 0 {
		e.add(path+".burst", "must be positive, got %d", c.Burst)
	}
	if c.MaxInFlight < 0 {
		e.add(path+".max_in_flight", "must be positive, got %d", c.MaxInFlight)
	}
	if c.Precision != "" {
		rl.Precision = duration(c.Precision, path+".precision", true, e)
	}
	for i, s := range c.By {
		part, err := keys.ParsePart(s)
		if err != nil {
			e.add(fmt.Sprintf("%s.by[%d]", path, i), "%v", err)
			continue
		}
		for _, prev := range l.By {
			if prev == part {
				e.add(fmt.Sprintf("%s.by[%d]", path, i), "duplicate key part %q", s)
			}
		}
		l.By = append(l.By, part)
	}
	switch c.OnMissing {
	case "shared", "":
	case "ip":
		l.OnMissing = OnMissingIP
	case "reject":
		l.OnMissing = OnMissingReject
	default:
		e.add(path+".on_missing", "unknown value %q (want shared, ip or reject)", c.OnMissing)
	}
	if l.OnMissing == OnMissingIP {
		seen := false
		for _, part := range l.By {
			switch part.Kind {
			case keys.PartAPIKey, keys.PartUser, keys.PartHeader:
				if !seen {
					l.ByIP = append(l.ByIP, keys.Part{Kind: keys.PartIP})
					seen = true
				}
			case keys.PartIP:
				if !seen {
					l.ByIP = append(l.ByIP, part)
					seen = true
				}
			default:
				l.ByIP = append(l.ByIP, part)
			}
		}
	}
	if c.Cost < 1 || c.Cost > ratelimit.MaxLimit {
		e.add(path+".cost", "must be in 1..2^53, got %d", c.Cost)
	}
	if c.CostHeader != "" {
		if !validHeaderName(c.CostHeader) {
			e.add(path+".cost_header", "invalid header name %q", c.CostHeader)
		}
		l.CostHeader = canonicalHeader(c.CostHeader)
	}
	l.ExemptIPs = prefixes(c.Exempt.IPs, path+".exempt.ips", e)
	if c.Exempt.APIKeysEnv != "" && !validEnvName(c.Exempt.APIKeysEnv) {
		e.add(path+".exempt.api_keys_env", "invalid environment variable name %q", c.Exempt.APIKeysEnv)
	}
	if len(*e) > n || rl.Algorithm == 0 {
		return l
	}
	// The field checks passed: let ratelimit judge the combination.
	if err := rl.Finish(); err != nil {
		e.add(path, "%v", err)
		return l
	}
	if rl.Algorithm == ratelimit.Concurrency {
		if c.Cost > rl.Capacity(0) {
			e.add(path+".cost", "%d exceeds max_in_flight %d, so every request would be denied", c.Cost, rl.MaxInFlight)
		}
		return l
	}
	for i := range rl.Rates {
		if capacity := rl.Capacity(i); c.Cost > capacity {
			e.add(path+".cost", "%d exceeds capacity %d of rate %q, so every request would be denied", c.Cost, capacity, c.Rates[i])
		}
	}
	return l
}

// resolveLimits maps limit names to compiled limits, reporting unknown and
// repeated names.
func resolveLimits(names []string, byName map[string]*Limit, path string, e *errs_) []*Limit {
	var out []*Limit
	for i, name := range names {
		l, ok := byName[name]
		if !ok {
			e.add(fmt.Sprintf("%s[%d]", path, i), "unknown limit %q", name)
			continue
		}
		dup := false
		for _, prev := range out {
			dup = dup || prev == l
		}
		if dup {
			e.add(fmt.Sprintf("%s[%d]", path, i), "limit %q listed twice", name)
			continue
		}
		out = append(out, l)
	}
	return out
}

// mergeLimits is global then own, without repeats.
func mergeLimits(global, own []*Limit) []*Limit {
	out := append(make([]*Limit, 0, len(global)+len(own)), global...)
	for _, l := range own {
		dup := false
		for _, g := range global {
			dup = dup || g == l
		}
		if !dup {
			out = append(out, l)
		}
	}
	return out
}

func buildRoute(c *RouteConfig, path string, e *errs_) *Route {
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
		rt.PathPrefix = CleanPath(c.PathPrefix)
	}
	for i, m := range c.Methods {
		if !isToken(m) {
			e.add(fmt.Sprintf("%s.methods[%d]", path, i), "invalid method %q", m)
			continue
		}
		rt.Methods = append(rt.Methods, strings.ToUpper(m))
	}
	switch {
	case c.Upstream != "" && c.Respond != nil:
		e.add(path, "set only one of upstream and respond")
	case c.Upstream == "" && c.Respond == nil:
		e.add(path, "set upstream or respond")
	case c.Upstream != "":
		u, err := url.Parse(c.Upstream)
		switch {
		case err != nil:
			e.add(path+".upstream", "invalid URL %q (want http://host:port or https://...)", c.Upstream)
		case u.Scheme != "http" && u.Scheme != "https":
			e.add(path+".upstream", "scheme must be http or https, got %q (want http://host:port or https://...)", c.Upstream)
		case u.Host == "":
			e.add(path+".upstream", "missing host in %q", c.Upstream)
		case u.RawQuery != "" || u.Fragment != "":
			e.add(path+".upstream", "must not have a query or fragment, got %q", c.Upstream)
		default:
			rt.Upstream = u
		}
	default:
		r := *c.Respond
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
	rt.Timeout = duration(c.Timeout, path+".timeout", true, e)
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
		if !contains(a, y) {
			return false
		}
	}
	return true
}

// validName reports whether s is 1..64 letters, digits, '-', '_' (and '.'
// when dot).
func validName(s string, dot bool) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || dot && c == '.') {
			return false
		}
	}
	return true
}

// isToken reports whether s is an RFC 9110 token (header names, methods).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

func validHeaderName(s string) bool { return isToken(s) }

func canonicalHeader(s string) string { return textproto.CanonicalMIMEHeaderKey(s) }

// validEnvName reports whether s is a portable environment variable name.
func validEnvName(s string) bool {
	if s == "" || '0' <= s[0] && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
