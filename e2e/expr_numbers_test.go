package e2e

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// TestExprJWTLargeIntegerClaims: a key from an integer claim past 2^53
// (a 64-bit user id) keeps each user on a counter of its own: the
// claim is not rounded to a float64, which would put neighbouring ids
// (2^53 and 2^53+1, or any two ids 256 apart near 2^60) on one counter,
// so one user could use up another's budget.
func TestExprJWTLargeIntegerClaims(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, backend string) {
		body := `
[[limits]]
name = "per-uid"
rates = ["2/1h"]
algorithm = "fixed_window"
key = 'jwt.claims.uid'
on_error = "deny"

[[limits]]
name = "per-uid-str"
rates = ["2/1h"]
algorithm = "fixed_window"
key = 'string(jwt.claims.uid)'
on_error = "deny"
`
		data := map[string]any{"Body": body, "Limits": `"per-uid", "per-uid-str"`, "Upstream": echoUpstream(t), "Redis": "", "Timeout": "30s", "JWT": true}
		if backend == "redis" {
			rs := redistest.Standalone(t)
			data["Redis"], data["Prefix"] = rs.Addr, "exprbig:"
		}
		const secret = "e2e-secret-for-claims-0123456789abcdef"
		g := startGateway(t, "expr.toml.tmpl", gwOpts{Data: data, Env: []string{"E2E_JWT_SECRET=" + secret}})
		c := newClient(t, "")
		exp := time.Now().Add(time.Hour).Unix()
		tok := func(uid string) map[string]string {
			return map[string]string{"Authorization": "Bearer " + signClaims(secret, fmt.Sprintf(`{"sub":"u","uid":%s,"exp":%d}`, uid, exp))}
		}
		for _, pair := range [][2]string{{"9007199254740992", "9007199254740993"}, {"1152921504606846976", "1152921504606847000"}} {
			a1, a2 := get(t, c, g.url("/x"), tok(pair[0])), get(t, c, g.url("/x"), tok(pair[0]))
			b1 := get(t, c, g.url("/x"), tok(pair[1]))
			if statusList(a1, a2, b1) != "200,200,200" {
				t.Fatalf("uid %s twice then uid %s: %s (%s), want 200,200,200 (one counter per uid)", pair[0], pair[1], statusList(a1, a2, b1), b1.Body)
			}
		}
	})
}

// TestExprJWTClaimsUnverified: claims are read only from a token the
// gateway verified. Tokens with "alg":"none" and no signature, with the
// signature of another token, with HS256 spelt in another case, or
// expired, name org "acme" but count nothing for it (the limit is skipped
// under on_error = "skip"): acme's verified users still get their two.
func TestExprJWTClaimsUnverified(t *testing.T) {
	t.Parallel()
	body := `
[[limits]]
name = "per-org"
rates = ["2/1h"]
algorithm = "fixed_window"
key = 'jwt.claims.org'
on_error = "skip"
`
	data := map[string]any{"Body": body, "Limits": `"per-org"`, "Upstream": echoUpstream(t), "Redis": "", "Timeout": "30s", "JWT": true}
	const secret = "e2e-secret-for-claims-0123456789abcdef"
	g := startGateway(t, "expr.toml.tmpl", gwOpts{Data: data, Env: []string{"E2E_JWT_SECRET=" + secret}})
	c := newClient(t, "")
	enc := base64.RawURLEncoding
	exp := time.Now().Add(time.Hour).Unix()
	claims := fmt.Sprintf(`{"sub":"x","org":"acme","exp":%d}`, exp)
	good := signClaims(secret, claims)
	other := signClaims(secret, fmt.Sprintf(`{"sub":"y","org":"beta","exp":%d}`, exp))
	forged := []string{
		enc.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(claims)) + ".",
		enc.EncodeToString([]byte(`{"alg":"none"}`)) + "." + enc.EncodeToString([]byte(claims)),
		enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(claims)) + "." + strings.Split(other, ".")[2],
		enc.EncodeToString([]byte(`{"alg":"hs256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(claims)) + "." + strings.Split(good, ".")[2],
		signClaims(secret, fmt.Sprintf(`{"sub":"x","org":"acme","exp":%d}`, time.Now().Add(-time.Hour).Unix())),
	}
	for i, tok := range forged {
		for j := 0; j < 3; j++ {
			if r := get(t, c, g.url("/x"), map[string]string{"Authorization": "Bearer " + tok}); r.Status == 429 {
				t.Fatalf("forged token %d, request %d: 429, want it not counted on acme's key", i, j)
			}
		}
	}
	h := map[string]string{"Authorization": "Bearer " + good}
	a1, a2, a3 := get(t, c, g.url("/x"), h), get(t, c, g.url("/x"), h), get(t, c, g.url("/x"), h)
	if statusList(a1, a2, a3) != "200,200,429" {
		t.Fatalf("acme after forged tokens: %s, want 200,200,429 (the forged ones counted nothing)", statusList(a1, a2, a3))
	}
}
