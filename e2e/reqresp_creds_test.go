package e2e

import (
	"fmt"
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
// fails; re-encoding the query (url.Values) fails "query kept".
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
