package keys

import (
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

var (
	rsaOnce sync.Once
	rsaKey  *rsa.PrivateKey
	rsaKey2 *rsa.PrivateKey
)

// testRSAKeys returns two 2048-bit keys generated once per test binary.
func testRSAKeys(t testing.TB) (*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	rsaOnce.Do(func() {
		var err error
		if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if rsaKey2, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	})
	return rsaKey, rsaKey2
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// signHS256 builds a token with the given header and claims, signed with
// secret.
func signHS256(hdr, claims any, secret []byte) string {
	in := b64(mustJSON(hdr)) + "." + b64(mustJSON(claims))
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(in))
	return in + "." + b64(m.Sum(nil))
}

func signRS256(hdr, claims any, k *rsa.PrivateKey) string {
	in := b64(mustJSON(hdr)) + "." + b64(mustJSON(claims))
	d := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
	if err != nil {
		panic(err)
	}
	return in + "." + b64(sig)
}

func TestJWT(t *testing.T) {
	priv, other := testRSAKeys(t)
	now := time.Unix(1_800_000_000, 0)
	hs := map[string]string{"alg": "HS256", "typ": "JWT"}
	rs := map[string]string{"alg": "RS256", "typ": "JWT"}
	claims := func(extra map[string]any) map[string]any {
		c := map[string]any{"sub": "alice", "exp": now.Unix() + 60, "nbf": now.Unix() - 60,
			"aud": "tollgate", "iss": "https://issuer.test"}
		for k, v := range extra {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return c
	}
	base := JWTConfig{Audience: "tollgate", Issuer: "https://issuer.test"}
	hsCfg, rsCfg := base, base
	hsCfg.HS256Secret = testSecret
	rsCfg.RS256Key = &priv.PublicKey
	leeway := hsCfg
	leeway.Leeway = 30 * time.Second

	good := signHS256(hs, claims(nil), testSecret)
	parts := strings.Split(good, ".")

	tests := []struct {
		name  string
		cfg   JWTConfig
		auth  string // Authorization header value
		want  string // user; "" = no identity from the token
		rejec bool   // TokenRejected
	}{
		{"HS256 valid", hsCfg, "Bearer " + good, "alice", false},
		{"HS256 valid, lower-case scheme", hsCfg, "bearer " + good, "alice", false},
		{"RS256 valid", rsCfg, "Bearer " + signRS256(rs, claims(nil), priv), "alice", false},
		{"valid without exp and nbf", hsCfg, "Bearer " + signHS256(hs, claims(map[string]any{"exp": nil, "nbf": nil}), testSecret), "alice", false},
		{"aud as array", hsCfg, "Bearer " + signHS256(hs, claims(map[string]any{"aud": []string{"x", "tollgate"}}), testSecret), "alice", false},
		{"no header", hsCfg, "", "", false},
		{"not bearer", hsCfg, "Basic " + good, "", false},
		{"alg none", hsCfg, "Bearer " + b64(mustJSON(map[string]string{"alg": "none"})) + "." + parts[1] + ".", "", true},
		{"alg none with signature", hsCfg, "Bearer " + b64(mustJSON(map[string]string{"alg": "none"})) + "." + parts[1] + "." + parts[2], "", true},
		{"alg NONE", hsCfg, "Bearer " + signHS256(map[string]string{"alg": "NONE"}, claims(nil), testSecret), "", true},
		{"ALG member name", hsCfg, "Bearer " + signHS256(map[string]string{"ALG": "HS256"}, claims(nil), testSecret), "", true},
		{"alg hs256 lower case", hsCfg, "Bearer " + signHS256(map[string]string{"alg": "hs256"}, claims(nil), testSecret), "", true},
		{"crit header", hsCfg, "Bearer " + signHS256(map[string]any{"alg": "HS256", "crit": []string{"b64"}, "b64": false}, claims(nil), testSecret), "", true},
		{"HS256 bad signature", hsCfg, "Bearer " + signHS256(hs, claims(nil), []byte("another-secret-another-secret-!!")), "", true},
		{"HS256 tampered claims", hsCfg, "Bearer " + parts[0] + "." + b64(mustJSON(claims(map[string]any{"sub": "mallory"}))) + "." + parts[2], "", true},
		{"RS256 signed by another key", rsCfg, "Bearer " + signRS256(rs, claims(nil), other), "", true},
		{"expired", hsCfg, "Bearer " + signHS256(hs, claims(map[string]any{"exp": now.Unix() - 1}), testSecret), "", true},
		{"expires exactly now", hsCfg, "Bearer " + signHS256(hs, claims(map[string]any{"exp": now.Unix()}), testSecret), "", true},
		{"expired within leeway", leeway, "Bearer " + signHS256(hs, claims(map[string]any{"exp": now.Unix() - 10}), testSecret), "alice", false},
		{"not yet valid", hsCfg, "Bearer " + signHS256(hs, claims(map[string]any{"nbf": now.Unix() + 10}), testSecret), "", true},
		{"not yet valid within leeway", leeway, "Bearer " + signHS256(hs, claims(map[string]any{"nbf": now.Unix() + 10}), testSecret), "alice", false},
		{"exp not a number", hsCfg, "Bearer " + signHS256(hs, claims(map[string]any{"exp": "tomorrow"}), testSecret), "", true},
		{"wrong audience", hsCfg, "Bearer " + signHS256(hs, claims(map[string]any{"aud": "other"}), testSecret), "", true},
		{"audience missing", hsCfg, "Bearer " + signHS256(hs, claims(map[string]any{"aud": nil}), testSecret), "", true},
		{"wrong issuer", hsCfg, "Bearer " + signHS256(hs, claims(map[string]any{"iss": "https://evil.test"}), testSecret), "", true},
		{"sub not a string", hsCfg, "Bearer " + signHS256(hs, claims(map[string]any{"sub": 42}), testSecret), "", true},
		{"sub missing", hsCfg, "Bearer " + signHS256(hs, claims(map[string]any{"sub": nil}), testSecret), "", true},
		// Wrong key type: an HS256 token against an RSA key — including the
		// classic confusion attack that uses the public key as HMAC secret.
		{"HS256 token, RS256 key", rsCfg, "Bearer " + good, "", true},
		{"HS256 keyed with the RSA public key", rsCfg, "Bearer " + signHS256(hs, claims(nil), x509.MarshalPKCS1PublicKey(&priv.PublicKey)), "", true},
		{"RS256 token, HS256 secret", hsCfg, "Bearer " + signRS256(rs, claims(nil), priv), "", true},
		{"malformed: two parts", hsCfg, "Bearer " + parts[0] + "." + parts[1], "", true},
		{"malformed: four parts", hsCfg, "Bearer " + good + ".x", "", true},
		{"malformed: bad base64", hsCfg, "Bearer " + parts[0] + ".!!!." + parts[2], "", true},
		{"malformed: padded base64", hsCfg, "Bearer " + parts[0] + "=." + parts[1] + "." + parts[2], "", true},
		{"malformed: header not JSON", hsCfg, "Bearer " + b64([]byte("{")) + "." + parts[1] + "." + parts[2], "", true},
		{"malformed: claims not an object", hsCfg, "Bearer " + signHS256(hs, []int{1}, testSecret), "", true},
		{"malformed: garbage", hsCfg, "Bearer \x00\xff{}", "", true},
		{"too long", hsCfg, "Bearer " + signHS256(hs, claims(map[string]any{"pad": strings.Repeat("x", 9000)}), testSecret), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			e, err := NewExtractor(Config{JWT: &cfg})
			if err != nil {
				t.Fatal(err)
			}
			r := newTestRequest("198.51.100.1:1000")
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			id := e.Identify(r, now)
			if id.User != tt.want || id.TokenRejected != tt.rejec {
				t.Fatalf("User %q TokenRejected %v, want %q %v", id.User, id.TokenRejected, tt.want, tt.rejec)
			}
			// A token that is not an identity falls through to the IP.
			wantKind, wantClient := SourceUser, tt.want
			if tt.want == "" {
				wantKind, wantClient = SourceIP, "198.51.100.1"
			}
			if id.ClientKind != wantKind || id.Client != wantClient {
				t.Fatalf("client %s %q, want %s %q", id.ClientKind, id.Client, wantKind, wantClient)
			}
		})
	}
}

func TestJWTCustomHeaderAndClaim(t *testing.T) {
	e, err := NewExtractor(Config{JWT: &JWTConfig{Header: "x-token", Claim: "uid", HS256Secret: testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	tok := signHS256(map[string]string{"alg": "HS256"}, map[string]any{"uid": "bob", "sub": "alice"}, testSecret)
	for _, v := range []string{tok, "Bearer " + tok} {
		r := newTestRequest("198.51.100.1:1")
		r.Header.Set("X-Token", v)
		if id := e.Identify(r, time.Unix(0, 0)); id.User != "bob" {
			t.Errorf("X-Token %q: user %q, want bob", v[:10], id.User)
		}
	}
}

func TestJWTConfigErrors(t *testing.T) {
	priv, _ := testRSAKeys(t)
	tests := []struct {
		name string
		cfg  JWTConfig
		want string
	}{
		{"no key", JWTConfig{}, "is required"},
		{"both keys", JWTConfig{HS256Secret: testSecret, RS256Key: &priv.PublicKey}, "not both"},
		{"short secret", JWTConfig{HS256Secret: []byte("secret")}, "at least 32"},
		{"small RSA key", JWTConfig{RS256Key: &rsa.PublicKey{N: new(big.Int).Rsh(priv.N, 1100), E: 65537}}, "2048 bits"},
		{"bad header", JWTConfig{HS256Secret: testSecret, Header: "Bad Header"}, "invalid header name"},
		{"negative leeway", JWTConfig{HS256Secret: testSecret, Leeway: -time.Second}, "leeway"},
	}
	for _, tt := range tests {
		cfg := tt.cfg
		_, err := NewExtractor(Config{JWT: &cfg})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want it to mention %q", tt.name, err, tt.want)
		}
	}
}

func TestLoadRSAPublicKey(t *testing.T) {
	priv, _ := testRSAKeys(t)
	pkix, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []*pem.Block{
		{Type: "PUBLIC KEY", Bytes: pkix},
		{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&priv.PublicKey)},
	} {
		k, err := LoadRSAPublicKey(pem.EncodeToMemory(b))
		if err != nil {
			t.Fatalf("%s: %v", b.Type, err)
		}
		if !k.Equal(&priv.PublicKey) {
			t.Fatalf("%s: loaded another key", b.Type)
		}
	}
	for _, bad := range [][]byte{
		nil,
		[]byte("not pem"),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte("junk")}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(priv)}),
	} {
		if _, err := LoadRSAPublicKey(bad); err == nil {
			t.Errorf("LoadRSAPublicKey(%.20q) succeeded", bad)
		}
	}
}

