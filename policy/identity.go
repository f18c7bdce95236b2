package policy

import (
	"fmt"
	"net/netip"

	"github.com/tollgate/gateway/keys"
)

// identityConfig checks the [identity] table (when e is not nil) and
// returns the keys.Config it describes, without secrets.
func identityConfig(c *IdentityConfig, e *problems) keys.Config {
	if e == nil {
		e = new(problems)
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
func prefixes(ss []string, path string, e *problems) []netip.Prefix {
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
		out = append(out, keys.NormalizePrefix(p))
	}
	return out
}
