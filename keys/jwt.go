package keys

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// JWTConfig configures the verification of bearer tokens whose claim names
// the user. Exactly one of HS256Secret, RS256Key and KeySet must be set.
// With a secret or a key a token is accepted only if its "alg" names that
// algorithm exactly; with a key set, only if its "alg" is one of
// Algorithms and the set holds a key of that algorithm's type for it.
type JWTConfig struct {
	// Header carries the token; default "Authorization". Its value is
	// "Bearer <token>" (the scheme is matched case-insensitively); in a
	// header other than Authorization a bare token is accepted too.
	Header string
	// Claim is the claim that names the user; default "sub". Its value
	// must be a JSON string.
	Claim string
	// HS256Secret is the HMAC-SHA256 key, at least 32 bytes (RFC 7518 §3.2).
	HS256Secret []byte
	// RS256Key is the RSA public key (at least 2048 bits) for RSASSA-PKCS1-v1_5
	// with SHA-256.
	RS256Key *rsa.PublicKey
	// KeySet supplies the keys of asymmetric algorithms by the token's
	// "kid" (a JWKS fetched from an identity provider). Its tokens must
	// carry "exp".
	KeySet KeySet
	// Algorithms are the "alg" values accepted with KeySet; empty means
	// all of KeySetAlgorithms. HS* and "none" are never accepted from a
	// key set: a public key must not become an HMAC secret.
	Algorithms []string
	// Audience, when not empty, must equal "aud" or be one of its elements.
	Audience string
	// Issuer, when not empty, must equal "iss".
	Issuer string
	// Leeway is the clock skew tolerated for "exp" and "nbf"; default 0.
	Leeway time.Duration
	// MaxTokenLen bounds the token text; longer tokens are not verified.
	// Default 8192.
	MaxTokenLen int
}

// KeySet supplies the public keys tokens are verified with, chosen by the
// token's "kid" and "alg".
type KeySet interface {
	// VerificationKey returns the key for a token whose header names kid
	// ("" when it names none) and alg, one of KeySetAlgorithms. The key
	// must be of alg's type (an *rsa.PublicKey for RS*, an
	// *ecdsa.PublicKey on alg's curve for ES*, an ed25519.PublicKey for
	// EdDSA); the verifier checks it again. It may wait, bounded, for a
	// fetch the lookup started; ctx is the request's.
	VerificationKey(ctx context.Context, kid, alg string) (crypto.PublicKey, error)
}

// KeySetAlgorithms are the algorithms a KeySet's keys verify, in the
// order JWTConfig.Algorithms defaults to.
var KeySetAlgorithms = []string{"RS256", "RS384", "RS512", "ES256", "ES384", "EdDSA"}

// Errors returned by token verification. They are reported through
// Identity.TokenRejected only; a rejected token is never an identity.
var (
	errTokenMalformed = errors.New("jwt: malformed token")
	errTokenAlg       = errors.New("jwt: algorithm not accepted")
	errTokenSignature = errors.New("jwt: bad signature")
	errTokenExpired   = errors.New("jwt: token expired")
	errTokenNoExp     = errors.New("jwt: token from a key set without exp")
	errTokenNotYet    = errors.New("jwt: token not yet valid")
	errTokenAudience  = errors.New("jwt: wrong audience")
	errTokenIssuer    = errors.New("jwt: wrong issuer")
	errTokenClaim     = errors.New("jwt: user claim missing or not a string")
	errTokenKey       = errors.New("jwt: key of the wrong type for the algorithm")
)

// jwtVerifier is a validated, defaulted JWTConfig.
type jwtVerifier struct {
	header string
	bearer bool // header is Authorization: the Bearer scheme is required
	claim  string
	secret []byte
	key    *rsa.PublicKey
	alg    string
	// keySet and algs replace key and alg when keys come from a key set.
	keySet   KeySet
	algs     []string
	audience string
	issuer   string
	leeway   time.Duration
	maxLen   int
	// consumerClaim and planClaim name the claims read into
	// tokenClaims.consumer and .plan; "" reads none.
	consumerClaim, planClaim string
}

// tokenClaims are the claims of a verified token that identity reads.
type tokenClaims struct {
	// user is the user claim.
	user string
	// consumer names a registered consumer (consumers.jwt_claim).
	consumer string
	// plan names a plan (consumers.plan_claim).
	plan string
	// all are every claim of the verified token, raw.
	all map[string]json.RawMessage
}

