package e2e

import (
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// coreBody is the limits and routes of the core cases: a 3/minute limit
// per client on a proxied route, a shared global limit layered under a
// route limit, a cost header, and a limit that rejects requests without
// an API key.
func coreBody(upstream string) string {
	return fmt.Sprintf(`
[[limits]]
name = "per-client"
rates = ["3/minute"]
algorithm = "sliding_window_log"

[[limits]]
name = "global"
rates = ["5/minute"]
algorithm = "fixed_window"
cost_header = "X-Cost"

[[limits]]
name = "route-a"
rates = ["2/minute"]
algorithm = "token_bucket"

[[limits]]
name = "keyed"
rates = ["10/minute"]
by = ["api_key"]
on_missing = "reject"

[[routes]]
name = "api"
path_prefix = "/api"
upstream = %q
limits = ["per-client"]

[[routes]]
name = "a"
path_prefix = "/a"
respond = { body = "a" }
limits = ["global", "route-a"]

[[routes]]
name = "b"
path_prefix = "/b"
respond = { body = "b" }
limits = ["global"]

[[routes]]
name = "keyed"
path_prefix = "/keyed"
respond = { body = "k" }
limits = ["keyed"]
`, upstream)
}

// TestCoreLimitsEveryProtocol runs the core limiting cases on HTTP/1.1,
// cleartext HTTP/2 and HTTP/2 over TLS, on the memory store and on Redis:
// the answers, headers and counts are the same on every one.
func TestCoreLimitsEveryProtocol(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"memory", "redis"} {
		for _, pr := range protocols {
			t.Run(store+"/"+pr.name, func(t *testing.T) {
				t.Parallel()
				up := newUpstream(t)
				f := startFront(t, pr, store == "redis", coreBody(up.URL))
				c := f.client(t)
				checkProto(t, c, f.url("/nowhere"), pr)

				// 3 per minute per client: three forwarded with the
				// headers counting down, the fourth a 429 not forwarded.
				const policy = `"per-client";q=3;w=60`
				for i := int64(1); i <= 3; i++ {
					r := do(t, c, "GET", f.url("/api/x"), map[string]string{"X-API-Key": "alice"})
					if r.Status != http.StatusOK {
						t.Fatalf("request %d: %s", i, r)
					}
					r.echo(t)
					checkStyles(t, r, []string{"ietf"}, policy, want{limit: 3, window: 60, remaining: 3 - i})
				}
				r := do(t, c, "GET", f.url("/api/x"), map[string]string{"X-API-Key": "alice"})
				checkStyles(t, r, []string{"ietf"}, policy, want{limit: 3, window: 60, denied: true})
				check429Body(t, r, "per-client")
				if n := up.count(); n != 3 {
					t.Errorf("upstream received %d requests, want 3", n)
				}
				// Another client has its own budget.
				if r := do(t, c, "GET", f.url("/api/x"), map[string]string{"X-API-Key": "bob"}); r.Status != http.StatusOK {
					t.Errorf("another client after alice was limited: %s", r)
				}

				// Layered limits: the route's denial takes nothing from
				// the global one; costs count as declared.
				step := func(path, cost string, status int, violated ...string) {
					t.Helper()
					h := map[string]string{"X-API-Key": "carol"}
					if cost != "" {
						h["X-Cost"] = cost
					}
					r := do(t, c, "GET", f.url(path), h)
					if r.Status != status {
						t.Fatalf("%s cost=%q: %s, want %d", path, cost, r, status)
					}
					if status == http.StatusTooManyRequests {
						check429Body(t, r, violated...)
					}
				}
				step("/a", "", 200)
				step("/a", "", 200)
				step("/a", "", 429, "route-a") // global 2 of 5
				step("/b", "2", 200)           // global 4 of 5
				step("/b", "2", 429, "global") // would be 6
				step("/b", "1", 200)           // 5 of 5: the denials took nothing
				step("/b", "1", 429, "global")

				// A limit by API key rejects a request without one.
				if r := do(t, c, "GET", f.url("/keyed"), nil); r.Status != http.StatusUnauthorized {
					t.Errorf("keyed without a key: %s, want 401", r)
				}
				if r := do(t, c, "GET", f.url("/keyed"), map[string]string{"X-API-Key": "dave"}); r.Status != http.StatusOK {
					t.Errorf("keyed with a key: %s, want 200", r)
				}
			})
		}
	}
}

// TestCurlHTTP2 drives the gateway with curl --http2 over TLS and with
// prior knowledge over cleartext: a real client outside Go sees HTTP/2,
// the rate-limit headers and the 429.
func TestCurlHTTP2(t *testing.T) {
	t.Parallel()
	needCurlHTTP2(t)
	body := `
[[limits]]
name = "per-client"
rates = ["2/minute"]

[[routes]]
name = "r"
path_prefix = "/"
respond = { body = "ok" }
limits = ["per-client"]
`
	for _, pr := range protocols[1:] {
		t.Run(pr.name, func(t *testing.T) {
			t.Parallel()
			f := startFront(t, pr, false, body)
			args := []string{"-sS", "-D", "-", "-o", "/dev/null"}
			if pr.tls {
				ca := writeFile(t, t.TempDir(), "ca.pem", f.ca.PEM)
				args = append(args, "--http2", "--cacert", ca)
			} else {
				args = append(args, "--http2-prior-knowledge")
			}
			for i, want := range []string{"HTTP/2 200", "HTTP/2 200", "HTTP/2 429"} {
				out, err := exec.Command("curl", append(args, f.url("/x"))...).CombinedOutput()
				if err != nil {
					t.Fatalf("curl %v: %v\n%s", args, err, out)
				}
				head := string(out)
				if !strings.HasPrefix(head, want) {
					t.Fatalf("request %d: curl saw %q, want %q first", i+1, head, want)
				}
				if !strings.Contains(strings.ToLower(head), `ratelimit-policy: "per-client";q=2;w=60`) {
					t.Errorf("request %d: no RateLimit-Policy in %q", i+1, head)
				}
				if want == "HTTP/2 429" && !strings.Contains(strings.ToLower(head), "retry-after: ") {
					t.Errorf("429 without Retry-After: %q", head)
				}
			}
		})
	}
}
