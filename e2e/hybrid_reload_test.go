package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// TestHybridReloadMidLease: a reload changes a limit's sync settings while
// its gateway holds a lease with units left (a fixed window of 20 per
// minute, on the store clock, the default). The limit's counters carry
// over (sync is not part of its identity) and the lease's unused units go
// back to Redis at the reload, so the window admits exactly its limit:
// 4 requests before the reload, 16 after, never more, none stranded.
func TestHybridReloadMidLease(t *testing.T) {
	t.Parallel()
	const exact = ""
	batched := func(lease, interval string) string {
		return "sync = \"batched\"\nlease_size = " + lease + "\nsync_interval = \"" + interval + "\"\n"
	}
	for _, tc := range []struct{ name, before, after string }{
		{"batched to exact", batched("10", "1m"), exact},
		{"exact to batched", exact, batched("10", "1m")},
		{"lease_size 10 to 3", batched("10", "1m"), batched("3", "1m")},
		{"sync_interval 1m to 20ms", batched("10", "1m"), batched("10", "20ms")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rs := redistest.Standalone(t)
			body := func(sync string) string {
				return "[[limits]]\nname = \"mid\"\nrates = [\"20/1m\"]\nalgorithm = \"fixed_window\"\nby = []\n" + sync + "\n" +
					routeTOML("mid", "/mid", "mid")
			}
			g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData(rs.Addr, nil, "deny", "2s", body(tc.before))})
			c := &http.Client{Timeout: 5 * time.Second}
			send := func(n int) (ok int) {
				for i := range n {
					switch r := get(t, c, g.url("/mid"), nil); r.Status {
					case 200:
						ok++
					case 429:
					default:
						t.Fatalf("request %d: %s", i, r)
					}
				}
				return ok
			}
			avoidWindowEdge(time.Minute)
			// Leases of 1, 2 and 4 units: 7 counted, 4 admitted, 3 held.
			if ok := send(4); ok != 4 {
				t.Fatalf("before the reload %d of 4 admitted", ok)
			}
			if want := map[bool]int64{true: 7, false: 4}[tc.before != exact]; windowCount(t, rs) != want {
				t.Fatalf("before the reload Redis counts %d, want %d", windowCount(t, rs), want)
			}
			if rd := reloadAndWait(t, g, map[string]any{"Body": body(tc.after)}); !rd.LastReload.OK {
				t.Fatalf("reload rejected: %+v", rd.LastReload)
			}
			if ok := send(30); ok != 16 {
				t.Errorf("after the reload %d of 30 admitted, want 16 (20 per window, 4 used)", ok)
			}
			if n := windowCount(t, rs); n != 20 {
				t.Errorf("Redis counts %d, want 20", n)
			}
		})
	}
}
