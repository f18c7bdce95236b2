// Package config is the schema of Tollgate's configuration file (the
// README's "Configuration reference") as Go structs: one struct per TOML
// table, its keys as mapstructure tags (and json tags, so that
// /admin/config shows the same shape), its defaults (Default,
// DefaultLimit, DefaultRoute), and the field doc comments the published
// JSON Schema is generated from.
//
// It declares and does not judge: settings are kept as written (durations
// and rates as strings), checked and compiled by package policy's Compile.
// Decoding (viper, TOML, environment overrides) happens in cmd/gateway.
package config

import "github.com/tollgate/gateway/keys"

// Config is the TOML document the README's "Configuration reference" describes. The mapstructure tags are the TOML
// keys; the json tags give /admin/config the same shape. Durations are Go
// duration strings ("50ms", "1h30m"). Use Default for a Config with every
// default filled in, and DefaultLimit / DefaultRoute for the defaults of one
// [[limits]] / [[routes]] entry.
type Config struct {
	// Server is the [server] table: listeners and timeouts.
	Server ServerConfig `mapstructure:"server" json:"server"`
	// Store is the [store] table: where counters live.
	Store StoreConfig `mapstructure:"store" json:"store"`
	// Identity is the [identity] table: how the client is recognised.
	Identity IdentityConfig `mapstructure:"identity" json:"identity"`
	// Headers is the [headers] table: which rate-limit headers to emit.
	Headers HeadersConfig `mapstructure:"headers" json:"headers"`
	// Gateway is the [gateway] table: settings for every route.
	Gateway GatewayConfig `mapstructure:"gateway" json:"gateway"`
	// Limits are the [[limits]] entries, in order. Default: none.
	Limits []LimitConfig `mapstructure:"limits" json:"limits"`
	// Routes are the [[routes]] entries, in order. Default: none.
	Routes []RouteConfig `mapstructure:"routes" json:"routes"`
	// Admin configures the admin API of the admin listener.
	Admin AdminConfig `mapstructure:"admin" json:"admin"`
	// AccessLog configures the access log.
	AccessLog AccessLogConfig `mapstructure:"access_log" json:"access_log"`
	// Consumers is the [consumers] table: the registry of known API
	// clients.
	Consumers ConsumersConfig `mapstructure:"consumers" json:"consumers"`
	// Plans are the [[plans]] entries, in order. Default: none.
	Plans []PlanConfig `mapstructure:"plans" json:"plans"`
	// RLS is the [rls] table: Envoy's rate limit service (gRPC
	// ShouldRateLimit) served from Tollgate's stores.
	RLS RLSConfig `mapstructure:"rls" json:"rls"`
	// Usage is the [usage] table: the units each consumer counted,
	// posted to an HTTP sink for billing and dashboards, and threshold
	// notices (limits[].notify_at).
	Usage UsageConfig `mapstructure:"usage" json:"usage"`
}

// UsageConfig is the [usage] table: usage records (one per consumer,
// limit and period, the units counted) and threshold notices posted as
// CloudEvents JSON batches to Sink (docs/usage-export.md). It is enabled
// when Sink is set; changing it takes a restart.
type UsageConfig struct {
	// Sink is the http:// or https:// URL the records are posted to;
	// user info in it is sent as basic authentication and never logged
	// (/admin/config shows user info and query redacted). Default "" (no
	// export).
	Sink CredentialURL `mapstructure:"sink" json:"sink"`
	// FlushInterval is the least time between two records of one
	// consumer, limit and period (and the cap of the retry backoff, at
	// least 1s). Default "10s".
	FlushInterval string `mapstructure:"flush_interval" json:"flush_interval"`
	// Timeout bounds one post, the answer's body included. Default "10s".
	Timeout string `mapstructure:"timeout" json:"timeout"`
	// MaxPending bounds the records held in memory while the sink is
	// behind: units of a consumer, limit and period already held keep
	// adding to its record; units needing a new record past the bound are
	// dropped, counted (tollgate_usage_dropped_units_total) and logged.
	// It bounds the threshold notices remembered in a process too.
	// Default 100000.
	MaxPending int `mapstructure:"max_pending" json:"max_pending"`
	// BatchSize is the most records in one post. Default 100.
	BatchSize int `mapstructure:"batch_size" json:"batch_size"`
}

// RLSConfig is the [rls] table: a gRPC listener answering Envoy's rate
// limit service (envoy.service.ratelimit.v3.RateLimitService) from the
// descriptors of envoyproxy/ratelimit's own YAML files. It is enabled when
// Listen is set; a configuration with it needs no route.
type RLSConfig struct {
	// Listen is the gRPC listener's address, e.g. "127.0.0.1:8081"
	// (cleartext unless tls is set; it serves ShouldRateLimit and the
	// standard gRPC health service). Default "" (no rate limit service). Changing it takes a
	// restart.
	Listen string `mapstructure:"listen" json:"listen"`
	// EnvoyConfig lists envoyproxy/ratelimit configuration files or glob
	// patterns (e.g. "ratelimit/config/*.yaml"), read unchanged at startup
	// and on every reload; a relative path is relative to the
	// configuration file's directory. Required with listen.
	EnvoyConfig []string `mapstructure:"envoy_config" json:"envoy_config"`
	// Headers adds the IETF RateLimit and RateLimit-Policy fields of the
	// most restrictive descriptor to every answer
	// (response_headers_to_add), for Envoy to send to the client.
	// Default false.
	Headers bool `mapstructure:"headers" json:"headers"`
	// DynamicMetadata fills every answer's dynamic_metadata as
	// envoyproxy/ratelimit does with RESPONSE_DYNAMIC_METADATA=true: the
	// domain, the descriptors as sent and the YAML metadata of the rules
	// of those not over their limit, for Envoy's access log and later
	// filters. Default false.
	DynamicMetadata bool `mapstructure:"dynamic_metadata" json:"dynamic_metadata"`
	// TLS makes the listener speak TLS, with mutual TLS when
	// client_ca_file is set: the keys of server.tls, its own files.
	// Certificates are re-read on every reload and when a file changes.
	// Default none (plaintext).
	TLS TLSConfig `mapstructure:"tls" json:"tls"`
}

// ConsumersConfig is the [consumers] table. It is enabled when File is
// set; without it every API key is a client of its own.
type ConsumersConfig struct {
	// File is the registry (consumers.toml), read with the configuration
	// at startup and on every reload; a relative path is relative to the
	// configuration file's directory. Default "" (no registry).
	File string `mapstructure:"file" json:"file"`
	// UnknownAPIKey is what a request with an API key that no consumer
	// owns gets: "reject" (401, counted nowhere) or "anonymous" (the key
	// is ignored; the next identity source decides). Default "reject".
	UnknownAPIKey string `mapstructure:"unknown_api_key" json:"unknown_api_key"`
	// JWTClaim is a claim of a verified JWT ([identity.jwt]) that names a
	// registered consumer. Default "" (none).
	JWTClaim string `mapstructure:"jwt_claim" json:"jwt_claim"`
	// PlanClaim is a claim of a verified JWT that names the plan of a
	// token's user that no consumer matched. Default "" (none).
	PlanClaim string `mapstructure:"plan_claim" json:"plan_claim"`
	// ForwardHeaders name the request headers that carry the consumer's
	// name and plan to the upstream; client-sent copies are removed.
	// Default none.
	ForwardHeaders ForwardHeadersConfig `mapstructure:"forward_headers" json:"forward_headers"`
}

