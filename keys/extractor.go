package keys

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"time"
)

// Config configures an Extractor. The zero value is usable: every zero
// field means the default noted beside it.
type Config struct {
	// Sources are tried in order; the first that yields a value is the
	// client. Default: user, api_key, ip (DefaultSources): a verified
	// identity comes before one any client can make up. When none yields (ip left out),
	// the client is the IP all the same: never empty, never shared by every
	// anonymous client.
	Sources []Source
	// APIKeyHeader carries the API key; default DefaultAPIKeyHeader. Only its first
	// value is read, with surrounding spaces trimmed (as for UserHeader).
	APIKeyHeader string
	// APIKeyQuery names a query parameter that carries the API key when the
	// header is absent; "" (the default) disables it.
	APIKeyQuery string
	// UserHeader names a header that carries the user; "" (the default)
	// disables it. It is believed only when the immediate peer is in
	// TrustedProxies.
	UserHeader string
	// TrustedProxies are the peers whose X-Forwarded-For (and UserHeader)
	// are believed. Default: none.
	TrustedProxies []netip.Prefix
	// IPv6Prefix is the number of leading bits of an IPv6 client address
	// that keys keep (1..128); default 64. IPv4 clients, including
	// IPv4-mapped IPv6 addresses (unmapped first), are keyed per address.
	IPv6Prefix int
	// MaxValueLen bounds identity values (API key, user); a longer value is
	// not an identity. Default 1024.
	MaxValueLen int
	// JWT, when not nil, makes the claim of a verified bearer token a user
	// (when UserHeader yields none).
	JWT *JWTConfig
	// Consumers, when not nil, resolves API keys (and verified tokens) to
	// registered consumers; nil keeps every API key a client of its own.
	Consumers *ConsumerConfig
}

// Extractor resolves request identities. It is immutable after NewExtractor
// and safe for concurrent use.
type Extractor struct {
	sources     []Source
	apiHeader   string
	apiQuery    string
	userHeader  string
	trusted     []netip.Prefix
	v6bits      int
	maxValueLen int
	jwt         *jwtVerifier
	consumers   *ConsumerConfig
	keys        *keyCache // Key's recent keys
}

// Check reports every problem of c that does not involve key material,
// each prefixed with its field ("api_key_header: invalid header name
// ..."). NewExtractor runs it; a configuration layer that validates before
// it has the secrets runs it too, so that these rules live in one place.
// A zero field is its default, never a problem.
func (c Config) Check() []error {
	var errs []error
	seen := map[Source]bool{}
	for i, s := range c.Sources {
		if s < SourceAPIKey || s > SourceMTLS || s == SourceRemoteAddr {
			errs = append(errs, fmt.Errorf("sources[%d]: invalid source %s", i, s))
		} else if seen[s] {
			errs = append(errs, fmt.Errorf("sources[%d]: duplicate source %s", i, s))
		}
		seen[s] = true
	}
	if c.APIKeyHeader != "" && !IsToken(c.APIKeyHeader) {
		errs = append(errs, fmt.Errorf("api_key_header: invalid header name %q", c.APIKeyHeader))
	}
	if c.UserHeader != "" && !IsToken(c.UserHeader) {
		errs = append(errs, fmt.Errorf("user_header: invalid header name %q", c.UserHeader))
	}
	trusted := 0
	for i, p := range c.TrustedProxies {
		if !p.IsValid() {
			errs = append(errs, fmt.Errorf("trusted_proxies[%d]: invalid prefix", i))
			continue
		}
		trusted++
	}
	if c.UserHeader != "" && trusted == 0 {
		errs = append(errs, errors.New("user_header: set, but trusted_proxies is empty, so it would never be believed"))
	}
	if c.IPv6Prefix < 0 || c.IPv6Prefix > 128 {
		errs = append(errs, fmt.Errorf("ipv6_prefix: must be in 1..128, got %d", c.IPv6Prefix))
	}
	if c.MaxValueLen < 0 || c.MaxValueLen > MaxValueLen {
		errs = append(errs, fmt.Errorf("max_value_len: must be in 1..%d, got %d", MaxValueLen, c.MaxValueLen))
	}
	if j := c.JWT; j != nil {
		if j.Header != "" && !IsToken(j.Header) {
			errs = append(errs, fmt.Errorf("jwt.header: invalid header name %q", j.Header))
		}
		if j.MaxTokenLen < 0 {
			errs = append(errs, fmt.Errorf("jwt.max_token_len: must be > 0, got %d", j.MaxTokenLen))
		}
		if j.Leeway < 0 {
			errs = append(errs, fmt.Errorf("jwt.leeway: must be ≥ 0, got %s", j.Leeway))
		}
	}
	return errs
}

