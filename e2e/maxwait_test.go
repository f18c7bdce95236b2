package e2e

import (
	"testing"
	"time"
)

// TestWaitBeyondMaxWait: a token bucket and a GCRA of burst 100,000
// refilled at one unit a year (366 days), each emptied by one request of
// its whole burst; the same request again would wait 100,000 years, more
// than any instant the search for it can name. It once galloped past
// int64 without end on the memory store, holding the shard's lock (the
// request never answered, nor any other of that shard), and on Redis
// overflowed the wait into a nonsense Retry-After. Now both stores answer
// at once: 429 with Retry-After the longest wait a decision reports (100
// times 366 days, 3,162,240,000 s), and the gateway keeps answering.
func TestWaitBeyondMaxWait(t *testing.T) {
	stores(t, func(t *testing.T, redis string) {
		body := ""
		for _, alg := range []string{"token_bucket", "gcra"} {
			body += `
[[limits]]
name = "` + alg + `"
algorithm = "` + alg + `"
rates = ["1/366d"]
burst = 100000
by = ["client"]
cost_header = "X-Cost"

[[routes]]
name = "` + alg + `"
path_prefix = "/` + alg + `"
respond = { status = 200, body = "ok" }
limits = ["` + alg + `"]
`
		}
		g := startGateway(t, "calendar.toml.tmpl", gwOpts{Data: map[string]any{"Redis": redis, "Body": body}})
		c := newClient(t, "")
		c.Timeout = 30 * time.Second // a decision that searches without end fails here
		for _, alg := range []string{"token_bucket", "gcra"} {
			hdr := map[string]string{"X-API-Key": "heavy", "X-Cost": "100000"}
			if r := get(t, c, g.url("/"+alg), hdr); r.Status != 200 {
				t.Fatalf("%s: the first request of the whole burst: %s", alg, r)
			}
			r := get(t, c, g.url("/"+alg), hdr)
			if r.Status != 429 {
				t.Fatalf("%s: the second request of the whole burst: %s, want 429", alg, r)
			}
			secs, ok := r.retryAfter(t)
			if want := int64(100 * 366 * 24 * 3600); !ok || secs != want {
				t.Errorf("%s: Retry-After %d (present %v), want %d (the longest wait reported):\n%s", alg, secs, ok, want, r)
			}
			if rl, want := r.Header.Get("RateLimit"), `"`+alg+`";r=0;t=3162240000`; rl != want {
				t.Errorf("%s: RateLimit %q, want %q", alg, rl, want)
			}
			// Another client of the same limit is decided as usual.
			if r := get(t, c, g.url("/"+alg), map[string]string{"X-API-Key": "light", "X-Cost": "1"}); r.Status != 200 {
				t.Fatalf("%s: another client after the denial: %s", alg, r)
			}
		}
	})
}
