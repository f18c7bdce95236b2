package e2e

import (
	"strings"
	"testing"

	"github.com/tollgate/gateway/internal/redistest"
)

// TestRedisEvictionPolicyWarning: at startup the gateway warns about any
// maxmemory-policy but noeviction, volatile-lru included (every counter key
// has a TTL, so it evicts counters), naming the policy found and
// noeviction; noeviction and a Redis refusing CONFIG stay silent.
func TestRedisEvictionPolicyWarning(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		conf  string
		warns bool
	}{
		{"volatile-lru", "maxmemory-policy volatile-lru\n", true},
		{"allkeys-lru", "maxmemory-policy allkeys-lru\n", true},
		{"noeviction", "maxmemory-policy noeviction\n", false},
		{"config-refused", "maxmemory-policy allkeys-lru\nrename-command CONFIG \"\"\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rs := redistest.StandaloneConfig(t, tc.conf)
			g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData(rs.Addr, nil, "deny", "500ms", routeTOML("r", "/"))})
			var line string
			for _, l := range strings.Split(g.output(), "\n") {
				if strings.Contains(l, "may evict rate-limit counters") {
					line = l
				}
			}
			if (line != "") != tc.warns {
				t.Fatalf("warned %v, want %v; log:\n%s", line != "", tc.warns, g.output())
			}
			if tc.warns && (!strings.Contains(line, `"maxmemory-policy":"`+tc.name+`"`) || !strings.Contains(line, "noeviction")) {
				t.Errorf("the warning does not name %s and noeviction: %s", tc.name, line)
			}
		})
	}
}