// ForwardHeadersConfig is `forward_headers = { consumer = "X-Consumer", plan = "X-Plan" }`.
type ForwardHeadersConfig struct {
	// Consumer names the header carrying the consumer's name. Default "".
	Consumer string `mapstructure:"consumer" json:"consumer"`
	// Plan names the header carrying the plan. Default "".
	Plan string `mapstructure:"plan" json:"plan"`
}

// PlanConfig is one [[plans]] entry.
type PlanConfig struct {
	// Name identifies the plan in the registry, limits' plan_rates, logs
	// and metrics: 1..64 letters, digits, '-' and '_'. Required.
	Name string `mapstructure:"name" json:"name"`
	// Priority is the priority class of the plan's requests under an
	// adaptive_concurrency limit: "critical", "normal" or "sheddable"; a
	// believed priority_header wins. Default "" (the route's, else
	// normal).
	Priority string `mapstructure:"priority" json:"priority,omitempty"`
}

// AdminConfig is the [admin] table.
type AdminConfig struct {
	// TokenEnv names an environment variable holding the bearer token that
	// /admin/* and /metrics require; "" means no token. Default "".
	TokenEnv string `mapstructure:"token_env" json:"token_env"`
	// TokenFile is a file holding the bearer token, instead of TokenEnv
	// (a Kubernetes Secret mounted as a file). Default "".
	TokenFile string `mapstructure:"token_file" json:"token_file"`
	// TopK is how many clients /admin/top keeps per limit, span and kind
	// (denied, near the limit): memory is bounded by it, and a client
	// denied more than 1/TopK of a span's denials is always reported.
	// 0 means the default, 100; at most 1000 (a limit that denies holds
	// 20 sketches of TopK entries, about 2.3 KB per unit of TopK).
	TopK int `mapstructure:"top_k" json:"top_k"`
	// Insecure lets server.admin_listen bind beyond loopback without a
	// token: anyone who reaches the port may then replace the configuration.
	// Without it such a configuration is refused. The gateway warns at
	// startup while it is in force. Default false.
	Insecure bool `mapstructure:"insecure" json:"insecure"`
	// AllowedHosts are the host names the admin listener answers to in the
	// Host header, besides IP literals and "localhost" (case-insensitive,
	// a trailing dot ignored, any port): a name that is not listed gets
	// 421, so a page whose DNS name is rebound to this listener cannot
	// read it. Default none.
	AllowedHosts []string `mapstructure:"allowed_hosts" json:"allowed_hosts"`
}

// AccessLogConfig is the [access_log] table.
type AccessLogConfig struct {
	// Path is the file the access log is appended to, "stdout" or
	// "stderr"; "" disables the access log. Default "".
	Path string `mapstructure:"path" json:"path"`
	// Format is "combined" (nginx's, with Tollgate's fields appended) or
	// "jsonl" (one JSON object per line). Both are what `gateway replay`
	// reads. Default "jsonl".
	Format string `mapstructure:"format" json:"format"`
	// RawClient logs client identities and IPs as they are instead of
	// hashed; API keys are always hashed. Default false.
	RawClient bool `mapstructure:"raw_client" json:"raw_client"`
	// SaltEnv names an environment variable whose value salts the hashes,
	// so that hashed IPs cannot be recovered by brute force. Default "".
	SaltEnv string `mapstructure:"salt_env" json:"salt_env"`
	// SaltFile is a file holding the salt, instead of SaltEnv. Default "".
	SaltFile string `mapstructure:"salt_file" json:"salt_file"`
	// FlushInterval is how often buffered lines are written. Default "1s".
	FlushInterval string `mapstructure:"flush_interval" json:"flush_interval"`
}

// ServerConfig is the [server] table.
type ServerConfig struct {
	// Listen is the public listener's address. Default "127.0.0.1:8080".
	Listen string `mapstructure:"listen" json:"listen"`
	// AdminListen serves /healthz, /readyz, /metrics and /admin/*; ""
	// disables it. Default "127.0.0.1:9090".
	AdminListen string `mapstructure:"admin_listen" json:"admin_listen"`
	// ReadHeaderTimeout bounds reading request headers. Default "5s".
	ReadHeaderTimeout string `mapstructure:"read_header_timeout" json:"read_header_timeout"`
	// IdleTimeout bounds idle keep-alive connections. Default "60s".
	IdleTimeout string `mapstructure:"idle_timeout" json:"idle_timeout"`
	// ShutdownTimeout bounds the drain on SIGTERM. Default "15s".
	ShutdownTimeout string `mapstructure:"shutdown_timeout" json:"shutdown_timeout"`
	// MaxHeaderBytes bounds request header size. Default 65536.
	MaxHeaderBytes int `mapstructure:"max_header_bytes" json:"max_header_bytes"`
	// WatchConfig reloads the configuration when its file changes (the
	// file's directory is watched, so rename-writes and symlink swaps are
	// seen; changes are debounced). Read at startup. Default false.
	WatchConfig bool `mapstructure:"watch_config" json:"watch_config"`
	// TLS makes the public listener speak TLS (1.2 and later, HTTP/2 by
	// ALPN). Unset (the default), it speaks cleartext.
	TLS TLSConfig `mapstructure:"tls" json:"tls"`
	// H2C serves HTTP/2 with prior knowledge beside HTTP/1.1 on a
	// cleartext listener, for a load balancer that speaks HTTP/2 to its
	// backends. Read at startup. Default false.
	H2C bool `mapstructure:"h2c" json:"h2c"`
	// HTTP2MaxConcurrentStreams bounds the streams one HTTP/2 connection
	// may have open at once (1..1000). Read at startup. Default 100.
	HTTP2MaxConcurrentStreams int `mapstructure:"http2_max_concurrent_streams" json:"http2_max_concurrent_streams"`
	// GCMinHeap is the heap, in bytes, the garbage collector may fill
	// before it collects: below it the gateway does not collect each time
	// its small live heap doubles (at Go's default pacing, every few
	// hundred proxied requests). Above half of it of live data, Go's own
	// pacing applies. 0 leaves Go's pacing (GOGC) alone; so does a GOGC
	// environment variable. Applied on reload. Default 33554432 (32 MiB).
	GCMinHeap int64 `mapstructure:"gc_min_heap" json:"gc_min_heap"`
	// MaxBodyBytes bounds a request body, in bytes, on every route that
	// does not set its own max_body_bytes: a larger body is answered 413
	// and never reaches the upstream whole. 0 means no bound. Applied on
	// reload. Default 0.
	MaxBodyBytes int64 `mapstructure:"max_body_bytes" json:"max_body_bytes"`
	// RequestID gives every request an X-Request-Id: kept when a trusted
	// proxy (identity.trusted_proxies) sent a valid one, generated
	// otherwise; forwarded upstream, returned in the response and logged.
	// false passes a client's X-Request-Id through untouched and adds
	// none. Applied on reload. Default true.
	RequestID bool `mapstructure:"request_id" json:"request_id"`
	// Resolver is the "ip:port" of the DNS server that resolves the
	// routes' upstream names into targets (over UDP, TCP for a truncated
	// answer) instead of the system's configuration; a route with one
	// upstream and no health check dials its name through the system's.
	// Read at startup. Default "" (the system's resolver).
	Resolver string `mapstructure:"resolver" json:"resolver"`
}