// DefaultSources is the identity order when none is configured: user
// (believed only from a trusted proxy's header or a verified JWT), then the
// API key (any string a client sends), then the client IP. Trust decides the
// order: with the API key first, a user with a verified identity escapes
// every per-user limit by adding a made-up X-API-Key.
func DefaultSources() []Source { return []Source{SourceUser, SourceAPIKey, SourceIP} }

// Warnings names what in c is allowed but lets a client dodge a limit:
// today, an explicit source order that puts the API key before a user
// source that is configured (a trusted user header or a JWT), so that a
// verified user who adds any X-API-Key becomes a fresh client.
func (c Config) Warnings() []string {
	if c.UserHeader == "" && c.JWT == nil {
		return nil
	}
	for _, s := range c.Sources {
		switch s {
		case SourceUser, SourceMTLS, SourceIP: // verified first; the IP always yields: nothing after it is read
			return nil
		case SourceAPIKey:
			return []string{"identity.sources: api_key comes before user, so a client with a verified user (trusted user header or JWT) escapes its per-user limits by sending any API key; list user first"}
		}
	}
	return nil
}

// MaxValueLen is the largest Config.MaxValueLen accepted.
const MaxValueLen = 1 << 16

// NewExtractor validates cfg (Check, then the JWT key material), applies
// its defaults and returns an Extractor. Every problem is reported,
// joined, with the name of its field.
func NewExtractor(cfg Config) (*Extractor, error) {
	errs := cfg.Check()
	e := &Extractor{
		apiHeader:   cfg.APIKeyHeader,
		apiQuery:    cfg.APIKeyQuery,
		userHeader:  cfg.UserHeader,
		v6bits:      cfg.IPv6Prefix,
		maxValueLen: cfg.MaxValueLen,
		keys:        newKeyCache(),
	}
	e.sources = append([]Source(nil), cfg.Sources...)
	if len(e.sources) == 0 {
		e.sources = DefaultSources()
	}
	if e.apiHeader == "" {
		e.apiHeader = DefaultAPIKeyHeader
	}
	e.apiHeader = canonicalHeader(e.apiHeader)
	if e.userHeader != "" {
		e.userHeader = canonicalHeader(e.userHeader)
	}
	for _, p := range cfg.TrustedProxies {
		if p.IsValid() {
			e.trusted = append(e.trusted, NormalizePrefix(p))
		}
	}
	if e.v6bits == 0 {
		e.v6bits = 64
	}
	if e.maxValueLen == 0 {
		e.maxValueLen = 1024
	}
	if cc := cfg.Consumers; cc != nil {
		if cc.Directory == nil {
			errs = append(errs, errors.New("consumers: a directory is required"))
		}
		c := *cc
		c.Plans = append([]string(nil), cc.Plans...)
		e.consumers = &c
	}
	if cfg.JWT != nil {
		var consumerClaim, planClaim string
		if cc := cfg.Consumers; cc != nil {
			consumerClaim, planClaim = cc.JWTClaim, cc.PlanClaim
		}
		v, err := newJWTVerifier(cfg.JWT, consumerClaim, planClaim)
		if err != nil {
			errs = append(errs, err)
		}
		e.jwt = v
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("identity: %w", errors.Join(errs...))
	}
	return e, nil
}

