package main

import (
	"context"
	"net/url"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/telemetry"
	usagex "github.com/tollgate/gateway/usage"
)

// openUsage starts the usage export of [usage] (nil without a sink): its
// threshold notices are claimed on Redis when the store is Redis, so the
// fleet posts each once. Its metrics are registered with the gateway's.
func (g *gateway) openUsage(p *policy.Policy) error {
	if p.Usage == nil {
		return nil
	}
	o := usagex.Options{
		Sink: p.Usage.Sink.Reveal(), FlushInterval: p.Usage.FlushInterval, Timeout: p.Usage.Timeout,
		MaxPending: p.Usage.MaxPending, BatchSize: p.Usage.BatchSize, StopTimeout: p.Server.ShutdownTimeout,
		Logger: g.log, Source: usageSource(),
	}
	if g.rr != nil {
		o.Claimer, o.ClaimPrefix = redisClaimer{g.rr.client}, p.Store.Redis.Prefix
	}
	ex, err := usagex.New(o)
	if err != nil {
		return err
	}
	ex.SetNotify(p.NotifyAt())
	g.usage = ex
	g.usageReg, err = telemetry.RegisterUsageStats(g.otel.Meter(), func() telemetry.UsageStats {
		st := ex.Stats()
		return telemetry.UsageStats{Records: st.Records, Notices: st.Notices, Units: st.Units, Failures: st.Failures,
			DroppedUnits: st.DroppedUnits, DroppedRecords: st.DroppedRecords, DroppedNotices: st.DroppedNotices,
			Pending: st.Pending}
	})
	return err
}

// closeUsage flushes what the export holds (the servers have drained, so
// nothing more is counted), bounded by server.shutdown_timeout.
func (g *gateway) closeUsage() {
	if g.usageReg != nil {
		_ = g.usageReg.Unregister()
	}
	if g.usage == nil {
		return
	}
	if err := g.usage.Close(context.Background()); err != nil {
		g.log.Warn("usage export: final flush", "err", err)
	}
}

// usageSource is the CloudEvents source of this gateway's records.
func usageSource() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "/tollgate"
	}
	return "/tollgate/" + url.PathEscape(h)
}

// redisClaimer claims a threshold notice for one gateway of the fleet:
// the key is set to the claiming gateway's owner id unless set, and the
// claim is won when the key holds that id, so a claim retried after its
// answer was lost (Redis set the key, the reply timed out) is still won.
type redisClaimer struct{ c redis.UniversalClient }

// claimScript is SET key owner NX PX ttl, answering 1 also when the key
// already holds owner.
var claimScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if v == ARGV[1] then return 1 end
return 0`)

func (r redisClaimer) Claim(ctx context.Context, key, owner string, ttl time.Duration) (bool, error) {
	n, err := claimScript.Run(ctx, r.c, []string{key}, owner, ttl.Milliseconds()).Int()
	return n == 1, err
}