// TLSConfig is `tls = { cert_file, key_file, certificates, client_ca_file,
// client_auth }`. The certificate and key files are PEM; every file is
// read again on reload and when it changes on disk.
type TLSConfig struct {
	// CertFile is the certificate chain (leaf first). Default "".
	CertFile string `mapstructure:"cert_file" json:"cert_file"`
	// KeyFile is CertFile's private key. Default "".
	KeyFile string `mapstructure:"key_file" json:"key_file"`
	// Certificates are more certificate/key pairs; the one whose names
	// match the client's SNI is served, CertFile (or the first pair) when
	// none does. Default none.
	Certificates []CertificateConfig `mapstructure:"certificates" json:"certificates"`
	// ClientCAFile is a PEM bundle of the CAs that sign client
	// certificates; set, the listener asks for one (mutual TLS) and the
	// verified subject is the identity source "mtls". Default "".
	ClientCAFile string `mapstructure:"client_ca_file" json:"client_ca_file"`
	// ClientAuth is "require" (a handshake without a valid client
	// certificate fails) or "optional" (one is verified when sent).
	// Default "" ("require" when ClientCAFile is set).
	ClientAuth string `mapstructure:"client_auth" json:"client_auth"`
}

// Enabled reports whether any TLS setting is present.
func (t *TLSConfig) Enabled() bool {
	return t.CertFile != "" || t.KeyFile != "" || len(t.Certificates) > 0 || t.ClientCAFile != "" || t.ClientAuth != ""
}

// CertificateConfig is one `{ cert_file, key_file }` of tls.certificates.
type CertificateConfig struct {
	// CertFile is the certificate chain (leaf first). Required.
	CertFile string `mapstructure:"cert_file" json:"cert_file"`
	// KeyFile is its private key. Required.
	KeyFile string `mapstructure:"key_file" json:"key_file"`
}

// StoreConfig is the [store] table.
type StoreConfig struct {
	// Backend is "memory" or "redis". Default "memory".
	Backend string `mapstructure:"backend" json:"backend"`
	// OnError is what a store failure means: "local" (this node's own
	// counters decide), "allow" (fail open) or "deny" (503). Default "local".
	OnError string `mapstructure:"on_error" json:"on_error"`
	// Timeout is the budget of one store call. Default "50ms".
	Timeout string `mapstructure:"timeout" json:"timeout"`
	// Clock is "local" (the gateway's clock) or "store" (the Redis server's
	// clock; backend "redis" only). Default "" (unset): "store" with
	// backend "redis", else "local".
	Clock string `mapstructure:"clock" json:"clock"`
	// RequireAtStartup makes the gateway refuse to start (exit 1) when the
	// Redis store does not answer at startup, instead of starting degraded
	// under on_error. Default false.
	RequireAtStartup bool `mapstructure:"require_at_startup" json:"require_at_startup"`
	// Memory is the [store.memory] table.
	Memory MemoryConfig `mapstructure:"memory" json:"memory"`
	// Redis is the [store.redis] table, used when Backend is "redis".
	Redis RedisConfig `mapstructure:"redis" json:"redis"`
}

// MemoryConfig is the [store.memory] table.
type MemoryConfig struct {
	// MaxKeys bounds the number of counters; least recently used ones are
	// evicted past it. Default 1000000.
	MaxKeys int `mapstructure:"max_keys" json:"max_keys"`
	// MaxBytes bounds the memory the counters take, in bytes; least
	// recently used ones are evicted past it. 0 (the default) derives it
	// from the machine: a quarter of its memory or of the control group's
	// limit, whichever is smaller (1 GiB when neither can be read).
	MaxBytes int64 `mapstructure:"max_bytes" json:"max_bytes"`
}

// RedisConfig is the [store.redis] table. At most one of URL, Cluster and
// Sentinel may be set; with none, URL defaults to DefaultRedisURL.
type RedisConfig struct {
	// URL is a standalone server, redis:// or rediss:// (TLS). Default ""
	// (meaning DefaultRedisURL when Cluster and Sentinel are unset).
	URL SecretURL `mapstructure:"url" json:"url"`
	// Cluster lists Redis Cluster seed addresses (host:port). Default none.
	Cluster []string `mapstructure:"cluster" json:"cluster"`
	// Sentinel names a Sentinel-managed master. Default unset.
	Sentinel SentinelConfig `mapstructure:"sentinel" json:"sentinel"`
	// Prefix namespaces every counter key. Default "tollgate:".
	Prefix string `mapstructure:"prefix" json:"prefix"`
	// Username is the ACL user for Cluster and Sentinel (a URL carries its
	// own). Default "".
	Username string `mapstructure:"username" json:"username"`
	// PasswordEnv names the environment variable holding the password (a
	// URL may carry its own instead). Default "" (no password).
	PasswordEnv string `mapstructure:"password_env" json:"password_env"`
	// PasswordFile is a file holding the password, instead of
	// PasswordEnv. Default "".
	PasswordFile string `mapstructure:"password_file" json:"password_file"`
	// LeaseTTL is the lease of a concurrency slot: its holder renews it
	// every third of it, and a slot not renewed for a whole lease (its
	// gateway crashed) is given back. Default "30s".
	LeaseTTL string `mapstructure:"lease_ttl" json:"lease_ttl"`
	// Coalesce lets decisions that arrive together share one round trip
	// (a pipeline) on standalone and Sentinel servers; a decision that
	// finds a connection free is still sent at once, alone. Default true.
	Coalesce bool `mapstructure:"coalesce" json:"coalesce"`
}

// SentinelConfig is `sentinel = { master = "...", addrs = [...] }`.
type SentinelConfig struct {
	// Master is the monitored master's name. Default "" (Sentinel unused).
	Master string `mapstructure:"master" json:"master"`
	// Addrs are the Sentinel addresses (host:port). Default none.
	Addrs []string `mapstructure:"addrs" json:"addrs"`
}

// DefaultRedisURL is the Redis server used when backend = "redis" and
// neither url, cluster nor sentinel is set.
const DefaultRedisURL = "redis://127.0.0.1:6379/0"