// WithKeySet returns a copy of e whose tokens are verified with the keys
// of ks: the compiled configuration names a key set (a JWKS URL), and the
// process that serves it owns the one set that fetches, across reloads.
// It is an error when e does not verify tokens with a key set.
func (e *Extractor) WithKeySet(ks KeySet) (*Extractor, error) {
	if e.jwt == nil || e.jwt.keySet == nil {
		return nil, errors.New("identity: jwt: no key set configured")
	}
	if ks == nil {
		return nil, errors.New("identity: jwt: nil key set")
	}
	c := *e
	v := *e.jwt
	v.keySet = ks
	c.jwt = &v
	return &c, nil
}

// NormalizePrefix masks p and rewrites an IPv4-mapped IPv6 prefix
// (::ffff:a.b.c.d/n, n ≥ 96) as the IPv4 prefix it denotes, because client
// addresses are unmapped before they are compared with it. It is the one
// definition for every configured prefix (trusted proxies here, exempt
// IPs in policy).
func NormalizePrefix(p netip.Prefix) netip.Prefix {
	a := p.Addr().WithZone("")
	if a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96).Masked()
	}
	return netip.PrefixFrom(a, p.Bits()).Masked()
}

// ClientIP returns the client IP of r as Identify resolves it, and whether
// the peer was used because the selected X-Forwarded-For entry was invalid.
func (e *Extractor) ClientIP(r *http.Request) (ip netip.Addr, fallback bool) {
	peer, _ := ParseIP(r.RemoteAddr)
	return clientIP(peer, r.Header[xffHeader], e.trusted)
}

// PeerTrusted reports whether r's immediate peer (RemoteAddr) is one of the
// trusted proxies, i.e. whether its X-Forwarded-For and user header are
// believed.
func (e *Extractor) PeerTrusted(r *http.Request) bool {
	if len(e.trusted) == 0 {
		// No proxy is trusted (the default): no address to parse.
		return false
	}
	peer, _ := ParseIP(r.RemoteAddr)
	return peer.IsValid() && trusted(peer, e.trusted)
}

// value accepts v as an identity value if it is not empty and not too long.
func (e *Extractor) value(v string, id *Identity) string {
	if len(v) > e.maxValueLen {
		id.Oversize = true
		return ""
	}
	return v
}

func (e *Extractor) apiKey(r *http.Request, id *Identity) string {
	v := firstHeader(r.Header, e.apiHeader)
	if v == "" && e.apiQuery != "" && r.URL != nil {
		v = queryValue(r.URL.RawQuery, e.apiQuery, e.maxValueLen)
	}
	if v == "" {
		return ""
	}
	k := e.value(v, id)
	if k == "" && e.consumers != nil {
		// Too long to be anyone's key: no consumer owns it, so it is an
		// unknown key (rejected in reject mode), not a request without one.
		id.UnknownKey = true
		id.Rejected = e.consumers.UnknownKey == UnknownKeyReject
	}
	return k
}

func (e *Extractor) user(r *http.Request, peer netip.Addr, now time.Time, id *Identity, tok *tokenClaims) string {
	if e.userHeader != "" && peer.IsValid() && trusted(peer, e.trusted) {
		if v := firstHeader(r.Header, e.userHeader); v != "" {
			return e.value(v, id)
		}
	}
	if e.jwt == nil {
		return ""
	}
	h := firstHeader(r.Header, e.jwt.header)
	if h == "" {
		return ""
	}
	t, ok := e.jwt.token(h)
	if !ok {
		return ""
	}
	err := e.jwt.verify(r.Context(), t, now, tok)
	if err != nil {
		id.TokenRejected = true
		*tok = tokenClaims{}
		return ""
	}
	return e.value(tok.user, id)
}