func newJWTVerifier(c *JWTConfig, consumerClaim, planClaim string) (*jwtVerifier, error) {
	v := &jwtVerifier{
		consumerClaim: consumerClaim,
		planClaim:     planClaim,
		header:        c.Header,
		claim:         c.Claim,
		audience:      c.Audience,
		issuer:        c.Issuer,
		leeway:        c.Leeway,
		maxLen:        c.MaxTokenLen,
	}
	if v.header == "" {
		v.header = "Authorization"
	}
	v.header = canonicalHeader(v.header) // checked by Config.Check
	v.bearer = v.header == "Authorization"
	if v.claim == "" {
		v.claim = "sub"
	}
	if v.maxLen == 0 {
		v.maxLen = 8192
	}
	n := 0
	for _, set := range []bool{len(c.HS256Secret) > 0, c.RS256Key != nil, c.KeySet != nil} {
		if set {
			n++
		}
	}
	if len(c.Algorithms) > 0 && c.KeySet == nil {
		return nil, errors.New("jwt.algorithms: only with a key set (jwks_url or oidc_issuer)")
	}
	switch {
	case n > 1:
		return nil, errors.New("jwt: set one of hs256 secret, rs256 public key and key set, not both")
	case c.KeySet != nil:
		v.keySet = c.KeySet
		v.algs = KeySetAlgorithms
		if len(c.Algorithms) > 0 {
			for i, a := range c.Algorithms {
				if !slices.Contains(KeySetAlgorithms, a) {
					return nil, fmt.Errorf("jwt.algorithms[%d]: %q is not one of %s", i, a, strings.Join(KeySetAlgorithms, ", "))
				}
			}
			v.algs = slices.Clone(c.Algorithms)
		}
	case len(c.HS256Secret) > 0:
		if len(c.HS256Secret) < 32 {
			return nil, errors.New("jwt.hs256 secret: too short, want at least 32 bytes") // no length: it would say something of the secret
		}
		v.secret = append([]byte(nil), c.HS256Secret...)
		v.alg = "HS256"
	case c.RS256Key != nil:
		if c.RS256Key.N == nil || c.RS256Key.N.BitLen() < 2048 {
			return nil, errors.New("jwt.rs256 public key: want at least 2048 bits")
		}
		v.key = c.RS256Key
		v.alg = "RS256"
	default:
		return nil, errors.New("jwt: one of hs256 secret, rs256 public key and key set is required")
	}
	return v, nil
}

// token returns the raw token carried by the request header value h.
func (v *jwtVerifier) token(h string) (string, bool) {
	if len(h) > 7 && strings.EqualFold(h[:7], "Bearer ") {
		return strings.TrimLeft(h[7:], " "), true
	}
	if v.bearer {
		return "", false
	}
	return h, h != ""
}

// verify checks the token's signature, algorithm and registered claims at
// now and fills out with the claims identity reads. Nothing of a token
// that fails is read.
func (v *jwtVerifier) verify(ctx context.Context, tok string, now time.Time, out *tokenClaims) error {
	u, claims, err := v.check(ctx, tok, now)
	if err != nil {
		return err
	}
	out.user = u
	out.all = claims
	// A claim that is not a string names nothing. Decoded into locals:
	// out itself handed to json.Unmarshal would move the caller's claims
	// to the heap on every request, token or not.
	if v.consumerClaim != "" {
		var c string
		_ = json.Unmarshal(claims[v.consumerClaim], &c)
		out.consumer = c
	}
	if v.planClaim != "" {
		var p string
		_ = json.Unmarshal(claims[v.planClaim], &p)
		out.plan = p
	}
	return nil
}

