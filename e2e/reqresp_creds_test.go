package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestHideCredentials: on a route with hide_credentials the API key (its
// header and its query parameter, in any escaping of the name) and the
// JWT header's bearer token, valid or not, are removed before
// forwarding; the rest of the query reaches the upstream byte for byte,
// and a header rule can still name the caller ({client}). Another
// scheme in Authorization (Basic) is not the gateway's credential and
// passes; so does everything on a route without the setting. Mutations
// checked: without the deletions in messages.rewrite each credential row
// fails; re-encoding the query (url.Values) fails "query kept"; without
// the identity resolved and put in the context for a rule naming
// {client} (serve, proceed: Route.NeedsIdentity), X-Caller is empty.
func TestHideCredentials(t *testing.T) {
	t.Parallel()
	const secret = "e2e-secret-of-at-least-32-bytes-length"
	up := newUpstream(t)
	f := startMessages(t, "", fmt.Sprintf(`api_key_query = "api_key"

[identity.jwt]
hs256_secret_env = "E2E_JWT_SECRET"

[[routes]]
name = "hidden"
path_prefix = "/hidden"
upstream = %q
hide_credentials = true
request_headers = { set = { "X-Caller" = "{client}" } }

[[routes]]
name = "open"
path_prefix = "/open"
upstream = %[1]q
`, up.URL), "E2E_JWT_SECRET="+secret)
	c := newClient(t, "")
	valid := "Bearer " + hs256(t, secret, "alice", time.Now().Add(time.Hour))
	expired := "Bearer " + hs256(t, secret, "alice", time.Now().Add(-time.Hour))

	s := get(t, c, f.url("/hidden/x?a=1&api_key=k1&b=%41%2b+c&API_KEY=other&api%5Fkey=k2&z"), map[string]string{"X-API-Key": "k0"}).echo(t)
	if s.Header.Get("X-Api-Key") != "" {
		t.Errorf("API key header reached the upstream: %q", s.Header.Values("X-Api-Key"))
	}
	if s.RawQuery != "a=1&b=%41%2b+c&API_KEY=other&z" {
		t.Errorf("query kept: upstream saw %q, want %q (the key parameters gone, the rest as sent)", s.RawQuery, "a=1&b=%41%2b+c&API_KEY=other&z")
	}
	if s.Header.Get("X-Caller") == "" {
		t.Errorf("{client} empty on a hide_credentials route")
	}
	for _, tc := range []struct{ name, auth, want string }{
		{"verified token", valid, ""},
		{"expired token", expired, ""},
		{"garbage bearer", "Bearer not.a.jwt", ""},
		{"basic", "Basic YWxpY2U6cHc=", "Basic YWxpY2U6cHc="},
	} {
		s := get(t, c, f.url("/hidden/x"), map[string]string{"Authorization": tc.auth}).echo(t)
		if got := s.Header.Get("Authorization"); got != tc.want {
			t.Errorf("%s: upstream Authorization %q, want %q", tc.name, got, tc.want)
		}
	}
	s = get(t, c, f.url("/open/x?api_key=k1&b=2"), map[string]string{"X-API-Key": "k0", "Authorization": valid}).echo(t)
	if s.Header.Get("X-Api-Key") != "k0" || s.Header.Get("Authorization") != valid || s.RawQuery != "api_key=k1&b=2" {
		t.Errorf("a route without hide_credentials changed credentials: %+v", s)
	}
}

// TestHideCredentialsConsumer: with a consumer registry, a route that
// hides the API key still tells the upstream who called: the consumer
// and plan forward headers, and header rules naming {consumer}, {plan}
// and {client} (the consumer's name, as the access log shows it), on a
// route without limits. Mutation checked: without the consumer and plan
// in the template values (messages.values), X-Caller is "//acme".
func TestHideCredentialsConsumer(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	reg := filepath.Join(t.TempDir(), "consumers.toml")
	writeFileAtomic(t, reg, []byte(fmt.Sprintf("[[consumers]]\nname = \"acme\"\nplan = \"pro\"\napi_keys_sha256 = [%q]\n", keySum("acme-key"))))
	f := startMessages(t, "", fmt.Sprintf(`
[consumers]
file = %q
forward_headers = { consumer = "X-Consumer", plan = "X-Plan" }

[[plans]]
name = "pro"

[[routes]]
name = "hidden"
path_prefix = "/"
upstream = %q
hide_credentials = true
request_headers = { set = { "X-Caller" = "{consumer}/{plan}/{client}" } }
`, reg, up.URL))
	s := get(t, newClient(t, ""), f.url("/x"), map[string]string{"X-API-Key": "acme-key", "X-Consumer": "spoofed"}).echo(t)
	if s.Header.Get("X-Api-Key") != "" {
		t.Errorf("the API key reached the upstream")
	}
	if s.Header.Get("X-Consumer") != "acme" || s.Header.Get("X-Plan") != "pro" || s.Header.Get("X-Caller") != "acme/pro/acme" {
		t.Errorf("upstream saw X-Consumer %q, X-Plan %q, X-Caller %q; want acme, pro, acme/pro/acme",
			s.Header.Get("X-Consumer"), s.Header.Get("X-Plan"), s.Header.Get("X-Caller"))
	}
}
