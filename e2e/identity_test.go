package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestForwardedForTrust: X-Forwarded-For,
// X-Real-IP and the user header change the identity only when the peer is
// a trusted proxy; from a trusted proxy the rightmost untrusted entry, over
// every header line, is the client. The limit is 2 per minute per client.
func TestForwardedForTrust(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "identity.toml.tmpl", gwOpts{
		Data: map[string]any{"Upstream": up.URL, "Trusted": `["127.0.0.1/32"]`, "ExemptIPs": "[]"},
	})
	seq := func(t *testing.T, c *http.Client, hdrs []map[string]string, want ...int) []*response {
		t.Helper()
		var out []*response
		for i, w := range want {
			r := get(t, c, g.url("/api"), hdrs[i%len(hdrs)])
			if r.Status != w {
				t.Fatalf("request %d with %v: got %s, want %d", i+1, hdrs[i%len(hdrs)], r, w)
			}
			out = append(out, r)
		}
		return out
	}

	t.Run("spoofed XFF from an untrusted peer is ignored", func(t *testing.T) {
		c := newClient(t, "127.0.0.2")
		rs := seq(t, c, []map[string]string{
			{"X-Forwarded-For": "1.1.1.1", "X-Real-IP": "4.4.4.1"},
			{"X-Forwarded-For": "2.2.2.2, 127.0.0.1", "X-Real-IP": "4.4.4.2"},
			{"X-Forwarded-For": "3.3.3.3", "X-Real-IP": "4.4.4.3"},
		}, 200, 200, 429)
		for _, r := range rs[:2] {
			s := r.echo(t)
			if got := s.Header.Values("X-Forwarded-For"); len(got) != 1 || got[0] != "127.0.0.2" {
				t.Errorf("upstream X-Forwarded-For = %q, want [127.0.0.2] (built by the gateway)", got)
			}
			if got := s.Header.Get("X-Real-Ip"); got != "" {
				t.Errorf("upstream got the client's X-Real-IP %q", got)
			}
		}
	})
	t.Run("user header from an untrusted peer is ignored", func(t *testing.T) {
		c := newClient(t, "127.0.0.3")
		rs := seq(t, c, []map[string]string{{"X-User-ID": "alice"}, {"X-User-ID": "bob"}, {"X-User-ID": "carol"}}, 200, 200, 429)
		if got := rs[0].echo(t).Header.Get("X-User-Id"); got != "" {
			t.Errorf("upstream got the untrusted client's X-User-ID %q", got)
		}
	})
	t.Run("XFF from a trusted proxy is believed", func(t *testing.T) {
		c := newClient(t, "127.0.0.1")
		rs := seq(t, c, []map[string]string{{"X-Forwarded-For": "9.9.9.1"}}, 200, 200, 429)
		s := rs[0].echo(t)
		if got := strings.Join(s.Header.Values("X-Forwarded-For"), ", "); got != "9.9.9.1, 127.0.0.1" {
			t.Errorf("upstream X-Forwarded-For = %q, want the trusted chain plus the peer: \"9.9.9.1, 127.0.0.1\"", got)
		}
		seq(t, c, []map[string]string{{"X-Forwarded-For": "9.9.9.2"}}, 200)
	})
	t.Run("rightmost untrusted entry wins", func(t *testing.T) {
		c := newClient(t, "127.0.0.1")
		seq(t, c, []map[string]string{
			{"X-Forwarded-For": "evil, 6.6.6.6"},
			{"X-Forwarded-For": "1.2.3.4, 6.6.6.6"},
			{"X-Forwarded-For": "5.5.5.5, 6.6.6.6, 127.0.0.1"},
		}, 200, 200, 429)
	})
	t.Run("XFF over several header lines", func(t *testing.T) {
		c := newClient(t, "127.0.0.1")
		for i, want := range []int{200, 200} {
			req, _ := http.NewRequest("GET", g.url("/api"), nil)
			req.Header.Add("X-Forwarded-For", "7.7.7.7")
			req.Header.Add("X-Forwarded-For", "8.8.8.8")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Fatalf("request %d: status %d, want %d", i+1, resp.StatusCode, want)
			}
		}
		// The client was 8.8.8.8, the last entry of the last line.
		seq(t, c, []map[string]string{{"X-Forwarded-For": "8.8.8.8"}}, 429)
	})
	t.Run("user header from a trusted proxy is believed", func(t *testing.T) {
		c := newClient(t, "127.0.0.1")
		seq(t, c, []map[string]string{{"X-User-ID": "dave", "X-Forwarded-For": "10.9.9.9"}}, 200, 200, 429)
		seq(t, c, []map[string]string{{"X-User-ID": "erin", "X-Forwarded-For": "10.9.9.9"}}, 200)
	})
}

