package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// TestRedisDownLogIsJSON: a gateway whose Redis is killed mid-run writes
// only JSON lines to its standard error, requests or not, and the Redis
// client library's own messages come through the gateway's logger as
// structured warnings, throttled (a record a second at most, counting the
// ones held back). Before, go-redis wrote plain "redis: ..." lines into the
// JSON log, about three a second with the gateway idle.
func TestRedisDownLogIsJSON(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	body := limitTOML("l", "100/hour", "fixed_window", "client") + routeTOML("r", "/r", "l")
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData(rs.Addr, nil, "allow", "100ms", body)})
	c := newClient(t, "")
	get(t, c, g.url("/r"), nil)
	rs.Kill()
	start := time.Now()
	// Idle for a while, then a few requests, then idle again: the client's
	// pool, the store's background checks and the breaker's probes all run.
	time.Sleep(2 * time.Second)
	for range 20 {
		get(t, c, g.url("/r"), nil)
	}
	time.Sleep(2 * time.Second)
	out := stopAndRead(t, g)
	elapsed := time.Since(start)
	var lib int
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("line %d of the gateway's output is not JSON (%v): %q", i+1, err, line)
			continue
		}
		if rec["source"] != "go-redis" {
			continue
		}
		lib++
		if rec["level"] != "WARN" || rec["msg"] == "" || rec["msg"] == nil {
			t.Errorf("line %d: the Redis client's message is not a warning with a message: %q", i+1, line)
		}
		if _, ok := rec["suppressed_since_last_line"]; !ok {
			t.Errorf("line %d: the Redis client's message does not count the ones held back: %q", i+1, line)
		}
	}
	t.Logf("%d records of the Redis client's messages in %v", lib, elapsed)
	if lib == 0 {
		t.Errorf("no record of the Redis client's messages in %v with Redis down; want them structured:\n%s", elapsed, out)
	}
	// The bound follows the time that passed, whatever it was: a record a
	// second, and one more for the first second.
	if max := int(elapsed/time.Second) + 1; lib > max {
		t.Errorf("%d records of the Redis client's messages in %v, want at most %d (a second each):\n%s", lib, elapsed, max, out)
	}
}
