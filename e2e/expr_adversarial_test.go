package e2e

import (
	"testing"
)

// TestLimitTagSurvivesConnection: a client over a tag limit that names
// the tag header in its Connection header (asking every hop to drop it)
// still reaches the upstream tagged: the gateway's tag is its own, not a
// header of the client's connection.
func TestLimitTagSurvivesConnection(t *testing.T) {
	t.Parallel()
	body := `
[[limits]]
name = "soft"
rates = ["1/1h"]
algorithm = "fixed_window"
mode = "tag"
`
	g := startExprGateway(t, "memory", body, `"soft"`, "30s")
	for _, conn := range []string{"X-RateLimit-Exceeded", "x-ratelimit-exceeded", "keep-alive, X-Ratelimit-Exceeded"} {
		hdr := map[string]string{"Connection": conn, "X-RateLimit-Exceeded": "forged"}
		_ = rawDo(t, g.Listen, "GET", "/a", hdr) // the first is within the limit (or already over it)
		r := rawDo(t, g.Listen, "GET", "/a", hdr)
		if r.StatusCode != 200 || r.Header.Get("X-Seen-Tag") != "soft" {
			t.Fatalf("Connection: %s: %d, upstream saw tag %q, want 200 and \"soft\"", conn, r.StatusCode, r.Header.Get("X-Seen-Tag"))
		}
	}
	// A CGI-style upstream (PHP, WSGI, Rack) reads X_Ratelimit_Exceeded
	// as the same header, after the gateway's (Go writes names in order,
	// '_' after '-'): the client's respelling never reaches it.
	for _, name := range []string{"X_Ratelimit_Exceeded", "x_ratelimit-exceeded"} {
		r := rawDo(t, g.Listen, "GET", "/a", map[string]string{name: ""})
		if r.StatusCode != 200 || r.Header.Get("X-Seen-Tag") != "soft" || r.Header.Get("X-Seen-Respelled") != "" {
			t.Fatalf("%s: %d, upstream saw tag %q and respelled %q, want 200, \"soft\" and none", name, r.StatusCode, r.Header.Get("X-Seen-Tag"), r.Header.Get("X-Seen-Respelled"))
		}
	}
}
