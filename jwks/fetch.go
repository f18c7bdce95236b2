package jwks

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-jose/go-jose/v4"
	"github.com/tollgate/gateway/keys"
)

// NewClient returns the HTTP client a Set fetches with when Options.Client
// is nil: at most MaxRedirects redirects, each keeping the scheme (and
// loopback, for http). The fetch's context bounds the whole exchange,
// body included (FetchTimeout). Each fetch closes its connection: fetches
// are at least UnknownKidEvery apart (usually minutes), so a kept-alive
// connection would save little, and it would outlive a stopped Set (a
// reload to another URL) in the idle pool, with its goroutines.
func NewClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	return &http.Client{Transport: tr, CheckRedirect: checkRedirect}
}

// checkRedirect follows at most MaxRedirects redirects that keep the first
// request's scheme; an http redirect must stay on a loopback host.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return fmt.Errorf("more than %d redirects", MaxRedirects)
	}
	if req.URL.Scheme != via[0].URL.Scheme {
		return fmt.Errorf("redirect from %s to %s changes the scheme", via[0].URL.Scheme, req.URL.Scheme)
	}
	if req.URL.Scheme == "http" && keys.CheckKeySetURL("redirect", req.URL.String()) != nil {
		return errors.New("redirect to plain http beyond loopback")
	}
	return nil
}

// download fetches and parses the set, discovering its URL first when the
// Set has an issuer and has not discovered it yet (or the last fetch from
// it failed).
func (s *Set) download(ctx context.Context) (*keySet, error) {
	u := s.cfg.URL
	if s.cfg.Issuer != "" {
		s.mu.Lock()
		u = s.jwksURI
		s.mu.Unlock()
		if u == "" {
			d, err := s.discover(ctx)
			if err != nil {
				return nil, err
			}
			u = d
			s.mu.Lock()
			s.jwksURI = d
			s.mu.Unlock()
		}
	}
	body, hdr, err := s.get(ctx, u)
	if err == nil {
		var ks *keySet
		if ks, err = parseSet(body); err == nil {
			ks.maxAge = maxAge(hdr.Get("Cache-Control"))
			return ks, nil
		}
	}
	if s.cfg.Issuer != "" {
		// Discover again next time: the issuer may have moved its keys.
		s.mu.Lock()
		s.jwksURI = ""
		s.mu.Unlock()
	}
	return nil, fmt.Errorf("%s: %w", u, err)
}

// discoveryPath is where an issuer publishes its configuration (OpenID
// Connect Discovery 1.0 §4).
const discoveryPath = "/.well-known/openid-configuration"

// discover reads the issuer's discovery document and returns its jwks_uri.
// The document's issuer must equal the configured one exactly (§4.3):
// otherwise another issuer's keys would be taken for this one's.
func (s *Set) discover(ctx context.Context) (string, error) {
	u := strings.TrimSuffix(s.cfg.Issuer, "/") + discoveryPath
	body, _, err := s.get(ctx, u)
	if err != nil {
		return "", fmt.Errorf("discovery %s: %w", u, err)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("discovery %s: %v", u, err)
	}
	if doc.Issuer != s.cfg.Issuer {
		return "", fmt.Errorf("discovery %s: issuer %q is not the configured %q", u, trim(doc.Issuer), s.cfg.Issuer)
	}
	if doc.JWKSURI == "" {
		return "", fmt.Errorf("discovery %s: no jwks_uri", u)
	}
	if err := keys.CheckKeySetURL("jwks_uri", doc.JWKSURI); err != nil {
		return "", fmt.Errorf("discovery %s: %v", u, err)
	}
	return doc.JWKSURI, nil
}

// trim shortens a provider's string for an error message.
func trim(v string) string { return cut(v, 100) }

// cut shortens v to at most n bytes and a "…", on a rune boundary.
func cut(v string, n int) string {
	if len(v) <= n {
		return v
	}
	for n > 0 && !utf8.RuneStart(v[n]) {
		n--
	}
	return v[:n] + "…"
}

