package keys

import (
	"net/http"
	"net/netip"
)

// The compiled settings an Extractor resolves identities with, for callers
// that must build requests it will read (replay) or name what it keys by
// (the access log), without reading or re-parsing raw configuration.

// DefaultAPIKeyHeader is the header that carries the API key unless the
// configuration names another (identity.api_key_header).
const DefaultAPIKeyHeader = "X-API-Key"

// APIKeyHeader returns the canonical name of the header that carries the
// API key.
func (e *Extractor) APIKeyHeader() string { return e.apiHeader }

// UserHeader returns the canonical name of the user header, "" when none
// is configured.
func (e *Extractor) UserHeader() string { return e.userHeader }

// TrustedPeer returns an address whose X-Forwarded-For and user header the
// Extractor believes (the first address of the first trusted prefix), or
// false when no proxy is trusted.
func (e *Extractor) TrustedPeer() (netip.Addr, bool) {
	if len(e.trusted) == 0 {
		return netip.Addr{}, false
	}
	return e.trusted[0].Addr(), true
}

// IPv6Prefix returns the number of leading bits of an IPv6 client address
// that keys keep.
func (e *Extractor) IPv6Prefix() int { return e.v6bits }

// MaxValueLen returns the longest API key or user taken as an identity.
func (e *Extractor) MaxValueLen() int { return e.maxValueLen }

// VerifiesTokens reports whether Identify checks bearer tokens, the only
// thing it reads its clock for: a caller without it may pass the zero
// time and spare a clock read per request.
func (e *Extractor) VerifiesTokens() bool { return e.jwt != nil }

// APIKeyQuery returns the query parameter that carries the API key, ""
// when none is configured.
func (e *Extractor) APIKeyQuery() string { return e.apiQuery }

// TokenHeader returns the canonical name of the header that carries
// bearer tokens, "" when tokens are not verified.
func (e *Extractor) TokenHeader() string {
	if e.jwt == nil {
		return ""
	}
	return e.jwt.header
}

// CarriesToken reports whether h holds, in the token header, what
// Identify would take for a token and verify (whether or not it is
// valid): a Bearer credential in Authorization, any value in another
// header. Authorization with another scheme (Basic) carries none.
func (e *Extractor) CarriesToken(h http.Header) bool {
	if e.jwt == nil {
		return false
	}
	_, ok := e.jwt.token(firstHeader(h, e.jwt.header))
	return ok
}
