package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"testing"
	"time"
)

// hs256 signs a token with the claims sub and exp.
func hs256(t *testing.T, secret, sub string, exp time.Time) string {
	t.Helper()
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." +
		enc.EncodeToString([]byte(fmt.Sprintf(`{"sub":%q,"exp":%d}`, sub, exp.Unix())))
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(signed))
	return signed + "." + enc.EncodeToString(m.Sum(nil))
}

// TestJWTExpiryOnWallClock: a token's exp is a wall-clock instant, so it is
// judged on the wall clock, not on the gateway's decision clock (monotonic
// since startup, here started an hour behind). Tokens that expired a minute
// ago are no identity: their two holders are one client, the IP, with one
// request a minute between them. Judged on the decision clock, both were
// still valid and each holder had a budget of its own.
func TestJWTExpiryOnWallClock(t *testing.T) {
	t.Parallel()
	const secret = "e2e-secret-of-at-least-32-bytes-length"
	up := newUpstream(t)
	g := startGateway(t, "identity_jwt.toml.tmpl", gwOpts{
		Data: map[string]any{"Upstream": up.URL},
		Env:  []string{"E2E_JWT_SECRET=" + secret, "GATEWAY_TEST_CLOCK_OFFSET=-1h"},
	})
	bearer := func(sub string, exp time.Time) map[string]string {
		return map[string]string{"Authorization": "Bearer " + hs256(t, secret, sub, exp)}
	}
	valid := time.Now().Add(time.Hour)
	c := newClient(t, "127.0.0.1")
	for _, sub := range []string{"carol", "dave"} {
		if r := get(t, c, g.url("/api"), bearer(sub, valid)); r.Status != 200 {
			t.Fatalf("valid token of %s: got %s, want 200 (a budget of its own)", sub, r)
		}
	}
	expired := time.Now().Add(-time.Minute)
	c2 := newClient(t, "127.0.0.2")
	for i, sub := range []string{"alice", "bob"} {
		want := []int{200, 429}[i]
		if r := get(t, c2, g.url("/api"), bearer(sub, expired)); r.Status != want {
			t.Fatalf("token of %s that expired a minute ago: got %s, want %d (no identity: the IP's one budget)", sub, r, want)
		}
	}
}