// get fetches u, refusing any status but 200 and a body over MaxBytes.
func (s *Set) get(ctx context.Context, u string) ([]byte, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	if resp.ContentLength > MaxBytes {
		return nil, nil, fmt.Errorf("response of %d bytes, more than %d", resp.ContentLength, MaxBytes)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBytes+1))
	if err != nil {
		return nil, nil, err
	}
	if len(body) > MaxBytes {
		return nil, nil, fmt.Errorf("response larger than %d bytes", MaxBytes)
	}
	return body, resp.Header, nil
}

// parseSet parses a JWKS document. Keys that cannot be used are skipped
// (RFC 7517 §5: unknown types, "use" other than "sig", an "alg" this
// gateway does not verify or that does not fit the key, private or
// symmetric keys, RSA keys outside MinRSABits..MaxRSABits, curves other
// than P-256 and P-384, key IDs over MaxKidLen). A document with more than
// MaxKeys keys, or with no usable key, is refused whole: the last good
// set stays.
func parseSet(body []byte) (*keySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("not a JWKS: %v", err)
	}
	if len(doc.Keys) > MaxKeys {
		return nil, fmt.Errorf("%d keys, more than %d", len(doc.Keys), MaxKeys)
	}
	ks := &keySet{byKid: make(map[string][]int)}
	var skipped []string
	for i, raw := range doc.Keys {
		k, err := parseKey(raw)
		if err != nil {
			if len(skipped) < 5 {
				skipped = append(skipped, fmt.Sprintf("keys[%d]: %v", i, err))
			}
			continue
		}
		ks.byKid[k.kid] = append(ks.byKid[k.kid], len(ks.keys))
		ks.keys = append(ks.keys, k)
	}
	if len(ks.keys) == 0 {
		return nil, fmt.Errorf("no usable key (%s)", strings.Join(skipped, "; "))
	}
	return ks, nil
}

// parseKey parses one JWK and says why it is not usable.
func parseKey(raw json.RawMessage) (key, error) {
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(raw); err != nil {
		return key{}, err
	}
	if !jwk.IsPublic() {
		return key{}, errors.New("not a public key (a private or symmetric key is never used)")
	}
	if jwk.Use != "" && jwk.Use != "sig" {
		return key{}, fmt.Errorf("use %q", trim(jwk.Use))
	}
	if len(jwk.KeyID) > MaxKidLen {
		return key{}, fmt.Errorf("kid longer than %d bytes", MaxKidLen)
	}
	k := key{kid: jwk.KeyID, alg: jwk.Algorithm, pub: jwk.Key}
	switch pub := jwk.Key.(type) {
	case *rsa.PublicKey:
		if n := pub.N.BitLen(); n < MinRSABits || n > MaxRSABits {
			return key{}, fmt.Errorf("RSA key of %d bits, want %d..%d", n, MinRSABits, MaxRSABits)
		}
	case *ecdsa.PublicKey:
		if !keyFits(pub, "ES256") && !keyFits(pub, "ES384") {
			return key{}, fmt.Errorf("curve %s, want P-256 or P-384", pub.Curve.Params().Name)
		}
	case ed25519.PublicKey:
	default:
		return key{}, fmt.Errorf("key type %T", jwk.Key)
	}
	if k.alg != "" {
		ok := false
		for _, a := range keys.KeySetAlgorithms {
			if a == k.alg && keyFits(k.pub, a) {
				ok = true
			}
		}
		if !ok {
			return key{}, fmt.Errorf("alg %q does not fit the key or is not verified here", trim(k.alg))
		}
	}
	return k, nil
}

// maxAge returns the Cache-Control max-age of a response, clamped to
// MinMaxAge..MaxMaxAge; 0 when absent or unreadable.
func maxAge(cc string) time.Duration {
	for part := range strings.SplitSeq(cc, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "max-age") {
			continue
		}
		n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(val), `"`), 10, 64)
		if err != nil || n < 0 {
			return 0
		}
		d := MaxMaxAge
		if n < int64(MaxMaxAge/time.Second) {
			d = time.Duration(n) * time.Second
		}
		return min(MaxMaxAge, max(MinMaxAge, d))
	}
	return 0
}
