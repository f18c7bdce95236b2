package e2e

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// clockSkewEnv is the binary's test-only clock offset (a Go duration added
// to its decision clock).
const clockSkewEnv = "GATEWAY_TEST_CLOCK_OFFSET"

// TestRedisDefaultClockIsExactAcrossSkewedGateways: two gateways on one
// Redis, B's clock 1.5 s ahead of A's, with the default store.clock. A
// `20/2s` sliding log: 30 requests through A admit 20; 30 more through B
// 0.7 s later admit none, since the window still holds A's 20. With each
// gateway's own clock, B would read A's entries as 2.2 s old, expired, and
// admit 20 more (40 in 0.7 s).
func TestRedisDefaultClockIsExactAcrossSkewedGateways(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	body := limitTOML("w", "20/2s", "sliding_window_log", "client") + routeTOML("r", "/w", "w")
	data := redisData(rs.Addr, nil, "deny", "500ms", body)
	a := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data})
	b := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data, Env: []string{clockSkewEnv + "=1500ms"}})
	for _, g := range []*gw{a, b} {
		if !strings.Contains(g.outputWith(`"clock":"store"`), `"clock":"store"`) {
			t.Fatalf("the startup line does not say \"clock\":\"store\":\n%s", g.output())
		}
	}
	key := func(int) map[string]string { return map[string]string{"X-API-Key": "skewed-client"} }
	start := time.Now()
	burst(30, []string{a.url("/w")}, key).check(t, 30, 20)
	time.Sleep(700 * time.Millisecond)
	second := burst(30, []string{b.url("/w")}, key)
	if took := time.Since(start); took > 1800*time.Millisecond {
		t.Skipf("the two bursts took %v, past the 2 s window on this loaded machine", took)
	}
	second.check(t, 30, 0)
}

// TestRedisLocalClockSkewWarned: with store.clock = "local" chosen
// explicitly, a gateway 1.5 s ahead of Redis warns at startup that its
// clock differs, and exports the skew it measured (about -1.5 s: Redis is
// behind) as tollgate_store_clock_skew_seconds.
func TestRedisLocalClockSkewWarned(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	data := redisData(rs.Addr, nil, "deny", "500ms", routeTOML("r", "/"))
	data["StoreExtra"] = `clock = "local"`
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data, Env: []string{clockSkewEnv + "=1500ms"}})
	if out := g.outputWith(`"clock":"local"`, "clock differs from Redis"); !strings.Contains(out, `"clock":"local"`) || !strings.Contains(out, "clock differs from Redis") {
		t.Errorf("no startup line with \"clock\":\"local\" and a skew warning:\n%s", g.output())
	}
	skew := scrape(t, g, "").family("tollgate_store_clock_skew_seconds")
	if len(skew) != 1 {
		t.Fatalf("tollgate_store_clock_skew_seconds: %v, want one series", skew)
	}
	for _, v := range skew {
		if math.Abs(v+1.5) > 0.25 {
			t.Errorf("measured skew %.3f s, want about -1.5 s", v)
		}
	}
}