// TestUserHeaderTrust checks that the user header is believed only from a
// trusted peer and that it wins over a token.
func TestUserHeaderTrust(t *testing.T) {
	e, err := NewExtractor(Config{
		UserHeader:     "X-Gateway-User",
		TrustedProxies: testTrusted,
		JWT:            &JWTConfig{HS256Secret: testSecret},
	})
	if err != nil {
		t.Fatal(err)
	}
	tok := signHS256(map[string]string{"alg": "HS256"}, map[string]any{"sub": "token-user"}, testSecret)
	tests := []struct {
		remote, header, auth, want string
	}{
		{"10.0.0.1:1", "carol", "", "carol"},
		{"203.0.113.1:1", "carol", "", ""},
		{"203.0.113.1:1", "carol", "Bearer " + tok, "token-user"},
		{"10.0.0.1:1", "carol", "Bearer " + tok, "carol"},
		{"10.0.0.1:1", "", "Bearer " + tok, "token-user"},
		{"10.0.0.1:1", strings.Repeat("u", 1025), "", ""},
	}
	for _, tt := range tests {
		r := newTestRequest(tt.remote)
		if tt.header != "" {
			r.Header.Set("X-Gateway-User", tt.header)
		}
		if tt.auth != "" {
			r.Header.Set("Authorization", tt.auth)
		}
		id := e.Identify(r, time.Unix(0, 0))
		if id.User != tt.want {
			t.Errorf("peer %s header %.10q: user %q, want %q", tt.remote, tt.header, id.User, tt.want)
		}
	}
}
