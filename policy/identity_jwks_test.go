package policy

import (
	"testing"
	"time"

	"github.com/tollgate/gateway/policy/config"
)

// TestJWKSConfig: the key set's settings as validate judges them; the
// hostile and mistaken values an operator (or a template) may write.
func TestJWKSConfig(t *testing.T) {
	jwks := func(f func(j *config.JWTConfig)) func(c *config.Config) {
		return func(c *config.Config) {
			c.Identity.JWT.Audience = "orders-api"
			c.Identity.JWT.Issuer = "https://idp.example"
			f(&c.Identity.JWT)
		}
	}
	testProblems(t, base, []problemCase{
		{"jwks_url https", jwks(func(j *config.JWTConfig) { j.JWKSURL = "https://idp.example/keys" }), nil},
		{"jwks_url http to loopback", jwks(func(j *config.JWTConfig) { j.JWKSURL = "http://127.0.0.1:8080/keys" }), nil},
		{"oidc_issuer with allow-list", jwks(func(j *config.JWTConfig) {
			j.OIDCIssuer, j.Algorithms = "https://idp.example/realms/x", []string{"RS256", "EdDSA"}
		}), nil},
		{"jwks_url plain http beyond loopback", jwks(func(j *config.JWTConfig) { j.JWKSURL = "http://idp.example/keys" }),
			[]string{`identity.jwt.jwks_url: plain http is accepted only to a loopback host`}},
		{"jwks_url with credentials", jwks(func(j *config.JWTConfig) { j.JWKSURL = "https://u:p@idp.example/keys" }),
			[]string{`identity.jwt.jwks_url: credentials in the URL are not accepted`}},
		{"jwks_url not a URL", jwks(func(j *config.JWTConfig) { j.JWKSURL = "idp.example/keys" }),
			[]string{`identity.jwt.jwks_url: "idp.example/keys" has no host`}},
		{"oidc_issuer with a query", jwks(func(j *config.JWTConfig) { j.OIDCIssuer = "https://idp.example/?tenant=1" }),
			[]string{`identity.jwt.oidc_issuer: an issuer has no query`}},
		{"jwks_url and oidc_issuer", jwks(func(j *config.JWTConfig) {
			j.JWKSURL, j.OIDCIssuer = "https://idp.example/keys", "https://idp.example"
		}), []string{`identity.jwt: set only one of`}},
		{"jwks_url and a secret", jwks(func(j *config.JWTConfig) { j.JWKSURL, j.HS256SecretEnv = "https://idp.example/keys", "S" }),
			[]string{`identity.jwt: set only one of`}},
		{"HS256 in the allow-list", jwks(func(j *config.JWTConfig) {
			j.JWKSURL, j.Algorithms = "https://idp.example/keys", []string{"RS256", "HS256"}
		}), []string{`identity.jwt.algorithms[1]: "HS256" is not one of RS256, RS384, RS512, ES256, ES384, EdDSA`}},
		{"none in the allow-list", jwks(func(j *config.JWTConfig) { j.JWKSURL, j.Algorithms = "https://idp.example/keys", []string{"none"} }),
			[]string{`identity.jwt.algorithms[0]: "none" is not one of`}},
		{"duplicate algorithm", jwks(func(j *config.JWTConfig) {
			j.JWKSURL, j.Algorithms = "https://idp.example/keys", []string{"ES256", "ES256"}
		}), []string{`identity.jwt.algorithms[1]: duplicate "ES256"`}},
		{"allow-list with a key file", jwks(func(j *config.JWTConfig) { j.RS256PublicKeyFile, j.Algorithms = "k.pem", []string{"RS256"} }),
			[]string{`identity.jwt.algorithms: applies to jwks_url and oidc_issuer only`}},
		{"refresh too short", jwks(func(j *config.JWTConfig) { j.JWKSURL, j.JWKSRefresh = "https://idp.example/keys", "100ms" }),
			[]string{`identity.jwt.jwks_refresh: must be in 1s..24h, got 100ms`}},
		{"refresh too long", jwks(func(j *config.JWTConfig) { j.JWKSURL, j.JWKSRefresh = "https://idp.example/keys", "2d" }),
			[]string{`identity.jwt.jwks_refresh: must be in 1s..24h, got 2d`}},
		{"jwks_url without audience", jwks(func(j *config.JWTConfig) { j.JWKSURL, j.Audience = "https://idp.example/keys", "" }),
			[]string{`identity.jwt.audience: required with jwks_url and oidc_issuer`}},
		{"oidc_issuer without audience", jwks(func(j *config.JWTConfig) { j.OIDCIssuer, j.Audience = "https://idp.example/realm", "" }),
			[]string{`identity.jwt.audience: required with jwks_url and oidc_issuer`}},
		{"jwks_url without issuer", jwks(func(j *config.JWTConfig) { j.JWKSURL, j.Issuer = "https://idp.example/keys", "" }),
			[]string{`identity.jwt.issuer: required with jwks_url`}},
		{"oidc_issuer without issuer (it is implied)", jwks(func(j *config.JWTConfig) { j.OIDCIssuer, j.Issuer = "https://idp.example/realm", "" }), nil},
		{"refresh zero", jwks(func(j *config.JWTConfig) { j.JWKSURL, j.JWKSRefresh = "https://idp.example/keys", "0s" }),
			[]string{`identity.jwt.jwks_refresh: must be positive, got 0s`}},
	})
}

// TestJWKSCompile: Compile reads nothing for a key set, leaves its tokens
// refused until the serving process binds the set, and takes oidc_issuer
// as the expected iss unless issuer is set.
func TestJWKSCompile(t *testing.T) {
	c := base()
	c.Identity.JWT.OIDCIssuer = "https://idp.example/realm"
	c.Identity.JWT.Audience = "orders-api"
	c.Identity.JWT.JWKSRefresh = "10m"
	p, err := Compile(c, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.JWKS == nil || *p.JWKS != (JWKS{Issuer: "https://idp.example/realm", Refresh: 10 * time.Minute}) {
		t.Fatalf("JWKS %+v", p.JWKS)
	}
	if p.identity.JWT.Issuer != "https://idp.example/realm" {
		t.Errorf("expected iss %q", p.identity.JWT.Issuer)
	}
	c.Identity.JWT.Issuer = "https://tokens.example"
	if p, err = Compile(c, func(string) string { return "" }, nil); err != nil || p.identity.JWT.Issuer != "https://tokens.example" {
		t.Errorf("issuer set: %v, expected iss %q", err, p.identity.JWT.Issuer)
	}
}
