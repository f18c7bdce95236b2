package policy

import (
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// defaultSyncInterval is limits[].sync_interval's default.
const defaultSyncInterval = "100ms"

// buildSync compiles a limit's sync, sync_interval and lease_size into
// rl.Batch; ratelimit.Limit.Finish then judges the combination with the
// algorithm (which algorithms can be batched, the lease within the limit).
func buildSync(c *config.LimitConfig, rl *ratelimit.Limit, path string, e *problems) {
	switch c.Sync {
	case "", "exact":
		if c.SyncInterval != "" {
			e.add(path+".sync_interval", `applies only with sync = "batched"`)
		}
		if c.LeaseSize != 0 {
			e.add(path+".lease_size", `applies only with sync = "batched"`)
		}
		return
	case "batched":
		if c.Count == "response" && c.CostRequestJSON == "" {
			// A response-counted limit is checked without counting and
			// counted after the response: nothing a lease could hold.
			// (A token budget's reservation is a count: leases hold it,
			// and its settling goes to the store.)
			e.add(path+".sync", `"batched" cannot be combined with count = "response"`)
			return
		}
	default:
		e.add(path+".sync", "unknown value %q (want exact or batched)", c.Sync)
		return
	}
	b := &ratelimit.Batch{Lease: c.LeaseSize}
	iv := c.SyncInterval
	if iv == "" {
		iv = defaultSyncInterval
	}
	b.Interval = duration(iv, path+".sync_interval", true, e)
	if c.LeaseSize < 0 {
		e.add(path+".lease_size", "must be positive, got %d", c.LeaseSize)
	}
	if b.Lease == 0 && len(rl.Rates) > 0 {
		// A hundredth of the limit: a hot key costs the store about one
		// call per 1% of its budget.
		b.Lease = max(1, rl.Rates[0].Limit/100)
	}
	if len(rl.Rates) > 0 && b.Lease > rl.Rates[0].Limit {
		e.add(path+".lease_size", "must be at most the rate's limit, %d, got %d", rl.Rates[0].Limit, b.Lease)
	}
	rl.Batch = b
}