// IdentityConfig is the [identity] table.
type IdentityConfig struct {
	// Sources are tried in order; the first that yields a value is the
	// client: any of "api_key", "user", "mtls", "ip". Default ["user", "api_key", "ip"]: a
	// verified identity before one a client can make up.
	Sources []string `mapstructure:"sources" json:"sources"`
	// APIKeyHeader carries the API key. Default "X-API-Key".
	APIKeyHeader string `mapstructure:"api_key_header" json:"api_key_header"`
	// APIKeyQuery is a query parameter carrying the API key; "" disables
	// it. Default "".
	APIKeyQuery string `mapstructure:"api_key_query" json:"api_key_query"`
	// UserHeader carries the user, believed only from TrustedProxies; ""
	// disables it. Default "".
	UserHeader string `mapstructure:"user_header" json:"user_header"`
	// TrustedProxies are CIDRs (or single addresses) whose X-Forwarded-For
	// is believed, right to left. Default none.
	TrustedProxies []string `mapstructure:"trusted_proxies" json:"trusted_proxies"`
	// IPv6Prefix is the prefix length IPv6 clients are counted by. Default 64.
	IPv6Prefix int `mapstructure:"ipv6_prefix" json:"ipv6_prefix"`
	// MaxValueLen bounds an API key or user value; longer ones are not an
	// identity. Default 1024.
	MaxValueLen int `mapstructure:"max_value_len" json:"max_value_len"`
	// JWT is the [identity.jwt] table. It is enabled when one of its key
	// sources is set (see JWTConfig.Enabled).
	JWT JWTConfig `mapstructure:"jwt" json:"jwt"`
}

// JWTConfig is the [identity.jwt] table: the user is a claim of a verified
// bearer token. Exactly one key source enables it: HS256SecretEnv (or
// HS256SecretFile), RS256PublicKeyFile, JWKSURL or OIDCIssuer; with none,
// JWT is off and the other fields are ignored.
type JWTConfig struct {
	// Header carries "Bearer <token>". Default "Authorization".
	Header string `mapstructure:"header" json:"header"`
	// Claim names the user. Default "sub".
	Claim string `mapstructure:"claim" json:"claim"`
	// HS256SecretEnv names the environment variable holding the HMAC key
	// (at least 32 bytes). Default "".
	HS256SecretEnv string `mapstructure:"hs256_secret_env" json:"hs256_secret_env"`
	// HS256SecretFile is a file holding the HMAC key, instead of
	// HS256SecretEnv. Default "".
	HS256SecretFile string `mapstructure:"hs256_secret_file" json:"hs256_secret_file"`
	// RS256PublicKeyFile is a PEM file with the RSA public key. Default "".
	RS256PublicKeyFile string `mapstructure:"rs256_public_key_file" json:"rs256_public_key_file"`
	// JWKSURL is the URL of the identity provider's JSON Web Key Set:
	// https, or http to a loopback host only. Tokens are verified with
	// the key their "kid" names. Default "".
	JWKSURL string `mapstructure:"jwks_url" json:"jwks_url"`
	// OIDCIssuer is an OpenID Connect issuer whose discovery document
	// (<issuer>/.well-known/openid-configuration) names the JWKS; its
	// "issuer" must equal this value, which is also the expected "iss"
	// unless Issuer is set. Default "".
	OIDCIssuer string `mapstructure:"oidc_issuer" json:"oidc_issuer"`
	// JWKSRefresh is the interval between fetches of the key set when the
	// response has no Cache-Control max-age (which, clamped to 1m..24h,
	// wins); 1s..24h. Default "5m".
	JWKSRefresh string `mapstructure:"jwks_refresh" json:"jwks_refresh"`
	// Algorithms are the "alg" values accepted with jwks_url or
	// oidc_issuer: any of RS256, RS384, RS512, ES256, ES384, EdDSA.
	// Default [] (all of them).
	Algorithms []string `mapstructure:"algorithms" json:"algorithms"`
	// Audience, when set, must match "aud". Default "".
	Audience string `mapstructure:"audience" json:"audience"`
	// Issuer, when set, must equal "iss". Default "".
	Issuer string `mapstructure:"issuer" json:"issuer"`
	// Leeway is the clock skew tolerated for "exp" and "nbf". Default "0s".
	Leeway string `mapstructure:"leeway" json:"leeway"`
}

// Enabled reports whether JWT verification is configured.
func (j JWTConfig) Enabled() bool {
	return j.HS256SecretEnv != "" || j.HS256SecretFile != "" || j.RS256PublicKeyFile != "" ||
		j.JWKSURL != "" || j.OIDCIssuer != ""
}

// HeadersConfig is the [headers] table.
type HeadersConfig struct {
	// Emit lists the header styles: any of "ietf", "legacy", "x"; [] for
	// none (Retry-After is always sent on denials). Default ["ietf"].
	Emit []string `mapstructure:"emit" json:"emit"`
}

// GatewayConfig is the [gateway] table.
type GatewayConfig struct {
	// Limits names limits applied to every route, before the route's own.
	// Default none.
	Limits []string `mapstructure:"limits" json:"limits"`
}

