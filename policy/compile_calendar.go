package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// maxZoneName bounds a timezone name: the longest IANA name is about 30
// bytes, and a name is looked up as a path in the zone database.
const maxZoneName = 64

// compileCalendar sets the quota settings of rl from c: timezone and
// month_starts_on, which only the quota algorithm takes, and the penalty,
// which every algorithm but concurrency takes on an enforced limit.
func compileCalendar(rl *ratelimit.Limit, c *config.LimitConfig, path string, e *problems) {
	quota := c.Algorithm == ratelimit.Quota.String()
	if c.Timezone != "" {
		switch loc, err := loadZone(c.Timezone); {
		case !quota:
			e.add(path+".timezone", "applies only to algorithm \"quota\"")
		case err != nil:
			e.add(path+".timezone", "%v", err)
		default:
			rl.Location = loc
		}
	}
	if c.MonthStartsOn != 0 {
		switch {
		case !quota:
			e.add(path+".month_starts_on", "applies only to algorithm \"quota\"")
		case c.MonthStartsOn < 1 || c.MonthStartsOn > 28:
			e.add(path+".month_starts_on", "must be in 1..28 (a day every month has), got %d", c.MonthStartsOn)
		default:
			rl.MonthStartsOn = c.MonthStartsOn
		}
	}
	if c.Penalty != "" {
		switch {
		case c.Algorithm == ratelimit.Concurrency.String():
			e.add(path+".penalty", "does not apply to algorithm \"concurrency\" (its denials depend on other requests in flight, not on the client's rate)")
		case c.Mode == "shadow":
			e.add(path+".penalty", "has no effect on a shadow limit, which never denies")
		case c.Sync == "batched":
			e.add(path+".penalty", `cannot be combined with sync = "batched" (a batched limit decides from local leases, which see no penalty box)`)
		}
	}
}

// loadZone returns the IANA zone name, refusing "Local" (the host's zone,
// which would make a configuration mean different periods on different
// hosts) and names that are not zone names at all.
func loadZone(name string) (*time.Location, error) {
	if len(name) > maxZoneName {
		return nil, fmt.Errorf("unknown time zone %.64q… (longer than %d bytes)", name, maxZoneName)
	}
	if name == "Local" {
		return nil, fmt.Errorf("time zone %q means the host's zone; name it (e.g. \"Europe/Berlin\") so that every gateway counts the same periods", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q (want an IANA name such as \"America/New_York\" or \"UTC\")", name)
	}
	return loc, nil
}

// quotaWarnings names the quota limits a memory store holds: their usage
// is lost when the gateway restarts and may be evicted when the store is
// full, so a client could get a new month's quota that way.
func quotaWarnings(p *Policy) []string {
	if p.Store.Backend != BackendMemory {
		return nil
	}
	var w []string
	for i, l := range p.Limits {
		if l.Limit != nil && l.Algorithm == ratelimit.Quota {
			w = append(w, fmt.Sprintf("limits[%d] (%q): a quota on the memory store is lost when the gateway restarts and may be evicted when store.memory.max_keys or max_bytes is reached (quota states are evicted last); use store.backend = \"redis\" for quotas that must last", i, l.Name))
		}
	}
	return w
}

// penaltyWarnings names the limits with a penalty whose key has a part a
// client may leave out (api_key, user, mtls, header:) with on_missing =
// "shared": every request without it shares the key "-", so a few
// keyless requests that the limit denies put every keyless client, from
// any address, in the penalty box. on_missing = "ip" or "reject" avoids
// it.
func penaltyWarnings(p *Policy) []string {
	var w []string
	for i, l := range p.Limits {
		if l.Limit == nil || l.Limit.Penalty <= 0 || l.OnMissing != OnMissingShared {
			continue
		}
		for _, part := range l.By {
			switch part.Kind {
			case keys.PartAPIKey, keys.PartUser, keys.PartMTLS, keys.PartHeader:
			default:
				continue
			}
			w = append(w, fmt.Sprintf("limits[%d].penalty (%q): with on_missing = \"shared\", every request without a value for key part %s shares one counter (\"-\"), so a few such requests that the limit denies put every client without one, from any address, in the penalty box; set on_missing = \"ip\" (counted and boxed per address) or \"reject\"", i, l.Name, part))
			break
		}
	}
	return w
}

// isMonth reports whether the rate s is written per month ("N/month").
func isMonth(s string) bool {
	_, unit, _ := strings.Cut(s, "/")
	return strings.TrimSpace(unit) == "month"
}
