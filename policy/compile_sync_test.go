package policy

import (
	"testing"
	"time"

	"github.com/tollgate/gateway/policy/config"
)

// TestSyncFields: sync, sync_interval and lease_size, accepted and
// rejected, with the exact problem line of each rejection.
func TestSyncFields(t *testing.T) {
	batched := func(c *config.Config) {
		c.Limits[0].Algorithm, c.Limits[0].Rates, c.Limits[0].Sync = "fixed_window", []string{"1000/minute"}, "batched"
	}
	tests := []struct {
		name   string
		mutate func(c *config.Config)
		want   string // "" = valid
	}{
		{"defaults", batched, ""},
		{"sliding counter", func(c *config.Config) { batched(c); c.Limits[0].Algorithm = "sliding_window_counter" }, ""},
		{"unknown sync", func(c *config.Config) { c.Limits[0].Sync = "lazy" }, `limits[0].sync: unknown value "lazy" (want exact or batched)`},
		{"interval without batched", func(c *config.Config) { c.Limits[0].SyncInterval = "1s" }, `limits[0].sync_interval: applies only with sync = "batched"`},
		{"lease without batched", func(c *config.Config) { c.Limits[0].LeaseSize = 5 }, `limits[0].lease_size: applies only with sync = "batched"`},
		{"gcra", func(c *config.Config) { batched(c); c.Limits[0].Algorithm = "gcra" },
			`limits[0]: sync = "batched" supports fixed_window and sliding_window_counter, not gcra`},
		{"sliding log", func(c *config.Config) { batched(c); c.Limits[0].Algorithm = "sliding_window_log" },
			`limits[0]: sync = "batched" supports fixed_window and sliding_window_counter, not sliding_window_log`},
		{"two rates", func(c *config.Config) { batched(c); c.Limits[0].Rates = []string{"10/s", "100/m"} }, `limits[0]: sync = "batched" requires exactly one rate`},
		{"shadow", func(c *config.Config) { batched(c); c.Limits[0].Mode = "shadow" }, `limits[0]: sync = "batched" applies to enforced limits`},
		{"interval", func(c *config.Config) { batched(c); c.Limits[0].SyncInterval = "10us" }, `limits[0]: sync_interval must be between 1ms and 1m0s, got 10µs`},
		{"bad interval", func(c *config.Config) { batched(c); c.Limits[0].SyncInterval = "soon" }, `limits[0].sync_interval: invalid duration "soon"`},
		{"lease above limit", func(c *config.Config) { batched(c); c.Limits[0].LeaseSize = 1001 }, `limits[0].lease_size: must be at most the rate's limit, 1000, got 1001`},
		{"count by response", func(c *config.Config) { batched(c); c.Limits[0].Count = "response" }, `limits[0].sync: "batched" cannot be combined with count = "response"`},
		{"negative lease", func(c *config.Config) { batched(c); c.Limits[0].LeaseSize = -1 }, `limits[0].lease_size: must be positive, got -1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.mutate(&c)
			p, err := Compile(c, func(string) string { return "" }, func(string) ([]byte, error) { return nil, nil })
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				b := p.Limits[0].Batch
				if b == nil || b.Interval != 100*time.Millisecond || b.Lease != 10 {
					t.Fatalf("batch = %+v, want 100ms and a lease of 10 (1%% of 1000)", b)
				}
				return
			}
			wantProblems(t, err, []string{tt.want})
		})
	}
}