// LimitConfig is one [[limits]] entry. DefaultLimit returns its defaults.
type LimitConfig struct {
	// Name identifies the limit in routes, headers and metrics: 1..64
	// letters, digits, '-' and '_'. Required.
	Name string `mapstructure:"name" json:"name"`
	// Rates are the windows, all enforced: "N/second|minute|hour|day|week",
	// "N/s", "N/10s", "N/1h30m"; the quota algorithm takes "N/day",
	// "N/week" and "N/month" (calendar periods). Required, except for
	// concurrency.
	Rates []string `mapstructure:"rates" json:"rates"`
	// Algorithm is one of the algorithms ARCHITECTURE.md defines. Default "sliding_window_counter".
	Algorithm string `mapstructure:"algorithm" json:"algorithm"`
	// By lists the counter key's parts: client, ip, api_key, user, route,
	// method, header:<Name>; [] is one shared counter. Default ["client"].
	By []string `mapstructure:"by" json:"by"`
	// Cost is the units a request takes (1..capacity). Default 1.
	Cost int64 `mapstructure:"cost" json:"cost"`
	// CostHeader, when set, names a request header whose integer value is
	// the cost (Cost applies when it is absent). Default "".
	CostHeader string `mapstructure:"cost_header" json:"cost_header"`
	// CostMin is the least a cost header may declare: a smaller value is
	// raised to it, so a client cannot pay less than the operator meant.
	// 0 (the default) means Cost.
	CostMin int64 `mapstructure:"cost_min" json:"cost_min"`
	// CostHeaderTrustedFrom, when set, lists the peer CIDRs (the direct
	// peer, not X-Forwarded-For) whose cost header is believed; from any
	// other peer the header is ignored and Cost applies. Default [] (every
	// peer, floored at CostMin).
	CostHeaderTrustedFrom []string `mapstructure:"cost_header_trusted_from" json:"cost_header_trusted_from"`
	// Mode is "enforce" or "shadow" (count and report, never deny).
	// Default "enforce".
	Mode string `mapstructure:"mode" json:"mode"`
	// Burst is the bucket capacity of token_bucket and gcra; 0 means the
	// rate's limit. Default 0.
	Burst int64 `mapstructure:"burst" json:"burst"`
	// Precision is the sub-bucket width of sliding_window_counter, a
	// divisor of every window; "" means the window itself. For distinct,
	// the sub-window width (at most 16 per window); "" means a quarter of
	// the window. Default "".
	Precision string `mapstructure:"precision" json:"precision"`
	// Distinct is what the distinct algorithm counts the distinct values
	// of, per key: a key part (client, ip, api_key, user, mtls, route,
	// method, consumer, header:<Name>), "ip/<bits>" (the client's IPv4
	// network), "path" (the normal path), or any other value: a CEL
	// expression giving a string (e.g. 'body.username'), whose failure
	// follows on_error. Required with algorithm "distinct", refused with
	// the others. Default "".
	Distinct string `mapstructure:"distinct" json:"distinct"`
	// MaxInFlight is the concurrency algorithm's capacity, and the
	// ceiling of adaptive_concurrency's learned limit. Default 0 (for
	// adaptive_concurrency: 1000).
	MaxInFlight int64 `mapstructure:"max_in_flight" json:"max_in_flight"`
	// MinInFlight is the floor of adaptive_concurrency's learned limit,
	// which neither overload nor a measure of the base latency takes it
	// below. Only for adaptive_concurrency. Default 0 (1).
	MinInFlight int64 `mapstructure:"min_in_flight" json:"min_in_flight,omitempty"`
	// PriorityHeader names a request header whose value, "critical",
	// "normal" or "sheddable", is the request's priority class under an
	// adaptive_concurrency limit (absent or another value: the plan's,
	// the route's, else normal). Default "".
	PriorityHeader string `mapstructure:"priority_header" json:"priority_header,omitempty"`
	// PriorityTrustedFrom lists the peer CIDRs (the direct peer) whose
	// priority header is believed; from any other peer it is ignored.
	// Default [] (every peer: the gateway warns).
	PriorityTrustedFrom []string `mapstructure:"priority_trusted_from" json:"priority_trusted_from,omitempty"`
	// Reserve is the share of an adaptive_concurrency limit kept for
	// critical requests, 0..0.5: normal requests are admitted up to
	// (1 − reserve) of the limit, sheddable ones up to (1 − reserve)².
	// Default 0.
	Reserve float64 `mapstructure:"reserve" json:"reserve,omitempty"`
	// Exempt lists clients that this limit never limits.
	Exempt ExemptConfig `mapstructure:"exempt" json:"exempt"`
	// PlanRates are the rates of each plan ([limits.plan_rates], plan
	// name = rate list); a plan not listed, anonymous clients and
	// consumers without a plan get Rates. Default none.
	PlanRates map[string][]string `mapstructure:"plan_rates" json:"plan_rates,omitempty"`
	// Timezone is the IANA zone whose calendar the quota algorithm's
	// periods follow (they begin at its local midnights). Only for quota.
	// Default "" (UTC).
	Timezone string `mapstructure:"timezone" json:"timezone"`
	// MonthStartsOn is the day of the month, 1..28, on which the quota
	// algorithm's monthly periods begin (a billing day). Only for quota.
	// Default 0 (the 1st).
	MonthStartsOn int `mapstructure:"month_starts_on" json:"month_starts_on"`
	// Penalty, when set, keeps a client that this limit denied denied by
	// it for that long ("15m"), counting nothing meanwhile; requests
	// during the penalty do not extend it. Not for concurrency or shadow
	// limits. Default "" (none).
	Penalty string `mapstructure:"penalty" json:"penalty"`
	// OnMissing is what a request lacking one of the by parts api_key,
	// user or header:<Name> gets: "shared" (the part is the literal
	// "-", so every such request shares one counter), "ip" (the missing
	// part is replaced by the client IP, in a namespace of its own, so
	// anonymous clients are limited one by one) or "reject" (401, not
	// counted). Default "shared".
	OnMissing string `mapstructure:"on_missing" json:"on_missing"`
	// Count is when a request is counted: "request" (when it is admitted)
	// or "response" (checked before forwarding without counting, counted
	// once the upstream answers with a status in CountStatuses). Default
	// "request".
	Count string `mapstructure:"count" json:"count"`
	// CountStatuses, with count = "response", are the statuses that count:
	// codes ("401") or ranges ("500-599"). Default [] (every status).
	CountStatuses []string `mapstructure:"count_statuses" json:"count_statuses"`
	// CostResponseHeader, with count = "response", names an upstream
	// response header whose integer value is the units counted (Cost when
	// absent or malformed); the header is removed from the response.
	// Default "".
	CostResponseHeader string `mapstructure:"cost_response_header" json:"cost_response_header"`
	// CostResponseJSON, with count = "response", is a dotted path
	// ("usage.total_tokens") into the upstream's JSON response body, or,
	// for a text/event-stream, into the last data event that carries it:
	// its integer value is the units counted. The body is read as it
	// streams to the client, up to CostScanBytes. Default "".
	CostResponseJSON string `mapstructure:"cost_response_json" json:"cost_response_json"`
	// CostRequestJSON, with count = "response" and a response cost
	// (CostResponseJSON or CostResponseHeader), is a dotted path
	// ("max_tokens") into the request's JSON body whose integer value is
	// the estimate: the limit reserves it before forwarding and settles
	// to the usage after the answer. Default "".
	CostRequestJSON string `mapstructure:"cost_request_json" json:"cost_request_json"`
	// OnMissingUsage is what an answer without usage counts, with
	// CostResponseJSON or CostRequestJSON: "estimate" (the reservation,
	// or the request's cost), "zero" or "cost" (the request's cost).
	// Default "estimate".
	OnMissingUsage string `mapstructure:"on_missing_usage" json:"on_missing_usage"`
	// CostScanBytes bounds the response body read for CostResponseJSON:
	// a longer body has no usage. Default 67108864 (64 MiB).
	CostScanBytes int64 `mapstructure:"cost_scan_bytes" json:"cost_scan_bytes"`
	// CostRequestBytes bounds the request body read (and held) for
	// CostRequestJSON: a longer body is refused (413). Default 1048576
	// (1 MiB).
	CostRequestBytes int64 `mapstructure:"cost_request_bytes" json:"cost_request_bytes"`
	// OnLimit is what a request over a token_bucket or gcra limit gets:
	// "reject" (429) or "delay" (it waits for its slot when that comes
	// within MaxDelay, else 429). Default "reject".
	OnLimit string `mapstructure:"on_limit" json:"on_limit"`
	// MaxDelay is the longest wait of a delayed request, with on_limit =
	// "delay" (required then); with adaptive_concurrency, the longest a
	// request waits for a slot before it is shed (503). Default "".
	MaxDelay string `mapstructure:"max_delay" json:"max_delay"`
	// MaxWaiting bounds the requests waiting on this limit in one gateway,
	// with on_limit = "delay"; past it a request is rejected. One counter
	// key may hold at most max(1, max_waiting / 8) of them, unless the key
	// is the same for every client (by empty or only route). Default 1024.
	MaxWaiting int `mapstructure:"max_waiting" json:"max_waiting"`
	// Sync is "exact" (every hit decided by the store) or "batched" (each
	// gateway admits from leases of the budget taken from the store; a
	// bounded error, see ARCHITECTURE.md "Hybrid counting"). Default
	// "exact".
	Sync string `mapstructure:"sync" json:"sync"`
	// SyncInterval is, with sync = "batched", the longest a gateway
	// admits from one lease before asking the store again. Default
	// "100ms".
	SyncInterval string `mapstructure:"sync_interval" json:"sync_interval"`
	// LeaseSize is, with sync = "batched", the most units one lease
	// takes. 0 (the default) means a hundredth of the rate's limit, at
	// least 1.
	LeaseSize int64 `mapstructure:"lease_size" json:"lease_size"`
	// NotifyAt are fractions of the limit (0 < f <= 1, ascending), e.g.
	// [0.8, 1.0]: the first request of a period that takes a consumer's
	// usage of the limit to one of them posts a threshold notice to
	// usage.sink (required then), once per period and fraction, across
	// the fleet on Redis. Not for concurrency. Default [] (none).
	NotifyAt []float64 `mapstructure:"notify_at" json:"notify_at,omitempty"`
	// When, when set, is a CEL condition over the request's variables
	// (README "Expressions"): the limit applies only to requests for which
	// it is true. Default "" (every request).
	When string `mapstructure:"when" json:"when"`
	// Key, when set, is a CEL expression whose value keys the limit's
	// counters instead of by (a string, or a number or bool, formatted).
	// Default "" (by decides).
	Key string `mapstructure:"key" json:"key"`
	// CostExpr, when set, is a CEL expression whose integer value is the
	// request's cost (1..2^53) instead of cost and cost_header. Default "".
	CostExpr string `mapstructure:"cost_expr" json:"cost_expr"`
	// OnError is what a request gets when one of the limit's expressions
	// fails at run time (a missing header indexed, a type error, the cost
	// limit, a body that is not JSON): "skip" (the limit does not apply),
	// "deny" (400, counted nowhere) or "shared" (the request is counted
	// under one key shared by every failing request, at cost). Default
	// "shared".
	OnError string `mapstructure:"on_error" json:"on_error"`
	// Response, when set, is the limit's own answer to a request it
	// denies, instead of the 429 problem. Default none.
	Response *LimitResponseConfig `mapstructure:"response" json:"response,omitempty"`
	// TagHeader is, with mode = "tag", the request header a request over
	// the limit is forwarded with (its value the limit's name); a client's
	// own copy is removed. Default "X-RateLimit-Exceeded".
	TagHeader string `mapstructure:"tag_header" json:"tag_header"`
	// EnforcePercent enforces the limit for that share of its keys (a
	// stable hash of the counter key picks them) and shadows it for the
	// rest, 0..100. Default 100.
	EnforcePercent int `mapstructure:"enforce_percent" json:"enforce_percent"`
	// RetryAfterJitter, when set ("5s"), adds to a denial's Retry-After
	// and RateLimit reset a per-client share of it, stable for a client
	// within a window. Default "" (none).
	RetryAfterJitter string `mapstructure:"retry_after_jitter" json:"retry_after_jitter"`
}