// check verifies the token and returns its user claim and every claim.
func (v *jwtVerifier) check(ctx context.Context, tok string, now time.Time) (string, map[string]json.RawMessage, error) {
	if len(tok) > v.maxLen {
		return "", nil, errTokenMalformed
	}
	h, rest, ok := strings.Cut(tok, ".")
	if !ok {
		return "", nil, errTokenMalformed
	}
	p, s, ok := strings.Cut(rest, ".")
	if !ok || strings.IndexByte(s, '.') >= 0 {
		return "", nil, errTokenMalformed
	}
	hb, err := base64.RawURLEncoding.Strict().DecodeString(h)
	if err != nil {
		return "", nil, errTokenMalformed
	}
	// The JOSE header is decoded into a map so that member names match
	// exactly ("ALG" is not "alg"). "crit" is refused: no extension is
	// understood.
	var hdr map[string]json.RawMessage
	if json.Unmarshal(hb, &hdr) != nil || hdr == nil {
		return "", nil, errTokenMalformed
	}
	var alg string
	if json.Unmarshal(hdr["alg"], &alg) != nil {
		return "", nil, errTokenAlg
	}
	if v.keySet != nil {
		if !slices.Contains(v.algs, alg) {
			return "", nil, errTokenAlg
		}
	} else if alg != v.alg {
		return "", nil, errTokenAlg
	}
	if _, ok := hdr["crit"]; ok {
		return "", nil, errTokenAlg
	}
	sig, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return "", nil, errTokenMalformed
	}
	signed := tok[:len(h)+1+len(p)]
	if v.keySet != nil {
		// "kid", when present, must be a string; absent, the set decides
		// whether one key fits without it.
		kid, ok := jsonString(hdr["kid"])
		if !ok {
			return "", nil, errTokenMalformed
		}
		key, err := v.keySet.VerificationKey(ctx, kid, alg)
		if err != nil {
			return "", nil, err
		}
		if err := verifyAsymmetric(alg, key, signed, sig); err != nil {
			return "", nil, err
		}
	}
	switch v.alg {
	case "":
		// Verified above by the key set's key.
	case "HS256":
		m := hmac.New(sha256.New, v.secret)
		m.Write([]byte(signed))
		if !hmac.Equal(m.Sum(nil), sig) {
			return "", nil, errTokenSignature
		}
	case "RS256":
		d := sha256.Sum256([]byte(signed))
		if rsa.VerifyPKCS1v15(v.key, crypto.SHA256, d[:], sig) != nil {
			return "", nil, errTokenSignature
		}
	default:
		return "", nil, errTokenAlg
	}
	pb, err := base64.RawURLEncoding.Strict().DecodeString(p)
	if err != nil {
		return "", nil, errTokenMalformed
	}
	var claims map[string]json.RawMessage
	if json.Unmarshal(pb, &claims) != nil || claims == nil {
		return "", nil, errTokenMalformed
	}
	if raw, ok := claims["exp"]; ok {
		exp, ok := numericDate(raw)
		if !ok {
			return "", nil, errTokenMalformed
		}
		// RFC 7519 §4.1.4: the token must not be accepted on or after exp.
		if !now.Before(exp.Add(v.leeway)) {
			return "", nil, errTokenExpired
		}
	} else if v.keySet != nil {
		// A provider's token must expire: one without exp would be an
		// identity forever once leaked, and a provider signs JWTs that
		// are no access tokens and may lack it (an OpenID Connect
		// back-channel logout token names a sub and this API's aud).
		return "", nil, errTokenNoExp
	}
	if raw, ok := claims["nbf"]; ok {
		nbf, ok := numericDate(raw)
		if !ok {
			return "", nil, errTokenMalformed
		}
		if now.Add(v.leeway).Before(nbf) {
			return "", nil, errTokenNotYet
		}
	}
	if v.issuer != "" {
		var iss string
		if json.Unmarshal(claims["iss"], &iss) != nil || iss != v.issuer {
			return "", nil, errTokenIssuer
		}
	}
	if v.audience != "" && !hasAudience(claims["aud"], v.audience) {
		return "", nil, errTokenAudience
	}
	var user string
	if json.Unmarshal(claims[v.claim], &user) != nil || user == "" {
		return "", nil, errTokenClaim
	}
	return user, claims, nil
}

// jsonString decodes raw, a member of an object json.Unmarshal accepted,
// as a string: "" when absent, false when not a string. A string without
// escapes is its bytes (the common kid costs no decoder).
func jsonString(raw json.RawMessage) (string, bool) {
	if raw == nil {
		return "", true
	}
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var v string
	return v, json.Unmarshal(raw, &v) == nil
}

