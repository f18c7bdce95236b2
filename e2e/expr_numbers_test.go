package e2e

import (
	"fmt"
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
