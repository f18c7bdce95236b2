package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// TestRedisSlidingLogBound: on the Redis store a sliding_window_log is
// decoded whole on every call, so its limits may add up to 1,000 at most
// (docs/stores.md, "The Redis store"). `gateway validate` refuses a larger one with
// the field and the bound, while the memory store accepts it; a running
// gateway on Redis refuses an override that would raise a log past it
// (422 naming the bound) and accepts one at the bound. Before, up to about
// four million entries a key were accepted: one call on such a log held
// Redis for tens of seconds (BENCHMARKS.md).
func TestRedisSlidingLogBound(t *testing.T) {
	t.Parallel()
	cfg := func(backend string) string {
		path := filepath.Join(t.TempDir(), "gateway.toml")
		body := "[store]\nbackend = \"" + backend + "\"\n\n" +
			limitTOML("log", "5000/hour", "sliding_window_log", "client") + routeTOML("r", "/r", "log")
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	code, _, stderr := runGateway(t, nil, "validate", "--config", cfg("redis"))
	if code != 2 || !strings.Contains(stderr, "limits[0].rates") || !strings.Contains(stderr, "at most 1000") {
		t.Errorf("validate of a 5000/hour sliding_window_log on Redis: exit %d, want 2 naming limits[0].rates and the bound:\n%s", code, stderr)
	}
	if code, stdout, stderr := runGateway(t, nil, "validate", "--config", cfg("memory")); code != 0 {
		t.Errorf("validate of the same limit on the memory store: exit %d, want 0\n%s\n%s", code, stdout, stderr)
	}

	rs := redistest.Standalone(t)
	body := limitTOML("log", "100/hour", "sliding_window_log", "client") + routeTOML("r", "/r", "log")
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData(rs.Addr, nil, "deny", "1s", body)})
	exp := time.Now().Add(time.Hour)
	r := adminSend(t, g, "PUT", "/admin/overrides", "", overrideBody("log", "key=big", "5000/hour", exp, "too long a log"))
	if r.Status != 422 || !strings.Contains(string(r.Body), "at most 1000") {
		t.Errorf("override to 5000/hour on Redis: %s, want 422 naming the bound", r)
	}
	if r := adminSend(t, g, "PUT", "/admin/overrides", "", overrideBody("log", "key=big", "1000/hour", exp, "at the bound")); r.Status/100 != 2 {
		t.Errorf("override to 1000/hour on Redis: %s, want it accepted", r)
	}
}