// verifyAsymmetric checks sig over signed with key under alg, one of
// KeySetAlgorithms. A key of another type than alg's (an RSA key for an
// ES256 token, a P-384 key for ES256) verifies nothing.
func verifyAsymmetric(alg string, key crypto.PublicKey, signed string, sig []byte) error {
	switch alg {
	case "RS256", "RS384", "RS512":
		k, ok := key.(*rsa.PublicKey)
		if !ok {
			return errTokenKey
		}
		h, d := rsaDigest(alg, signed)
		if rsa.VerifyPKCS1v15(k, h, d, sig) != nil {
			return errTokenSignature
		}
		return nil
	case "ES256", "ES384":
		k, ok := key.(*ecdsa.PublicKey)
		curve, size := elliptic.P256(), 32
		if alg == "ES384" {
			curve, size = elliptic.P384(), 48
		}
		if !ok || k.Curve != curve {
			return errTokenKey
		}
		// RFC 7518 §3.4: R and S, each left-padded to the curve's size,
		// concatenated (not ASN.1).
		if len(sig) != 2*size {
			return errTokenSignature
		}
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		var d []byte
		if alg == "ES256" {
			x := sha256.Sum256([]byte(signed))
			d = x[:]
		} else {
			x := sha512.Sum384([]byte(signed))
			d = x[:]
		}
		if !ecdsa.Verify(k, d, r, s) {
			return errTokenSignature
		}
		return nil
	case "EdDSA":
		k, ok := key.(ed25519.PublicKey)
		if !ok || len(k) != ed25519.PublicKeySize {
			return errTokenKey
		}
		if !ed25519.Verify(k, []byte(signed), sig) {
			return errTokenSignature
		}
		return nil
	}
	return errTokenAlg
}

// rsaDigest hashes signed for RS256, RS384 or RS512.
func rsaDigest(alg, signed string) (crypto.Hash, []byte) {
	switch alg {
	case "RS384":
		d := sha512.Sum384([]byte(signed))
		return crypto.SHA384, d[:]
	case "RS512":
		d := sha512.Sum512([]byte(signed))
		return crypto.SHA512, d[:]
	}
	d := sha256.Sum256([]byte(signed))
	return crypto.SHA256, d[:]
}

// CheckKeySetURL reports why u may not be fetched for keys (a JWKS URL, an
// OpenID Connect issuer): it must be an absolute https
// URL without credentials or fragment, or http to a loopback host
// (127.0.0.0/8, ::1, localhost): keys fetched in the clear from elsewhere
// would be anyone's on the path. field names u in the message.
func CheckKeySetURL(field, u string) error {
	p, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("%s: not a URL: %v", field, err)
	}
	if p.Host == "" || p.Hostname() == "" {
		return fmt.Errorf("%s: %q has no host", field, u)
	}
	if p.User != nil {
		return fmt.Errorf("%s: credentials in the URL are not accepted (they would show in logs and /readyz)", field)
	}
	if p.Fragment != "" || strings.HasSuffix(u, "#") {
		return fmt.Errorf("%s: a fragment is not accepted", field)
	}
	switch p.Scheme {
	case "https":
		return nil
	case "http":
		if loopback(p.Hostname()) {
			return nil
		}
		return fmt.Errorf("%s: plain http is accepted only to a loopback host (127.0.0.1, ::1, localhost); use https", field)
	}
	return fmt.Errorf("%s: scheme %q: want https", field, p.Scheme)
}

// loopback reports whether host is a loopback address or "localhost".
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// numericDate decodes a JWT NumericDate (seconds since the epoch, possibly
// fractional).
func numericDate(raw json.RawMessage) (time.Time, bool) {
	var f float64
	if json.Unmarshal(raw, &f) != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return time.Time{}, false
	}
	// Clamp to a range time.Time represents without overflow.
	const limit = 1 << 40
	f = max(-limit, min(limit, f))
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}

// hasAudience reports whether the "aud" claim raw (a string or an array of
// strings) contains want.
func hasAudience(raw json.RawMessage, want string) bool {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one == want
	}
	var many []string
	if json.Unmarshal(raw, &many) != nil {
		return false
	}
	for _, a := range many {
		if a == want {
			return true
		}
	}
	return false
}

// LoadRSAPublicKey parses the first PEM block of pemBytes as an RSA public
// key, in PKIX ("PUBLIC KEY") or PKCS #1 ("RSA PUBLIC KEY") form, for
// JWTConfig.RS256Key.
func LoadRSAPublicKey(pemBytes []byte) (*rsa.PublicKey, error) {
	b, _ := pem.Decode(pemBytes)
	if b == nil {
		return nil, errors.New("rsa public key: no PEM block found")
	}
	switch b.Type {
	case "PUBLIC KEY":
		k, err := x509.ParsePKIXPublicKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("rsa public key: %w", err)
		}
		rk, ok := k.(*rsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("rsa public key: PEM holds a %T, not an RSA key", k)
		}
		return rk, nil
	case "RSA PUBLIC KEY":
		k, err := x509.ParsePKCS1PublicKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("rsa public key: %w", err)
		}
		return k, nil
	}
	return nil, fmt.Errorf("rsa public key: unexpected PEM block %q", b.Type)
}