// LimitResponseConfig is a limit's own answer to a request it denies:
// `response = { status = 503, body = "...", content_type = "...", headers = { ... } }`.
type LimitResponseConfig struct {
	// Status is the answer's status, 400..599. Default 429.
	Status int `mapstructure:"status" json:"status"`
	// Body is the answer's body, a template: {limit} is the limit's name,
	// {retry_after} the seconds to wait. Default "" (empty).
	Body string `mapstructure:"body" json:"body"`
	// ContentType is the body's Content-Type. Default
	// "text/plain; charset=utf-8".
	ContentType string `mapstructure:"content_type" json:"content_type"`
	// Headers are further response headers (name = value); not hop-by-hop
	// headers, Content-Type, Content-Length, nor Retry-After and the
	// rate-limit headers, which the gateway sets. Default none.
	Headers map[string]string `mapstructure:"headers" json:"headers,omitempty"`
}

// ExemptConfig is `exempt = { ips = [...], api_keys_env = "..." }`.
type ExemptConfig struct {
	// IPs are CIDRs (or single addresses) of exempt client IPs. Default none.
	IPs []string `mapstructure:"ips" json:"ips"`
	// APIKeysEnv names an environment variable holding exempt API keys,
	// comma separated; unset or empty means none. Default "".
	APIKeysEnv string `mapstructure:"api_keys_env" json:"api_keys_env"`
	// APIKeysFile is a file holding exempt API keys, comma or newline
	// separated, instead of APIKeysEnv. Default "".
	APIKeysFile string `mapstructure:"api_keys_file" json:"api_keys_file"`
	// Consumers names registered consumers exempt from the limit.
	// Default none.
	Consumers []string `mapstructure:"consumers" json:"consumers,omitempty"`
}

