package policy

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
)

// base is a small valid config: one gateway-wide limit, a search limit and
// two routes.
func base() config.Config {
	c := config.Default()
	pc := config.DefaultLimit()
	pc.Name, pc.Rates = "per-client", []string{"10/second", "600/minute"}
	search := config.DefaultLimit()
	search.Name, search.Rates, search.Algorithm, search.By = "search", []string{"100/minute"}, "sliding_window_log", []string{"client", "route"}
	c.Limits = []config.LimitConfig{pc, search}
	c.Gateway.Limits = []string{"per-client"}
	r1 := config.DefaultRoute()
	r1.Name, r1.PathPrefix, r1.Methods, r1.Upstream, r1.Limits = "search", "/v1/search", []string{"GET"}, "http://127.0.0.1:9000", []string{"search"}
	r2 := config.DefaultRoute()
	r2.Name, r2.PathPrefix, r2.Respond, r2.Limits = "demo", "/demo", &config.RespondConfig{Body: "hi\n"}, []string{"per-client"}
	c.Routes = []config.RouteConfig{r1, r2}
	return c
}

func noEnv(string) string { return "" }

func TestDefaultValidates(t *testing.T) {
	c := config.Default()
	if err := validate(&c); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	c = base()
	if err := validate(&c); err != nil {
		t.Fatalf("base().Validate() = %v", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []problemCase{
		{"unknown algorithm", func(c *config.Config) { c.Limits[0].Algorithm = "leaky" }, []string{`limits[0].algorithm: unknown algorithm "leaky"`}},
		{"bad rate", func(c *config.Config) { c.Limits[1].Rates[0] = "10/fortnight" }, []string{`limits[1].rates[0]: rate "10/fortnight": unknown window "fortnight"`}},
		{"rate zero", func(c *config.Config) { c.Limits[1].Rates[0] = "0/minute" }, []string{`limits[1].rates[0]: rate "0/minute": count must be positive, got 0`}},
		{"rate negative", func(c *config.Config) { c.Limits[1].Rates[0] = "-5/minute" }, []string{`limits[1].rates[0]: rate "-5/minute": count must be positive`}},
		{"rate above 2^53", func(c *config.Config) { c.Limits[1].Rates[0] = "9007199254740993/minute" }, []string{`limits[1].rates[0]: rate "9007199254740993/minute": count 9007199254740993 exceeds 2^53`}},
		{"window zero", func(c *config.Config) { c.Limits[1].Rates[0] = "5/0s" }, []string{`limits[1].rates[0]: rate "5/0s": window must be positive`}},
		{"same window twice", func(c *config.Config) { c.Limits[0].Rates = []string{"10/1m", "20/minute"} }, []string{`limits[0].rates[1]: window 1m0s appears twice`}},
		{"burst negative", func(c *config.Config) {
			c.Limits[0].Algorithm, c.Limits[0].Rates, c.Limits[0].Burst = "token_bucket", []string{"5/s"}, -1
		}, []string{`limits[0].burst: must be positive, got -1`}},
		{"burst on wrong algorithm", func(c *config.Config) { c.Limits[0].Burst = 5 }, []string{`limits[0]: burst applies only to token_bucket and gcra`}},
		{"unknown route limit", func(c *config.Config) { c.Routes[0].Limits = []string{"serch"} }, []string{`routes[0].limits[0]: unknown limit "serch"`}},
		{"unknown gateway limit", func(c *config.Config) { c.Gateway.Limits = []string{"nope"} }, []string{`gateway.limits[0]: unknown limit "nope"`}},
		{"bad cidr", func(c *config.Config) { c.Limits[0].Exempt.IPs = []string{"10.0.0.0/33"} }, []string{`limits[0].exempt.ips[0]: invalid CIDR "10.0.0.0/33"`}},
		{"bad trusted proxy", func(c *config.Config) { c.Identity.TrustedProxies = []string{"nope"} }, []string{`identity.trusted_proxies[0]: invalid CIDR "nope"`}},
		{"bad key part", func(c *config.Config) { c.Limits[0].By = []string{"client", "cookie"} }, []string{`limits[0].by[1]: unknown key part "cookie"`}},
		{"duplicate limit", func(c *config.Config) { c.Limits[1].Name = "per-client" }, []string{`limits[1].name: duplicate limit name "per-client"`, `routes[0].limits[0]: unknown limit "search"`}},
		{"duplicate route", func(c *config.Config) { c.Routes[1].Name = "search" }, []string{`routes[1].name: duplicate route name "search" (also routes[0])`}},
		{"empty limit name", func(c *config.Config) { c.Limits[1].Name = ""; c.Routes[0].Limits = nil }, []string{`limits[1].name: is required`}},
		{"upstream without scheme", func(c *config.Config) { c.Routes[0].Upstream = "127.0.0.1:9000" }, []string{`routes[0].upstream: invalid URL "127.0.0.1:9000" (want http://host:port`}},
		{"upstream host:port only", func(c *config.Config) { c.Routes[0].Upstream = "localhost:9000" }, []string{`routes[0].upstream: scheme must be http or https, got "localhost:9000"`}},
		{"upstream ftp", func(c *config.Config) { c.Routes[0].Upstream = "ftp://x" }, []string{`routes[0].upstream: scheme must be http or https, got "ftp://x"`}},
		{"tls cert without key", func(c *config.Config) { c.Server.TLS.CertFile = "gw.crt" }, []string{`server.tls.key_file: is required with cert_file`}},
		{"tls pair incomplete", func(c *config.Config) { c.Server.TLS.Certificates = []config.CertificateConfig{{KeyFile: "b.key"}} }, []string{
			`server.tls.certificates[0].cert_file: is required`}},
		{"tls without a certificate", func(c *config.Config) { c.Server.TLS.ClientCAFile = "ca.pem" }, []string{
			`server.tls: set cert_file and key_file (or certificates) to serve TLS`}},
		{"client_auth without a CA", func(c *config.Config) {
			c.Server.TLS = config.TLSConfig{CertFile: "a", KeyFile: "b", ClientAuth: "optional"}
		}, []string{
			`server.tls.client_auth: set, but client_ca_file is empty`}},
		{"client_auth unknown", func(c *config.Config) {
			c.Server.TLS = config.TLSConfig{CertFile: "a", KeyFile: "b", ClientCAFile: "c", ClientAuth: "maybe"}
		}, []string{`server.tls.client_auth: unknown value "maybe" (want require or optional)`}},
		{"h2c with tls", func(c *config.Config) {
			c.Server.TLS = config.TLSConfig{CertFile: "a", KeyFile: "b"}
			c.Server.H2C = true
		}, []string{
			`server.h2c: is for a cleartext listener`}},
		{"http2 streams", func(c *config.Config) { c.Server.HTTP2MaxConcurrentStreams = 0 }, []string{`server.http2_max_concurrent_streams: must be in 1..1000, got 0`}},
		{"gc min heap negative", func(c *config.Config) { c.Server.GCMinHeap = -1 }, []string{`server.gc_min_heap: must be in 0..68719476736 bytes (0: Go's own pacing), got -1`}},
		{"resolver a name", func(c *config.Config) { c.Server.Resolver = "dns.example:53" }, []string{`server.resolver: want the DNS server's ip:port (an address, not a name), got "dns.example:53"`}},
		{"resolver no port", func(c *config.Config) { c.Server.Resolver = "10.0.0.53" }, []string{`server.resolver: want the DNS server's ip:port (an address, not a name), got "10.0.0.53"`}},
		{"gc min heap huge", func(c *config.Config) { c.Server.GCMinHeap = 1 << 40 }, []string{`server.gc_min_heap: must be in 0..68719476736 bytes (0: Go's own pacing), got 1099511627776`}},
		{"mtls without a client CA", func(c *config.Config) {
			c.Identity.Sources = []string{"mtls", "ip"}
			c.Limits[0].By = []string{"mtls"}
		}, []string{`identity.sources[0]: mtls needs server.tls.client_ca_file`, `limits[0].by[0]: mtls needs server.tls.client_ca_file`}},
		{"upstream h2c", func(c *config.Config) { c.Routes[0].Upstream = "h2c://" }, []string{`routes[0].upstream: missing host in "h2c://"`}},
		{"upstream no host", func(c *config.Config) { c.Routes[0].Upstream = "http:///x" }, []string{`routes[0].upstream: missing host in "http:///x"`}},
		{"neither upstream nor respond", func(c *config.Config) { c.Routes[1].Respond = nil }, []string{`routes[1]: set upstream, upstreams or respond`}},
		{"both upstream and respond", func(c *config.Config) { c.Routes[1].Upstream = "http://x" }, []string{`routes[1]: set only one of upstream (or upstreams) and respond`}},
		{"bad durations", func(c *config.Config) {
			c.Server.IdleTimeout = "soon"
			c.Routes[0].Timeout = "0s"
			c.Store.Timeout = "-1s"
		}, []string{
			`server.idle_timeout: invalid duration "soon"`, `routes[0].timeout: must be positive, got 0s`, `store.timeout: must be positive, got -1s`}},
		{"unknown header style", func(c *config.Config) { c.Headers.Emit = []string{"ietf", "draft"} }, []string{`headers.emit[1]: unknown header style "draft"`}},
		{"store enums", func(c *config.Config) { c.Store.OnError = "panic"; c.Store.Backend = "etcd"; c.Store.Clock = "ntp" }, []string{
			`store.on_error: unknown value "panic"`, `store.backend: unknown backend "etcd"`, `store.clock: unknown value "ntp"`}},
		{"store clock needs redis", func(c *config.Config) { c.Store.Clock = "store" }, []string{`store.clock: "store" needs backend = "redis"`}},
		{"negative cost", func(c *config.Config) { c.Limits[0].Cost = -1 }, []string{`limits[0].cost: must be in 1..2^53, got -1`}},
		{"cost above capacity", func(c *config.Config) { c.Limits[0].Cost = 11 }, []string{`limits[0].cost: 11 exceeds capacity 10 of rate "10/second", so every request would be denied`}},
		{"respond status", func(c *config.Config) { c.Routes[1].Respond.Status = 600 }, []string{`routes[1].respond.status: must be in 100..599, got 600`}},
		{"redis two targets", func(c *config.Config) {
			c.Store.Backend, c.Store.Redis.URL, c.Store.Redis.Cluster = "redis", "redis://h:6379", []string{"h:7000"}
		}, []string{`store.redis: set only one of url, cluster and sentinel`}},
		{"redis bad url", func(c *config.Config) { c.Store.Backend, c.Store.Redis.URL = "redis", "http://h" }, []string{`store.redis.url: scheme must be redis or rediss, got "http"`}},
		{"redis sentinel without master", func(c *config.Config) { c.Store.Backend, c.Store.Redis.Sentinel.Addrs = "redis", []string{"h:26379"} }, []string{`store.redis.sentinel.master: is required with sentinel addrs`}},
		{"redis settings ignored for memory", func(c *config.Config) { c.Store.Redis.URL = "http://h" }, nil},
		{"concurrency with rates", func(c *config.Config) { c.Limits[0].Algorithm, c.Limits[0].MaxInFlight = "concurrency", 4 }, []string{`limits[0]: concurrency takes max_in_flight, not rates`}},
		{"shadow mode typo", func(c *config.Config) { c.Limits[0].Mode = "dry-run" }, []string{`limits[0].mode: unknown mode "dry-run"`}},
		{"on_missing typo", func(c *config.Config) { c.Limits[0].OnMissing = "deny" }, []string{`limits[0].on_missing: unknown value "deny" (want shared, ip or reject)`}},
		{"precision not dividing", func(c *config.Config) { c.Limits[1].Precision = "7s" }, []string{`limits[1]: precision applies only to sliding_window_counter`}},
		{"unreachable route", func(c *config.Config) { c.Routes[1].PathPrefix, c.Routes[1].Methods = "/v1//search", []string{"GET"} }, []string{`routes[1]: matches the same host, path_prefix and methods as routes[0] ("search"), so it would never be chosen`}},
		{"path prefix relative", func(c *config.Config) { c.Routes[1].PathPrefix = "demo" }, []string{`routes[1].path_prefix: must start with '/', got "demo"`}},
		{"host with port", func(c *config.Config) { c.Routes[1].Host = "example.com:8080" }, []string{`routes[1].host: invalid host "example.com:8080"`}},
		{"user header without trusted proxies", func(c *config.Config) { c.Identity.UserHeader = "X-User-ID" }, []string{`identity.user_header: set, but trusted_proxies is empty`}},
		{"jwt both keys", func(c *config.Config) {
			c.Identity.JWT.HS256SecretEnv, c.Identity.JWT.RS256PublicKeyFile = "S", "k.pem"
		}, []string{`identity.jwt: set only one of hs256_secret_env, hs256_secret_file, rs256_public_key_file, jwks_url and oidc_issuer`}},
		{"server addresses", func(c *config.Config) { c.Server.Listen = "8080"; c.Server.MaxHeaderBytes = 0 }, []string{`server.listen: want host:port, got "8080"`, `server.max_header_bytes: must be in 1024..16777216, got 0`}},
	}
	testProblems(t, base, tests)
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := base()
	c.Limits[0].Algorithm = "x"
	c.Routes[0].Limits = []string{"serch"}
	c.Headers.Emit = []string{"nope"}
	err := validate(&c)
	var j interface{ Unwrap() []error }
	if !errors.As(err, &j) || len(j.Unwrap()) != 3 {
		t.Fatalf("want 3 joined problems, got %v", err)
	}
}

func TestCompile(t *testing.T) {
	c := base()
	c.Limits[0].Exempt = config.ExemptConfig{IPs: []string{"10.0.0.0/8", "::ffff:192.0.2.1"}, APIKeysEnv: "EXEMPT"}
	c.Routes[0].Limits = []string{"per-client", "search"} // repeats a gateway-wide limit
	env := map[string]string{"EXEMPT": "k1, k2,,"}
	p, err := Compile(c, func(k string) string { return env[k] }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Limits) != 2 || p.Limit("search") != p.Limits[1] || p.Limit("nope") != nil {
		t.Fatalf("limits: %v", p.Limits)
	}
	rt := p.Routes[0]
	if len(rt.Limits) != 2 || rt.Limits[0].Name != "per-client" || rt.Limits[1].Name != "search" {
		t.Errorf("route limits not gateway-first and deduplicated: %v, %v", rt.Limits[0].Name, rt.Limits[1].Name)
	}
	want := `"per-client.1s";q=10;w=1, "per-client.1m";q=600;w=60, "search";q=100;w=60`
	if rt.RateLimitPolicy != want {
		t.Errorf("RateLimitPolicy = %s, want %s", rt.RateLimitPolicy, want)
	}
	if p.Routes[1].Respond == nil || p.Routes[1].Respond.Status != 200 || p.Routes[1].Respond.ContentType != "text/plain; charset=utf-8" {
		t.Errorf("respond defaults: %+v", p.Routes[1].Respond)
	}
	l := p.Limits[0]
	for _, tc := range []struct {
		ip   string
		key  string
		want bool
	}{{"10.1.2.3", "", true}, {"11.0.0.1", "", false}, {"192.0.2.1", "", true}, {"::ffff:10.0.0.1", "", true},
		{"11.0.0.1", "k1", true}, {"11.0.0.1", "k2", true}, {"11.0.0.1", "k3", false}, {"11.0.0.1", " k1", false}} {
		ip := netip.MustParseAddr(tc.ip)
		if got := l.ExemptAddr(ip, tc.key); got != tc.want {
			t.Errorf("Exempt(%s, %q) = %v, want %v", tc.ip, tc.key, got, tc.want)
		}
	}
	if p.Limits[1].ExemptAddr(netip.Addr{}, "k1") {
		t.Error("exempt keys leaked to another limit")
	}
	if l.ID == "" || l.Cost != 1 || len(l.By) != 1 || l.By[0].Kind != keys.PartClient {
		t.Errorf("limit not finished: %+v", l)
	}
	if p.Store.OnError != OnErrorLocal || p.Store.Timeout.String() != "50ms" {
		t.Errorf("store: %+v", p.Store)
	}
}

func TestCompileSecrets(t *testing.T) {
	c := base()
	c.Identity.JWT.HS256SecretEnv = "JWT_SECRET"
	c.Store.Backend, c.Store.Redis.URL, c.Store.Redis.PasswordEnv = "redis", "redis://u:hunter2@h:6379/0", "REDIS_PW"
	_, err := Compile(c, noEnv, os.ReadFile)
	for _, w := range []string{"identity.jwt.hs256_secret_env: environment variable JWT_SECRET is empty or unset",
		"store.redis.password_env: environment variable REDIS_PW is empty or unset"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Compile error %v does not contain %q", err, w)
		}
	}
	env := map[string]string{"JWT_SECRET": strings.Repeat("s", 32), "REDIS_PW": "pw"}
	p, err := Compile(c, func(k string) string { return env[k] }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	if p.Store.Redis.Password != "pw" {
		t.Errorf("password %q", p.Store.Redis.Password)
	}
	if b, _ := json.Marshal(p.Config); strings.Contains(string(b), "hunter2") {
		t.Errorf("the configuration marshals with the URL password: %s", b)
	}
	if p.Config.Store.Redis.URL.Reveal() != "redis://u:hunter2@h:6379/0" {
		t.Error("the configuration's URL lost its password")
	}

	c = base()
	c.Identity.JWT.RS256PublicKeyFile = "missing.pem"
	_, err = Compile(c, noEnv, func(string) ([]byte, error) { return nil, os.ErrNotExist })
	if err == nil || !strings.HasPrefix(err.Error(), "identity.jwt.rs256_public_key_file: ") {
		t.Errorf("missing key file: %v", err)
	}
}