// TestGatewayOwnedHeadersStripped: client copies
// of identity and forwarding headers, path and method overrides, and
// headers the client lists in Connection, never reach the upstream; the X-Forwarded-* the gateway
// builds do, even when the client names them in Connection.
func TestGatewayOwnedHeadersStripped(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "identity.toml.tmpl", gwOpts{
		Data: map[string]any{"Upstream": up.URL, "Trusted": `["127.0.0.1/32"]`, "ExemptIPs": "[]"},
	})
	c := newClient(t, "127.0.0.2")
	r := get(t, c, g.url("/api/h?q=1"), map[string]string{
		"X-Real-IP":         "6.6.6.6",
		"X-User-ID":         "admin",
		"X-Gateway-User":    "admin",
		"X-Consumer-ID":     "admin",
		"X-Forwarded-For":   "6.6.6.6",
		"X-Forwarded-Host":  "evil.example",
		"X-Forwarded-Proto": "https",
		"Forwarded":         "for=6.6.6.6;proto=https",
		"Connection":        "X-Custom-Hop, X-Forwarded-For, X-Forwarded-Host, Keep-Alive",
		"X-Custom-Hop":      "secret",
		// A path or method the upstream would serve instead of the
		// request line's, past the route and limits that judged it.
		"X-Original-URL":         "/admin/delete-all",
		"X-Rewrite-URL":          "/admin/delete-all",
		"X-HTTP-Method-Override": "DELETE",
		"X-HTTP-Method":          "DELETE",
		"X-Method-Override":      "DELETE",
		"Keep-Alive":             "timeout=5",
		"Proxy-Connection":       "keep-alive",
		"X-Kept":                 "yes",
	})
	if r.Status != 200 {
		t.Fatalf("got %s", r)
	}
	s := r.echo(t)
	for _, h := range []string{"X-Real-Ip", "X-User-Id", "X-Gateway-User", "X-Consumer-Id", "Forwarded",
		"X-Custom-Hop", "Keep-Alive", "Proxy-Connection",
		"X-Original-Url", "X-Rewrite-Url", "X-Http-Method-Override", "X-Http-Method", "X-Method-Override"} {
		if v := s.Header.Values(h); len(v) > 0 {
			t.Errorf("upstream received client-supplied %s: %q", h, v)
		}
	}
	if v := s.Header.Values("X-Forwarded-For"); len(v) != 1 || v[0] != "127.0.0.2" {
		t.Errorf("upstream X-Forwarded-For = %q, want [127.0.0.2]", v)
	}
	if v := s.Header.Values("X-Forwarded-Host"); len(v) != 1 || v[0] != g.Listen {
		t.Errorf("upstream X-Forwarded-Host = %q, want [%s] (the Host the client used)", v, g.Listen)
	}
	if v := s.Header.Values("X-Forwarded-Proto"); len(v) != 1 || v[0] != "http" {
		t.Errorf("upstream X-Forwarded-Proto = %q, want [http]", v)
	}
	if s.Header.Get("X-Kept") != "yes" {
		t.Errorf("an end-to-end header was dropped: %v", s.Header)
	}
	if s.Path != "/api/h" || s.RawQuery != "q=1" {
		t.Errorf("upstream saw %s?%s, want /api/h?q=1", s.Path, s.RawQuery)
	}
	// No identity header unless configured (README, "Responses"). The only place the
	// client address may appear is the X-Forwarded-For the gateway built.
	for k, vs := range s.Header {
		if k == "X-Forwarded-For" {
			continue
		}
		for _, v := range vs {
			if strings.Contains(v, "127.0.0.2") || strings.Contains(v, "6.6.6.6") {
				t.Errorf("upstream header %s: %q carries a client identity", k, v)
			}
		}
	}
}

// TestMadeUpAPIKeyDoesNotUnseatUser: with the default source order, a user
// the trusted proxy vouches for who adds a fresh random X-API-Key to every
// request is still one client (2 per minute); the API key counts only for
// requests without a verified user. With the API key first, the random
// keys gave the user a new budget on every request.
func TestMadeUpAPIKeyDoesNotUnseatUser(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "identity_default.toml.tmpl", gwOpts{Data: map[string]any{"Upstream": up.URL}})
	c := newClient(t, "127.0.0.1")
	for i, want := range []int{200, 200, 429, 429} {
		h := map[string]string{"X-User-ID": "alice", "X-API-Key": fmt.Sprintf("random-%d", i)}
		if r := get(t, c, g.url("/api"), h); r.Status != want {
			t.Fatalf("request %d as alice with a new API key: got %s, want %d", i+1, r, want)
		}
	}
	// Without a user, the API key is the client: another budget.
	if r := get(t, c, g.url("/api"), map[string]string{"X-API-Key": "k1"}); r.Status != 200 {
		t.Fatalf("API key alone: got %s, want 200", r)
	}
	code, _, stderr := runGateway(t, nil, "validate", "--config", g.Config)
	if code != 0 || strings.Contains(stderr, "api_key comes before user") {
		t.Fatalf("validate of the default order: exit %d, stderr %s", code, stderr)
	}
}