// RouteConfig is one [[routes]] entry. DefaultRoute returns its defaults.
// Exactly one of Upstream and Respond must be set.
type RouteConfig struct {
	// Name identifies the route in counter keys, logs and metrics: 1..64
	// letters, digits, '-', '_' and '.'. Required.
	Name string `mapstructure:"name" json:"name"`
	// Host restricts the route to one host (no port), compared case
	// insensitively; "" matches any host. Default "".
	Host string `mapstructure:"host" json:"host"`
	// PathPrefix matches the normal request path on segment boundaries
	// (see NormalizePath and Policy.Match).
	// Default "/".
	PathPrefix string `mapstructure:"path_prefix" json:"path_prefix"`
	// Methods restricts the route to these methods; empty allows all.
	// Default none.
	Methods []string `mapstructure:"methods" json:"methods"`
	// Upstream is the http:// or https:// URL requests are forwarded to.
	// Default "".
	Upstream string `mapstructure:"upstream" json:"upstream"`
	// Upstreams are the targets requests are balanced over, each a URL
	// ("http://10.0.0.1:8080") or a table `{ url = "...", weight = 3 }`;
	// set either upstream or upstreams. A target's host may be a DNS name:
	// every address it resolves to is a target of its weight, re-resolved
	// every resolve_interval. Default none.
	Upstreams []TargetConfig `mapstructure:"upstreams" json:"upstreams"`
	// Balance picks a target for each attempt: "round_robin" (smooth
	// weighted), "least_request" (the one with fewer requests in flight
	// of two different targets drawn by weight) or "hash" (weighted
	// rendezvous hashing on hash_on: a key sticks to its target, and a
	// target leaving moves only its own keys). Default "round_robin".
	Balance string `mapstructure:"balance" json:"balance"`
	// HashOn is what balance = "hash" hashes: "client" (the client's
	// identity, as limits key it) or "header:<Name>" (its first value); a
	// request without the header is balanced by round robin. Default
	// "client".
	HashOn string `mapstructure:"hash_on" json:"hash_on"`
	// HealthCheck, when set, probes every target with a GET on an
	// interval; a target failing unhealthy_after probes in a row gets no
	// traffic until it passes healthy_after in a row. Targets start
	// healthy (a start or reload refuses no traffic while the first probes
	// run); a target kept across a reload keeps its health.
	HealthCheck *HealthCheckConfig `mapstructure:"health_check" json:"health_check,omitempty"`
	// OutlierDetection ejects a target that fails connections, times out
	// or answers 502/503/504 several times in a row (passive health).
	OutlierDetection OutlierConfig `mapstructure:"outlier_detection" json:"outlier_detection"`
	// Retries is how many other targets a failed request is tried on
	// (a connection that failed, or 502/503 from the target), 0..10; only
	// GET, HEAD, OPTIONS, PUT and DELETE requests whose body is empty or
	// fits in retry_body_bytes, without Expect: 100-continue or an
	// upgrade, are retried, within retry_budget. The route's timeout
	// bounds all attempts together. Default 0.
	Retries int `mapstructure:"retries" json:"retries"`
	// RetryBodyBytes is the largest request body kept in memory so that a
	// request can be retried, 0..16777216; a larger body is streamed to
	// the first target, intact, and never retried. Default 65536.
	RetryBodyBytes int64 `mapstructure:"retry_body_bytes" json:"retry_body_bytes"`
	// RetryBudget bounds the retries of a route, so that retries cannot
	// multiply an outage.
	RetryBudget RetryBudgetConfig `mapstructure:"retry_budget" json:"retry_budget"`
	// ResolveInterval is how often the targets' DNS names are resolved
	// again ("0s" resolves once, at load; else at least "1s"). Each
	// address of a name is a target; a failed lookup, or an answer with no
	// address, keeps the last addresses; at most 64 addresses per name.
	// A route with one upstream and no health check leaves its name to be
	// resolved when a connection is dialled. Default "30s".
	ResolveInterval string `mapstructure:"resolve_interval" json:"resolve_interval"`
	// StripPrefix removes PathPrefix before forwarding. Default false.
	StripPrefix bool `mapstructure:"strip_prefix" json:"strip_prefix"`
	// Timeout is the budget for the upstream exchange up to the response
	// headers, the request body included; past it 504 (408 when the
	// client's body was still arriving). A body, a server-sent event stream or an upgraded (WebSocket)
	// connection then runs until one side ends it. Default "30s".
	Timeout string `mapstructure:"timeout" json:"timeout"`
	// IdleTimeout bounds the wait for each read of the upstream's response
	// body (a stream silent longer is cut off); "0s" or empty, the
	// default, means none.
	IdleTimeout string `mapstructure:"idle_timeout" json:"idle_timeout"`
	// Upgrades lists the protocols a client may switch the connection to
	// through this route ("websocket"): an Upgrade request naming only
	// listed protocols is forwarded, and an upgraded connection is then a
	// tunnel counted as one request. Any other Upgrade is removed before
	// forwarding, so the upstream answers an ordinary request. Default
	// none.
	Upgrades []string `mapstructure:"upgrades" json:"upgrades"`
	// Limits names the route's own limits, applied after gateway.limits.
	// Default none.
	Limits []string `mapstructure:"limits" json:"limits"`
	// Priority is the priority class of the route's requests under an
	// adaptive_concurrency limit: "critical", "normal" or "sheddable"; a
	// believed priority_header and the client's plan's priority win.
	// Default "" (normal).
	Priority string `mapstructure:"priority" json:"priority,omitempty"`
	// Respond, when set, answers the request itself instead of proxying.
	Respond *RespondConfig `mapstructure:"respond" json:"respond,omitempty"`
	// RequestHeaders change the request's headers before it is forwarded:
	// removed, then set, then added. Values may name {client},
	// {consumer}, {plan}, {route} and {request_id}. Headers the gateway
	// owns cannot be named. Default none.
	RequestHeaders *HeaderRulesConfig `mapstructure:"request_headers" json:"request_headers,omitempty"`
	// ResponseHeaders change the headers of the upstream's answer the same
	// way (not of the gateway's own answers). Default none.
	ResponseHeaders *HeaderRulesConfig `mapstructure:"response_headers" json:"response_headers,omitempty"`
	// HideCredentials removes the credentials the gateway reads (the API
	// key's header and query parameter, the JWT header's bearer token)
	// before forwarding. Default false.
	HideCredentials bool `mapstructure:"hide_credentials" json:"hide_credentials,omitempty"`
	// MaxBodyBytes bounds the request body, in bytes (413 past it); 0
	// means server.max_body_bytes. Default 0.
	MaxBodyBytes int64 `mapstructure:"max_body_bytes" json:"max_body_bytes,omitempty"`
	// CORS, when set, answers browsers' preflights at the gateway and adds
	// the Access-Control-* headers to answers for allowed origins.
	CORS *CORSConfig `mapstructure:"cors" json:"cors,omitempty"`
}

// HeaderRulesConfig is `{ set = { "Name" = "value" }, add = { ... },
// remove = ["Name"] }`.
type HeaderRulesConfig struct {
	// Set replaces each named header with the value. Default none.
	Set map[string]string `mapstructure:"set" json:"set,omitempty"`
	// Add adds the value to each named header, after the ones present.
	// Default none.
	Add map[string]string `mapstructure:"add" json:"add,omitempty"`
	// Remove deletes the named headers. Default none.
	Remove []string `mapstructure:"remove" json:"remove,omitempty"`
}

// CORSConfig is `cors = { origins = [...], methods = [...], headers =
// [...], expose_headers = [...], max_age = "10m", credentials = false }`.
type CORSConfig struct {
	// Origins are the allowed origins, scheme://host[:port], or "*" for
	// any. Required.
	Origins []string `mapstructure:"origins" json:"origins"`
	// Methods are the methods a preflight may ask for. Default ["GET",
	// "HEAD", "POST"].
	Methods []string `mapstructure:"methods" json:"methods,omitempty"`
	// Headers are the request headers a preflight may ask for; "*"
	// allows any. Default none.
	Headers []string `mapstructure:"headers" json:"headers,omitempty"`
	// ExposeHeaders are response headers a page may read besides the
	// CORS-safelisted ones; the rate-limit headers, Retry-After and
	// X-Request-Id are always exposed. Default none.
	ExposeHeaders []string `mapstructure:"expose_headers" json:"expose_headers,omitempty"`
	// MaxAge is how long a browser may cache a preflight's answer.
	// Default "" (the browser's default, 5s).
	MaxAge string `mapstructure:"max_age" json:"max_age,omitempty"`
	// Credentials lets a page send cookies and HTTP authentication
	// (Access-Control-Allow-Credentials). Not with origins = ["*"].
	// Default false.
	Credentials bool `mapstructure:"credentials" json:"credentials,omitempty"`
}

