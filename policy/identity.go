package policy

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
)

// identityConfig parses the [identity] table into the keys.Config it
// describes, without secrets, and checks it: the rules of the
// configuration file here (a value that does not parse, a setting that
// must not be left empty or 0, the JWT secret's source), and every rule on
// the parsed values once, in keys.Config.Check, whose problems get the
// "identity." prefix.
func identityConfig(c *config.IdentityConfig, e *problems) (kc keys.Config, jwksSpec *JWKS) {
	kc = keys.Config{APIKeyHeader: c.APIKeyHeader, APIKeyQuery: c.APIKeyQuery, UserHeader: c.UserHeader,
		IPv6Prefix: c.IPv6Prefix, MaxValueLen: c.MaxValueLen}
	// To keys, an empty or zero value means its default; in the file the
	// defaults are already filled in, so one there was written on purpose.
	if len(c.Sources) == 0 {
		e.add("identity.sources", "at least one source is required (api_key, user, ip)")
	}
	if c.APIKeyHeader == "" {
		e.add("identity.api_key_header", "must not be empty")
	}
	if c.IPv6Prefix == 0 {
		e.add("identity.ipv6_prefix", "must be in 1..128, got 0")
	}
	if c.MaxValueLen == 0 {
		e.add("identity.max_value_len", "must be in 1..%d, got 0", keys.MaxValueLen)
	}
	var srcAt []int // srcAt[k] is the file's index of kc.Sources[k]
	for i, s := range c.Sources {
		src, err := keys.ParseSource(s)
		if err != nil {
			e.add(fmt.Sprintf("identity.sources[%d]", i), "%v", err)
			continue
		}
		kc.Sources = append(kc.Sources, src)
		srcAt = append(srcAt, i)
	}
	kc.TrustedProxies = prefixes(c.TrustedProxies, "identity.trusted_proxies", e)
	j := &c.JWT
	if j.Enabled() {
		kc.JWT = &keys.JWTConfig{Header: j.Header, Claim: j.Claim, Audience: j.Audience, Issuer: j.Issuer}
		hs := hs256Source(*j)
		n := 0
		for _, set := range []bool{hs.set(), j.RS256PublicKeyFile != "", j.JWKSURL != "", j.OIDCIssuer != ""} {
			if set {
				n++
			}
		}
		if n > 1 {
			e.add("identity.jwt", "set only one of hs256_secret_env, hs256_secret_file, rs256_public_key_file, jwks_url and oidc_issuer")
		}
		hs.check(e)
		jwks := j.JWKSURL != "" || j.OIDCIssuer != ""
		if j.JWKSURL != "" {
			if err := keys.CheckKeySetURL("identity.jwt.jwks_url", j.JWKSURL); err != nil {
				*e = append(*e, err)
			}
		}
		if j.OIDCIssuer != "" {
			if err := keys.CheckKeySetURL("identity.jwt.oidc_issuer", j.OIDCIssuer); err != nil {
				*e = append(*e, err)
			} else if u, _ := url.Parse(j.OIDCIssuer); u.RawQuery != "" || u.ForceQuery {
				e.add("identity.jwt.oidc_issuer", "an issuer has no query (OpenID Connect Discovery §2)")
			}
			if j.Issuer == "" {
				// The discovered issuer must equal the configured one, so
				// it is the one tokens must name too.
				kc.JWT.Issuer = j.OIDCIssuer
			}
		}
		refresh := duration(j.JWKSRefresh, "identity.jwt.jwks_refresh", true, e)
		if j.JWKSRefresh != "" && refresh != 0 && (refresh < time.Second || refresh > 24*time.Hour) {
			e.add("identity.jwt.jwks_refresh", "must be in 1s..24h, got %s", j.JWKSRefresh)
		}
		seen := map[string]bool{}
		for i, a := range j.Algorithms {
			path := fmt.Sprintf("identity.jwt.algorithms[%d]", i)
			switch {
			case !slices.Contains(keys.KeySetAlgorithms, a):
				e.add(path, "%q is not one of %s", a, strings.Join(keys.KeySetAlgorithms, ", "))
			case seen[a]:
				e.add(path, "duplicate %q", a)
			}
			seen[a] = true
		}
		if len(j.Algorithms) > 0 && !jwks {
			e.add("identity.jwt.algorithms", "applies to jwks_url and oidc_issuer only (a secret or key file fixes the algorithm)")
		}
		if jwks && j.Audience == "" {
			// An identity provider's keys sign the tokens of every
			// application it serves: without an audience, a token issued
			// to any of them (any client of a shared tenant, any app of a
			// public provider) would name a verified user here.
			e.add("identity.jwt.audience", "required with jwks_url and oidc_issuer: the provider's keys sign tokens for every application it serves; name this API's audience")
		}
		if j.JWKSURL != "" && j.Issuer == "" {
			// A provider may share one key set among its tenants (a
			// multi-tenant directory publishes one for all): without an
			// expected iss, a token another tenant issued for this
			// audience would verify. oidc_issuer implies the issuer.
			e.add("identity.jwt.issuer", "required with jwks_url: a provider may sign the tokens of every tenant with the same keys; name the issuer whose tokens this API takes (or use oidc_issuer)")
		}
		if jwks {
			kc.JWT.Algorithms = slices.Clone(j.Algorithms)
			kc.JWT.KeySet = UnboundKeys
			jwksSpec = &JWKS{URL: j.JWKSURL, Issuer: j.OIDCIssuer, Refresh: refresh}
		}
		if j.Header == "" {
			e.add("identity.jwt.header", "must not be empty")
		}
		if j.Claim == "" {
			e.add("identity.jwt.claim", "must not be empty")
		}
		kc.JWT.Leeway = duration(j.Leeway, "identity.jwt.leeway", false, e)
	} else if j.Audience != "" || j.Issuer != "" {
		e.add("identity.jwt", "audience or issuer set, but none of hs256_secret_env, hs256_secret_file, rs256_public_key_file, jwks_url and oidc_issuer")
	}
	for _, err := range kc.Check() {
		msg := err.Error()
		// keys counts the sources that parsed; the file counts them all.
		if rest, ok := strings.CutPrefix(msg, "sources["); ok {
			if n, tail, ok := strings.Cut(rest, "]"); ok {
				if k, err := strconv.Atoi(n); err == nil && k < len(srcAt) {
					msg = fmt.Sprintf("sources[%d]%s", srcAt[k], tail)
				}
			}
		}
		*e = append(*e, errors.New("identity."+msg))
	}
	return kc, jwksSpec
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
