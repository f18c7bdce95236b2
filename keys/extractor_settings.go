package keys

import (
	"net/http"
	"net/netip"
	"strings"
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

// DropTokens removes from h every value of the token header that
// Identify would take for a token were it the first (whether or not it
// is valid): a Bearer credential in Authorization, any value of another
// header. Every line is looked at, not only the first that Identify
// reads: a client can put its token in a second Authorization line
// behind a Basic one, and an upstream may read any line. Authorization
// values of another scheme (Basic) carry none and are kept.
func (e *Extractor) DropTokens(h http.Header) {
	if e.jwt == nil {
		return
	}
	vs := h[e.jwt.header]
	if len(vs) == 0 {
		return
	}
	if !e.jwt.bearer {
		delete(h, e.jwt.header)
		return
	}
	var kept []string
	for _, v := range vs {
		if _, ok := e.jwt.token(strings.TrimSpace(v)); !ok {
			kept = append(kept, v)
		}
	}
	if len(kept) == 0 {
		delete(h, e.jwt.header)
	} else if len(kept) < len(vs) {
		h[e.jwt.header] = kept
	}
}
