package policy

import (
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

// TestValidateFields: more rejected configurations, one field each, with
// the exact problem line (field path and message) each must produce.
// Together with TestValidate this walks every check of the compile step.
func TestValidateFields(t *testing.T) {
	redis := func(c *config.Config) { c.Store.Backend = "redis" }
	tests := []problemCase{
		// identity
		{"no source", func(c *config.Config) { c.Identity.Sources = nil }, []string{`identity.sources: at least one source is required`}},
		{"unknown source", func(c *config.Config) { c.Identity.Sources = []string{"api_key", "cookie"} }, []string{`identity.sources[1]: `}},
		{"duplicate source", func(c *config.Config) { c.Identity.Sources = []string{"ip", "ip"} }, []string{`identity.sources[1]: duplicate source ip`}},
		{"bad api key header", func(c *config.Config) { c.Identity.APIKeyHeader = "X Key" }, []string{`identity.api_key_header: invalid header name "X Key"`}},
		{"bad user header", func(c *config.Config) {
			c.Identity.UserHeader, c.Identity.TrustedProxies = "X:User", []string{"10.0.0.0/8"}
		}, []string{`identity.user_header: invalid header name "X:User"`}},
		{"ipv6 prefix 0", func(c *config.Config) { c.Identity.IPv6Prefix = 0 }, []string{`identity.ipv6_prefix: must be in 1..128, got 0`}},
		{"ipv6 prefix 129", func(c *config.Config) { c.Identity.IPv6Prefix = 129 }, []string{`identity.ipv6_prefix: must be in 1..128, got 129`}},
		{"max value len", func(c *config.Config) { c.Identity.MaxValueLen = 1<<16 + 1 }, []string{`identity.max_value_len: must be in 1..65536, got 65537`}},
		{"jwt secret env name", func(c *config.Config) { c.Identity.JWT.HS256SecretEnv = "1SECRET" }, []string{`identity.jwt.hs256_secret_env: invalid environment variable name "1SECRET"`}},
		{"jwt secret env punctuation", func(c *config.Config) { c.Identity.JWT.HS256SecretEnv = "MY-SECRET" }, []string{`identity.jwt.hs256_secret_env: invalid environment variable name "MY-SECRET"`}},
		{"jwt header", func(c *config.Config) { c.Identity.JWT.HS256SecretEnv, c.Identity.JWT.Header = "S", "" }, []string{`identity.jwt.header: must not be empty`}},
		{"jwt claim", func(c *config.Config) { c.Identity.JWT.HS256SecretEnv, c.Identity.JWT.Claim = "S", "" }, []string{`identity.jwt.claim: must not be empty`}},
		{"jwt leeway", func(c *config.Config) { c.Identity.JWT.HS256SecretEnv, c.Identity.JWT.Leeway = "S", "a while" }, []string{`identity.jwt.leeway: invalid duration "a while"`}},
		{"jwt audience without key", func(c *config.Config) { c.Identity.JWT.Audience = "api" }, []string{`identity.jwt: audience or issuer set, but none of`}},
		// limits
		{"invalid limit name", func(c *config.Config) { c.Limits[1].Name = "per client"; c.Routes[0].Limits = nil }, []string{`limits[1].name: invalid name "per client"`}},
		{"negative max_in_flight", func(c *config.Config) { c.Limits[0].MaxInFlight = -1 }, []string{`limits[0].max_in_flight: must be positive, got -1`}},
		{"duplicate key part", func(c *config.Config) { c.Limits[0].By = []string{"client", "client"} }, []string{`limits[0].by[1]: duplicate key part "client"`}},
		{"cost header", func(c *config.Config) { c.Limits[0].CostHeader = "X Cost" }, []string{`limits[0].cost_header: invalid header name "X Cost"`}},
		{"exempt api keys env", func(c *config.Config) { c.Limits[0].Exempt.APIKeysEnv = "KEYS=1" }, []string{`limits[0].exempt.api_keys_env: invalid environment variable name "KEYS=1"`}},
		{"concurrency cost above slots", func(c *config.Config) {
			c.Limits[0].Algorithm, c.Limits[0].Rates, c.Limits[0].MaxInFlight, c.Limits[0].Cost = "concurrency", nil, 2, 3
		}, []string{`limits[0].cost: 3 exceeds max_in_flight 2, so every request would be denied`}},
		{"precision", func(c *config.Config) { c.Limits[0].Precision = "soon" }, []string{`limits[0].precision: invalid duration "soon"`}},
		// access log
		{"access log format", func(c *config.Config) { c.AccessLog.Path, c.AccessLog.Format = "stdout", "apache" }, []string{`access_log.format: unknown format "apache" (want "combined" or "jsonl")`}},
		{"access log salt env", func(c *config.Config) { c.AccessLog.Path, c.AccessLog.SaltEnv = "stdout", "salt env" }, []string{`access_log.salt_env: invalid environment variable name "salt env"`}},
		{"access log flush", func(c *config.Config) { c.AccessLog.Path, c.AccessLog.FlushInterval = "stdout", "0s" }, []string{`access_log.flush_interval: must be positive, got 0s`}},
		// routes
		{"empty route name", func(c *config.Config) { c.Routes[1].Name = "" }, []string{`routes[1].name: is required`}},
		{"invalid route name", func(c *config.Config) { c.Routes[1].Name = "de mo" }, []string{`routes[1].name: invalid name "de mo"`}},
		{"path prefix query", func(c *config.Config) { c.Routes[1].PathPrefix = "/demo?x" }, []string{`routes[1].path_prefix: must not contain '?' or '#', got "/demo?x"`}},
		{"method", func(c *config.Config) { c.Routes[0].Methods = []string{"GET", "PO ST"} }, []string{`routes[0].methods[1]: invalid method "PO ST"`}},
		{"upstream query", func(c *config.Config) { c.Routes[0].Upstream = "http://h:1/?a=b" }, []string{`routes[0].upstream: must not have a query or fragment, got "http://h:1/?a=b"`}},
		{"quota with a body", func(c *config.Config) {
			c.Routes[1].Respond = &config.RespondConfig{Quota: true, Body: "x"}
		}, []string{`routes[1].respond.quota: a quota answer is JSON the gateway writes: drop status, body and content_type`}},
		{"quota routes without quota", func(c *config.Config) {
			c.Routes[1].Respond = &config.RespondConfig{Body: "x", Routes: []string{"demo"}}
		}, []string{`routes[1].respond.routes: applies only with quota = true`}},
		{"quota unknown route", func(c *config.Config) {
			c.Routes[1].Respond = &config.RespondConfig{Quota: true, Routes: []string{c.Routes[0].Name, "nope", c.Routes[0].Name}}
		}, []string{`routes[1].respond.routes[1]: unknown route "nope"`, `routes[1].respond.routes[2]: route "search" listed twice`}},
		// server
		{"admin equals listen", func(c *config.Config) { c.Server.AdminListen = c.Server.Listen }, []string{`server.admin_listen: must differ from server.listen`}},
		{"listen required", func(c *config.Config) { c.Server.Listen = "" }, []string{`server.listen: is required`}},
		{"admin listen port", func(c *config.Config) { c.Server.AdminListen = "127.0.0.1:" }, []string{`server.admin_listen: want host:port, got "127.0.0.1:"`}},
		{"top_k negative", func(c *config.Config) { c.Admin.TopK = -1 }, []string{`admin.top_k: -1 out of range (0 for the default 100, at most 1000)`}},
		{"top_k too large", func(c *config.Config) { c.Admin.TopK = 1001 }, []string{`admin.top_k: 1001 out of range`}},
		// store
		{"max keys", func(c *config.Config) { c.Store.Memory.MaxKeys = 0 }, []string{`store.memory.max_keys: must be positive, got 0`}},
		{"redis url host", func(c *config.Config) { redis(c); c.Store.Redis.URL = "redis:///0" }, []string{`store.redis.url: missing host`}},
		{"redis url parse", func(c *config.Config) { redis(c); c.Store.Redis.URL = "redis://h:port:x/" }, []string{`store.redis.url: invalid URL: `}},
		{"redis cluster address", func(c *config.Config) { redis(c); c.Store.Redis.Cluster = []string{"h:7000", "h7001"} }, []string{`store.redis.cluster[1]: want host:port, got "h7001"`}},
		{"redis sentinel without addrs", func(c *config.Config) { redis(c); c.Store.Redis.Sentinel.Master = "m" }, []string{`store.redis.sentinel.addrs: at least one address is required`}},
		{"redis sentinel address", func(c *config.Config) {
			redis(c)
			c.Store.Redis.Sentinel.Master, c.Store.Redis.Sentinel.Addrs = "m", []string{""}
		}, []string{`store.redis.sentinel.addrs[0]: is required`}},
		{"redis prefix", func(c *config.Config) { redis(c); c.Store.Redis.Prefix = "" }, []string{`store.redis.prefix: must not be empty`}},
		{"redis password env", func(c *config.Config) { redis(c); c.Store.Redis.PasswordEnv = "PASS WORD" }, []string{`store.redis.password_env: invalid environment variable name "PASS WORD"`}},
		{"redis lease", func(c *config.Config) { redis(c); c.Store.Redis.LeaseTTL = "1ms" }, []string{`store.redis.lease_ttl: must be between`}},
	}
	testProblems(t, base, tests)
}

// TestOnErrorNames: the configuration names of OnError, and a value out of
// range printed as a number, in logs and JSON alike.
func TestOnErrorNames(t *testing.T) {
	for o, want := range map[OnError]string{OnErrorLocal: "local", OnErrorAllow: "allow", OnErrorDeny: "deny", 0: "OnError(0)", 9: "OnError(9)"} {
		if got := o.String(); got != want {
			t.Errorf("OnError(%d).String() = %q, want %q", int(o), got, want)
		}
		if b, err := o.MarshalText(); err != nil || string(b) != want {
			t.Errorf("OnError(%d).MarshalText() = %q, %v; want %q", int(o), b, err, want)
		}
	}
}