// TargetConfig is one entry of a route's upstreams: a URL, or
// `{ url = "...", weight = 3 }`.
type TargetConfig struct {
	// URL is the target's http://, https:// or h2c:// URL (scheme, host,
	// port, optionally a base path). Required.
	URL string `mapstructure:"url" json:"url"`
	// Weight is the target's share of the route's requests relative to
	// the others: 1..1000. Default 1.
	Weight int `mapstructure:"weight" json:"weight"`
}

// HealthCheckConfig is a route's `health_check` table.
type HealthCheckConfig struct {
	// Path is the path requested from each target, starting with '/'
	// (with a query if wanted; not joined to the target URL's own path).
	// The probe carries the target's configured host as Host and
	// "Tollgate-HealthCheck/1" as User-Agent. Default "/healthz".
	Path string `mapstructure:"path" json:"path"`
	// Interval is the time between two probes of one target, at least
	// "100ms"; the probes of a route's targets are spread over it.
	// Default "5s".
	Interval string `mapstructure:"interval" json:"interval"`
	// Timeout bounds one probe (connection, headers and the first 4 KiB
	// of the body, all that is read); at most interval. Default "1s".
	Timeout string `mapstructure:"timeout" json:"timeout"`
	// UnhealthyAfter is how many failed probes in a row make a target
	// unhealthy (1..100); a probe fails when it errors, times out or
	// answers a status outside 200..399 (a redirect passes, and is not
	// followed). Default 2.
	UnhealthyAfter int `mapstructure:"unhealthy_after" json:"unhealthy_after"`
	// HealthyAfter is how many passed probes in a row make an unhealthy
	// target healthy again (1..100). Default 2.
	HealthyAfter int `mapstructure:"healthy_after" json:"healthy_after"`
}

// OutlierConfig is a route's `outlier_detection` table.
type OutlierConfig struct {
	// ConsecutiveFailures is how many failures in a row (a connection
	// that fails, a timeout, or a 502/503/504 answer; not another 5xx,
	// which a client can provoke) eject a target, 0..1000; 0 turns
	// passive health off. At most half of a route's targets (rounded
	// down) are ejected at once. Default 5.
	ConsecutiveFailures int `mapstructure:"consecutive_failures" json:"consecutive_failures"`
	// BaseEjection is the first ejection's length; each further ejection
	// in a row doubles it. The count starts again once the target has
	// been back this long and serves a request. Default "10s".
	BaseEjection string `mapstructure:"base_ejection" json:"base_ejection"`
	// MaxEjection bounds an ejection's length. Default "300s".
	MaxEjection string `mapstructure:"max_ejection" json:"max_ejection"`
}

// RetryBudgetConfig is a route's `retry_budget` table.
type RetryBudgetConfig struct {
	// Percent is the largest share of a route's requests in Window that
	// may be retries, 0..100. Default 20.
	Percent int `mapstructure:"percent" json:"percent"`
	// Window is the span over which requests and retries are counted.
	// Default "10s".
	Window string `mapstructure:"window" json:"window"`
	// MinRetries is how many retries a Window allows whatever the share,
	// so that a quiet route can still retry. Default 3.
	MinRetries int `mapstructure:"min_retries" json:"min_retries"`
}

// RespondConfig is `respond = { status = 200, body = "...", content_type = "..." }`,
// or `respond = { quota = true, routes = [...] }`.
type RespondConfig struct {
	// Status is the response status, 100..599. Default 200 (0 means 200).
	Status int `mapstructure:"status" json:"status"`
	// Body is the response body. Default "".
	Body string `mapstructure:"body" json:"body"`
	// ContentType is the Content-Type. Default "text/plain; charset=utf-8"
	// ("" means that).
	ContentType string `mapstructure:"content_type" json:"content_type"`
	// Quota, when true, answers with the caller's own budget as JSON (every
	// limit that applies to it, per route) instead of Status and Body; the
	// answer counts against no limit but the route's own. Default false.
	Quota bool `mapstructure:"quota" json:"quota,omitempty"`
	// Routes names the routes a quota answer reports; empty means every
	// route. Only with Quota. Default none.
	Routes []string `mapstructure:"routes" json:"routes,omitempty"`
}

// Default returns a Config holding every default of the configuration reference. Limits and
// Routes are empty; see DefaultLimit and DefaultRoute for their entries.
func Default() Config {
	return Config{
		Server: ServerConfig{
			Listen:            "127.0.0.1:8080",
			AdminListen:       "127.0.0.1:9090",
			ReadHeaderTimeout: "5s",
			IdleTimeout:       "60s",
			ShutdownTimeout:   "15s",
			MaxHeaderBytes:    65536,

			HTTP2MaxConcurrentStreams: 100,
			GCMinHeap:                 32 << 20,
			RequestID:                 true,
		},
		Store: StoreConfig{
			Backend: "memory",
			OnError: "local",
			Timeout: "50ms",
			Memory:  MemoryConfig{MaxKeys: 1000000},
			Redis:   RedisConfig{Prefix: "tollgate:", LeaseTTL: "30s", Coalesce: true},
		},
		Identity: IdentityConfig{
			Sources:      []string{"user", "api_key", "ip"},
			APIKeyHeader: keys.DefaultAPIKeyHeader,
			IPv6Prefix:   64,
			MaxValueLen:  1024,
			JWT:          JWTConfig{Header: "Authorization", Claim: "sub", Leeway: "0s", JWKSRefresh: "5m"},
		},
		Headers:   HeadersConfig{Emit: []string{"ietf"}},
		AccessLog: AccessLogConfig{Format: "jsonl", FlushInterval: "1s"},
		Usage:     UsageConfig{FlushInterval: "10s", Timeout: "10s", MaxPending: 100000, BatchSize: 100},
	}
}

// DefaultMaxWaiting is the default of limits[].max_waiting: the requests
// one gateway lets wait on one delay limit at once.
const DefaultMaxWaiting = 1024

// DefaultLimit returns the defaults of one [[limits]] entry (Name and Rates
// are left for the configuration to fill in).
func DefaultLimit() LimitConfig {
	return LimitConfig{
		Algorithm:  "sliding_window_counter",
		By:         []string{"client"},
		Cost:       1,
		Mode:       "enforce",
		OnMissing:  "shared",
		Count:      "request",
		OnLimit:    "reject",
		MaxWaiting: DefaultMaxWaiting,
		OnError:    "shared",

		EnforcePercent: 100,

		// Token budgets (cost_response_json, cost_request_json).
		OnMissingUsage:   "estimate",
		CostScanBytes:    64 << 20,
		CostRequestBytes: 1 << 20,
	}
}

// DefaultRoute returns the defaults of one [[routes]] entry (Name and
// Upstream or Respond are left for the configuration to fill in).
func DefaultRoute() RouteConfig {
	return RouteConfig{PathPrefix: "/", Timeout: "30s", Balance: "round_robin", HashOn: "client",
		OutlierDetection: OutlierConfig{ConsecutiveFailures: 5, BaseEjection: "10s", MaxEjection: "300s"},
		RetryBodyBytes:   64 << 10,
		RetryBudget:      RetryBudgetConfig{Percent: 20, Window: "10s", MinRetries: 3},
		ResolveInterval:  "30s"}
}
