package main

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/policytest"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
)

// TestKeysForReuse: a policy naming the running set's URL is bound to that
// set (no new fetch), one naming another URL gets a new set and the old
// one stops when the new is made live; a candidate naming the running
// set's URL verifies with it, one naming another refuses every token.
func TestKeysForReuse(t *testing.T) {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding
	body, _ := json.Marshal(map[string]any{"keys": []map[string]string{{"kty": "RSA", "kid": "k1",
		"n": enc.EncodeToString(k.N.Bytes()), "e": enc.EncodeToString(big.NewInt(int64(k.E)).Bytes())}}})
	var nf atomic.Int64
	fetches := func() int64 { return nf.Load() }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		nf.Add(1)
		w.Write(body)
	}))
	defer srv.Close()
	compile := func(url string) *policy.Policy {
		return policytest.Compile(t, func(c *config.Config) {
			c.Identity.JWT.JWKSURL = url
			c.Identity.JWT.JWKSRefresh = "1h"
			c.Identity.JWT.Audience = "orders-api"
			c.Identity.JWT.Issuer = "https://idp.example"
		})
	}
	hdr, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": "k1"})
	claims, _ := json.Marshal(map[string]any{"sub": "alice", "aud": "orders-api", "iss": "https://idp.example", "exp": time.Now().Add(time.Hour).Unix()})
	signed := enc.EncodeToString(hdr) + "." + enc.EncodeToString(claims)
	d := sha256.Sum256([]byte(signed))
	sig, _ := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
	tok := signed + "." + enc.EncodeToString(sig)
	user := func(p *policy.Policy) string {
		r := httptest.NewRequest("GET", "/api", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		return p.Identity.Identify(r, time.Now()).User
	}

	g := &gateway{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	defer g.useKeys(nil)
	p1 := compile(srv.URL + "/jwks")
	if user(p1) != "" {
		t.Fatal("an unbound policy verified a token")
	}
	set1, err := g.keysFor(p1)
	if err != nil {
		t.Fatal(err)
	}
	g.useKeys(set1)
	if user(p1) != "alice" || fetches() != 1 {
		t.Fatalf("bound policy: user %q after %d fetches", user(p1), fetches())
	}
	p2 := compile(srv.URL + "/jwks")
	if set2, _ := g.keysFor(p2); set2 != set1 || fetches() != 1 {
		t.Fatalf("same URL: new set %v, %d fetches", set2 != set1, fetches())
	}
	cand := compile(srv.URL + "/jwks")
	g.bindLiveKeys(cand)
	if user(cand) != "alice" {
		t.Error("a candidate naming the live set does not verify with it")
	}
	other := compile(srv.URL + "/other")
	g.bindLiveKeys(other)
	if user(other) != "" {
		t.Error("a candidate naming another set verified a token")
	}
	set3, err := g.keysFor(other)
	if err != nil || set3 == set1 || fetches() != 2 {
		t.Fatalf("another URL: %v, same set %v, %d fetches", err, set3 == set1, fetches())
	}
	g.useKeys(set3)
	if g.jwks.Load() != set3 {
		t.Error("the new set is not the running one")
	}
}
