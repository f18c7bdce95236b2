package jwks

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"crypto/rand"

	"github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"
	"github.com/tollgate/gateway/keys"
)

// rs256Token signs a token with kid, sub and exp, by hand.
func rs256Token(b *testing.B, k *rsa.PrivateKey, kid string, exp time.Time) string {
	hdr, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid})
	claims, _ := json.Marshal(map[string]any{"sub": "alice", "exp": exp.Unix()})
	in := b64(hdr) + "." + b64(claims)
	d := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
	if err != nil {
		b.Fatal(err)
	}
	return in + "." + b64(sig)
}

// BenchmarkVerifyRS256 is the cost of one request's token, RS256 with a
// 2048-bit key: the file key (rs256_public_key_file, the cost before key
// sets), the same verifier with the key from a fetched JWKS (jwks_url),
// and go-jose's JWT verification of the same token, the library
// alternative for the verification itself.
func BenchmarkVerifyRS256(b *testing.B) {
	rk, _ := testRSA(b)
	now := time.Unix(1_800_000_000, 0)
	tok := rs256Token(b, rk[0], "k1", now.Add(time.Minute))
	run := func(b *testing.B, cfg *keys.JWTConfig) {
		e, err := keys.NewExtractor(keys.Config{JWT: cfg})
		if err != nil {
			b.Fatal(err)
		}
		r := httptest.NewRequest("GET", "http://gw/api", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if id := e.Identify(r, now); id.User != "alice" {
					b.Fatal("token refused")
				}
			}
		})
	}
	b.Run("file-key", func(b *testing.B) { run(b, &keys.JWTConfig{RS256Key: &rk[0].PublicKey}) })
	b.Run("jwks", func(b *testing.B) {
		body, _ := json.Marshal(map[string]any{"keys": []any{
			jose.JSONWebKey{Key: &rk[0].PublicKey, KeyID: "k1", Use: "sig", Algorithm: "RS256"},
			jose.JSONWebKey{Key: &rk[1].PublicKey, KeyID: "k2", Use: "sig", Algorithm: "RS256"},
		}})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(body) }))
		defer srv.Close()
		s := New(Config{URL: srv.URL, Refresh: time.Hour}, Options{Logger: quiet()})
		s.Start()
		defer s.Close()
		run(b, &keys.JWTConfig{KeySet: s})
	})
	b.Run("go-jose", func(b *testing.B) {
		pub := &rk[0].PublicKey
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				t, err := josejwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
				if err != nil {
					b.Fatal(err)
				}
				var c josejwt.Claims
				if err := t.Claims(pub, &c); err != nil {
					b.Fatal(err)
				}
				if err := c.ValidateWithLeeway(josejwt.Expected{Time: now}, 0); err != nil || c.Subject != "alice" {
					b.Fatal(err)
				}
			}
		})
	})
}
