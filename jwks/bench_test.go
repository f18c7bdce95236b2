package jwks

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/big"
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

// BenchmarkForgedSignature is what a client costs the gateway with a
// token naming the kid of a key in the set and a made-up signature: the
// signature is verified (and fails) before any limit applies, so the
// key's size sets the CPU a forged token takes. The moduli are random
// (a public key's cost does not depend on whether someone holds its
// private half).
func BenchmarkForgedSignature(b *testing.B) {
	now := time.Unix(1_800_000_000, 0)
	for _, bits := range []int{2048, 3072, 4096} {
		b.Run(fmt.Sprint(bits), func(b *testing.B) {
			// An odd modulus of exactly bits bits (a product of two
			// primes takes long to make, and nothing here needs one).
			nb := make([]byte, bits/8)
			rand.Read(nb)
			nb[0] |= 0x80
			nb[len(nb)-1] |= 1
			n := new(big.Int).SetBytes(nb)
			pub := &rsa.PublicKey{N: n, E: 65537}
			body, _ := json.Marshal(map[string]any{"keys": []any{jose.JSONWebKey{Key: pub, KeyID: "k1", Use: "sig"}}})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(body) }))
			defer srv.Close()
			s := New(Config{URL: srv.URL, Refresh: time.Hour}, Options{Logger: quiet()})
			s.Start()
			defer s.Close()
			if st := s.Status(); st.Keys != 1 {
				b.Fatalf("status %+v", st)
			}
			e, err := keys.NewExtractor(keys.Config{JWT: &keys.JWTConfig{KeySet: s}})
			if err != nil {
				b.Fatal(err)
			}
			hdr, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": "k1"})
			claims, _ := json.Marshal(map[string]any{"sub": "mallory", "exp": now.Unix() + 60})
			sig := make([]byte, bits/8)
			sig[0] = 1
			r := httptest.NewRequest("GET", "http://gw/api", nil)
			r.Header.Set("Authorization", "Bearer "+b64(hdr)+"."+b64(claims)+"."+b64(sig))
			for b.Loop() {
				if id := e.Identify(r, now); !id.TokenRejected {
					b.Fatal("a forged signature accepted")
				}
			}
		})
	}
}
