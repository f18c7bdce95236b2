package e2e

import (
	"testing"

	"github.com/tollgate/gateway/internal/redistest"
)

// TestFixedWindowAt2to53: a fixed window of 2^53 a day (the largest
// limit accepted) with a client-declared cost admits exactly 2^53 units
// a day on either store, alone (the one-hit path on Redis) and beside a
// second limit (the fixed-window path of two hits): 2^53 − 1 then 2 is
// one unit too many (429), 1 then fills it, and 1 more is a 429. On Redis
// the count and cost were summed in doubles, and 2^53 − 1 + 2 or
// 2^53 + 1 rounded down to 2^53, which is not past the limit: both were
// admitted, and every 1 after them too (the count never grew past 2^53).
func TestFixedWindowAt2to53(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			data := map[string]any{"Redis": ""}
			if backend == "redis" {
				data["Redis"] = redistest.Standalone(t).Addr
			}
			g := startGateway(t, "adv_fixed53.toml.tmpl", gwOpts{Data: data})
			c := newClient(t, "")
			for _, path := range []string{"/two", "/one"} {
				for i, step := range []struct {
					cost   string
					status int
				}{
					{"9007199254740991", 200},
					{"2", 429},
					{"1", 200},
					{"1", 429},
					{"1", 429},
				} {
					r := get(t, c, g.url(path), map[string]string{"X-Cost": step.cost})
					if r.Status != step.status {
						t.Fatalf("%s request %d (cost %s): %s, want %d", path, i+1, step.cost, r, step.status)
					}
				}
			}
		})
	}
}
