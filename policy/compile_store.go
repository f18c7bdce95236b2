package policy

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// minLeaseTTL and maxLeaseTTL bound store.redis.lease_ttl: a holder renews
// every third of a lease, which must leave room for a few store timeouts;
// a lease is also how long a crashed gateway's slots stay held.
const (
	minLeaseTTL = time.Second
	maxLeaseTTL = time.Hour
)

// minMemoryMaxBytes is the least store.memory.max_bytes accepted: 1 MiB,
// shared by up to 64 shards; less would evict on almost every new key.
const minMemoryMaxBytes = 1 << 20

func buildStore(c *config.StoreConfig, e *problems) Store {
	s := Store{MemoryMaxKeys: c.Memory.MaxKeys, MemoryMaxBytes: c.Memory.MaxBytes, RequireAtStartup: c.RequireAtStartup}
	switch c.Backend {
	case "memory":
		s.Backend = BackendMemory
	case "redis":
		s.Backend = BackendRedis
	default:
		e.add("store.backend", "unknown backend %q (want memory or redis)", c.Backend)
	}
	switch c.OnError {
	case "local":
		s.OnError = OnErrorLocal
	case "allow":
		s.OnError = OnErrorAllow
	case "deny":
		s.OnError = OnErrorDeny
	default:
		e.add("store.on_error", "unknown value %q (want local, allow or deny)", c.OnError)
	}
	s.Timeout = duration(c.Timeout, "store.timeout", true, e)
	switch c.Clock {
	case "":
		// Unset: a fleet sharing Redis decides on one clock, Redis's, so
		// that gateways whose clocks differ still admit exactly the limit.
		s.Clock = ratelimit.ClockLocal
		if c.Backend == "redis" {
			s.Clock = ratelimit.ClockStore
		}
	case "local":
		s.Clock = ratelimit.ClockLocal
	case "store":
		s.Clock = ratelimit.ClockStore
		if c.Backend != "redis" {
			e.add("store.clock", `"store" needs backend = "redis"`)
		}
	default:
		e.add("store.clock", "unknown value %q (want local or store)", c.Clock)
	}
	if c.Memory.MaxKeys < 1 {
		e.add("store.memory.max_keys", "must be positive, got %d", c.Memory.MaxKeys)
	}
	if m := c.Memory.MaxBytes; m != 0 && m < minMemoryMaxBytes {
		e.add("store.memory.max_bytes", "must be 0 (derived from the machine's memory) or at least %d, got %d", minMemoryMaxBytes, m)
	}
	r := &c.Redis
	s.Redis = RedisStore{URL: r.URL, Cluster: r.Cluster, SentinelMaster: r.Sentinel.Master,
		SentinelAddrs: r.Sentinel.Addrs, Prefix: r.Prefix, Username: r.Username, Coalesce: r.Coalesce}
	if c.Backend != "redis" {
		return s
	}
	s.Redis.LeaseTTL = duration(r.LeaseTTL, "store.redis.lease_ttl", true, e)
	if s.Redis.LeaseTTL > 0 && (s.Redis.LeaseTTL < minLeaseTTL || s.Redis.LeaseTTL > maxLeaseTTL) {
		e.add("store.redis.lease_ttl", "must be between %s and %s, got %s", minLeaseTTL, maxLeaseTTL, r.LeaseTTL)
	}
	set := 0
	for _, b := range []bool{r.URL != "", len(r.Cluster) > 0, r.Sentinel.Master != "" || len(r.Sentinel.Addrs) > 0} {
		if b {
			set++
		}
	}
	if set > 1 {
		e.add("store.redis", "set only one of url, cluster and sentinel")
	}
	if set == 0 {
		s.Redis.URL = config.DefaultRedisURL
	}
	if r.URL != "" {
		u, err := url.Parse(r.URL.Reveal())
		switch {
		case err != nil:
			e.add("store.redis.url", "invalid URL: %v", errors.Unwrap(err))
		case u.Scheme != "redis" && u.Scheme != "rediss":
			e.add("store.redis.url", "scheme must be redis or rediss, got %q", u.Scheme)
		case u.Host == "":
			e.add("store.redis.url", "missing host")
		}
	}
	for i, a := range r.Cluster {
		checkAddr(a, fmt.Sprintf("store.redis.cluster[%d]", i), false, e)
	}
	if r.Sentinel.Master != "" || len(r.Sentinel.Addrs) > 0 {
		if r.Sentinel.Master == "" {
			e.add("store.redis.sentinel.master", "is required with sentinel addrs")
		}
		if len(r.Sentinel.Addrs) == 0 {
			e.add("store.redis.sentinel.addrs", "at least one address is required")
		}
		for i, a := range r.Sentinel.Addrs {
			checkAddr(a, fmt.Sprintf("store.redis.sentinel.addrs[%d]", i), false, e)
		}
	}
	if r.Prefix == "" {
		e.add("store.redis.prefix", "must not be empty (keys would share the database's namespace)")
	}
	passwordSource(*r).check(e)
	return s
}
