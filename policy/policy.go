package policy

import (
	"context"
	"crypto"
	"errors"
	"net/netip"
	"net/url"
	"time"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/upstream"
)

// Policy is a compiled config.Config: immutable after Compile and safe for
// concurrent use, so requests never touch raw configuration.
type Policy struct {
	// Config is the source the policy was compiled from (defaults applied),
	// for /admin/config. Its secrets are typed (config.SecretURL), so it marshals
	// with them redacted.
	Config config.Config
	// Server holds the listener settings.
	Server Server
	// Store holds the counter store settings.
	Store Store
	// Identity resolves request identities.
	Identity *keys.Extractor
	// Headers are the rate-limit header styles to emit.
	Headers headers.Styles
	// RLS is the compiled [rls] table: Envoy's rate limit service; nil
	// when it is not configured.
	RLS *RLS
	// Limits are the compiled limits, in configuration order.
	Limits []*Limit
	// Routes are the compiled routes, in configuration order.
	Routes []*Route
	// AdminToken is the admin API's bearer token ("" = none), read from
	// the environment variable admin.token_env names.
	AdminToken Secret
	// AdminHosts are the admin.allowed_hosts names in the form the admin
	// listener compares a Host header with: lower case, without a
	// trailing dot.
	AdminHosts []string
	// AccessLog holds the access-log settings.
	AccessLog AccessLog
	// Warnings name settings that are valid but let a client dodge a
	// limit; validate and the gateway print them at startup and reload.
	Warnings []string
	// Plans are the [[plans]] names, in order.
	Plans []string
	// Consumers holds the [consumers] settings and the registry.
	Consumers Consumers
	// JWKS is the key set identity.jwt fetches (jwks_url or
	// oidc_issuer), nil without one. Identity then verifies tokens with
	// UnboundKeys, which holds no key, until the process that serves the
	// policy binds the set it fetches (keys.Extractor.WithKeySet): the
	// policy itself touches no network.
	JWKS *JWKS
	// Usage is the compiled [usage] table, nil without a sink.
	Usage *UsageExport

	// DenyExtras is set when a limit has its own answer or a Retry-After
	// jitter, and Tags when one is in mode "tag": the request path looks
	// for them only then.
	DenyExtras, Tags bool

	byName map[string]*Limit
	// identity is the [identity] table as build parsed and checked it,
	// without secrets; Compile adds them and builds Identity from it.
	identity keys.Config
}

// JWKS is where identity.jwt's key set comes from.
type JWKS struct {
	// URL is jwks_url, "" with Issuer.
	URL string
	// Issuer is oidc_issuer, "" with URL.
	Issuer string
	// Refresh is jwks_refresh.
	Refresh time.Duration
}

// UnboundKeys is the key set of a compiled policy whose keys come from a
// JWKS that nothing fetches yet: it holds no key, so every token is
// refused.
var UnboundKeys keys.KeySet = unboundKeys{}

type unboundKeys struct{}

func (unboundKeys) VerificationKey(context.Context, string, string) (crypto.PublicKey, error) {
	return nil, errors.New("jwks: key set not fetched")
}

// AccessLog is the compiled [access_log] table.
type AccessLog struct {
	// Path is the file, "stdout" or "stderr"; "" disables the log.
	Path string
	// Format is the line format.
	Format LogFormat
	// RawClient logs identities unhashed.
	RawClient bool
	// Salt salts identity hashes (from access_log.salt_env).
	Salt Secret
	// FlushInterval is how often buffered lines are written.
	FlushInterval time.Duration
}

// Server is the compiled [server] table.
type Server struct {
	// Listen is the public listener's address.
	Listen string
	// AdminListen is the admin listener's address; "" disables it.
	AdminListen string
	// ReadHeaderTimeout bounds reading request headers.
	ReadHeaderTimeout time.Duration
	// IdleTimeout bounds idle keep-alive connections.
	IdleTimeout time.Duration
	// ShutdownTimeout bounds the drain on shutdown.
	ShutdownTimeout time.Duration
	// MaxHeaderBytes bounds request header size.
	MaxHeaderBytes int
	// WatchConfig reloads the configuration when its file changes.
	WatchConfig bool
	// TLS is the listener's TLS; nil for cleartext.
	TLS *TLS
	// H2C serves cleartext HTTP/2 (prior knowledge) beside HTTP/1.1.
	H2C bool
	// HTTP2MaxConcurrentStreams bounds the open streams of one HTTP/2
	// connection.
	HTTP2MaxConcurrentStreams int
	// GCMinHeap is the garbage collector's minimum heap in bytes; 0 leaves
	// Go's pacing alone.
	GCMinHeap int64
	// MaxBodyBytes is the routes' default bound of a request body; 0 is
	// none.
	MaxBodyBytes int64
	// RequestID gives every request an X-Request-Id.
	RequestID bool
	// Resolver is the DNS server ("ip:port") that resolves upstream
	// names; "" uses the system's.
	Resolver string
}

// TLS is the compiled server.tls table.
type TLS struct {
	// Certificates are the certificate/key pairs, cert_file's first; the
	// first is served when no other matches the client's SNI.
	Certificates []CertificateFiles
	// ClientCAFile is the PEM bundle client certificates are verified
	// against; "" asks for none.
	ClientCAFile string
	// ClientAuthOptional verifies a client certificate only when one is
	// sent; false requires one (when ClientCAFile is set).
	ClientAuthOptional bool
}

// CertificateFiles names one PEM certificate chain and its key.
type CertificateFiles struct {
	// Cert is the certificate chain's file.
	Cert string
	// Key is the private key's file.
	Key string
}

// Store is the compiled [store] table.
type Store struct {
	// Backend is where counters live.
	Backend Backend
	// OnError is what a store failure means.
	OnError OnError
	// Timeout is the budget of one store call.
	Timeout time.Duration
	// Clock is whose clock decides (never 0: an unset clock is compiled
	// to ratelimit.ClockStore with the Redis backend, else ratelimit.ClockLocal).
	Clock ratelimit.Clock
	// RequireAtStartup refuses to start without a reachable Redis.
	RequireAtStartup bool
	// MemoryMaxKeys bounds the in-memory store's keys.
	MemoryMaxKeys int
	// MemoryMaxBytes bounds the in-memory store's bytes; 0 derives the
	// bound from the machine's memory.
	MemoryMaxBytes int64
	// Redis holds the Redis settings (meaningful when Backend is
	// BackendRedis).
	Redis RedisStore
}

// RedisStore is the compiled [store.redis] table. Exactly one of URL,
// Cluster and SentinelMaster is set when the backend is Redis.
type RedisStore struct {
	// URL is a standalone server (redis:// or rediss://).
	URL config.SecretURL
	// Cluster lists Cluster seed addresses.
	Cluster []string
	// SentinelMaster is the Sentinel-managed master's name.
	SentinelMaster string
	// SentinelAddrs are the Sentinel addresses.
	SentinelAddrs []string
	// Prefix namespaces every counter key.
	Prefix string
	// Username is the ACL user ("" for none or the URL's own).
	Username string
	// Password is read from the environment variable named by
	// password_env ("" for none or the URL's own).
	Password Secret
	// LeaseTTL is the lease of a concurrency slot.
	LeaseTTL time.Duration
	// Coalesce lets concurrent decisions share round trips.
	Coalesce bool
}

// Limit is one compiled [[limits]] entry.
type Limit struct {
	// Limit is the algorithm's definition, Finished (ID set).
	*ratelimit.Limit
	// By are the parts of the counter key.
	By []keys.Part
	// Cost is the static cost of a request, ≥ 1.
	Cost int64
	// CostHeader is the canonical name of the header carrying the cost;
	// "" means the cost is static.
	CostHeader string
	// CostMin is the floor of a cost read from CostHeader (≤ Cost).
	CostMin int64
	// CostTrustedFrom, when non-empty, are the peers whose CostHeader is
	// believed; from others Cost applies.
	CostTrustedFrom []netip.Prefix
	// ExemptIPs are client prefixes this limit never limits.
	ExemptIPs []netip.Prefix
	// OnMissing is what a request lacking an identity part of By gets.
	OnMissing OnMissing
	// ByIP is By with api_key, user and header parts replaced by ip: the
	// key parts used when OnMissing is OnMissingIP and a part is missing.
	ByIP []keys.Part
	// Response, when non-nil, counts the limit by response (count =
	// "response"): checked before forwarding, counted after.
	Response *ResponseCount
	// MaxWaiting bounds the requests waiting on a delay limit
	// (Limit.MaxDelay > 0) in this gateway.
	MaxWaiting int
	// Distinct is what a distinct limit counts the distinct values of;
	// nil for the other algorithms (limit_distinct.go).
	Distinct *keys.Distinct
	// Adaptive, when not nil, makes this an adaptive_concurrency limit
	// (compile_adaptive.go): decided in each gateway from the upstream's
	// latency, never by the store; routes list it in Route.Adaptive.
	Adaptive *Adaptive
	// WaitShare bounds the requests of one counter key among them: a
	// key's fair share of the waiting room, so that a few keys (which a
	// client may invent) cannot fill it for everyone. It is MaxWaiting
	// when the key is the same for every client (by = [] or only
	// route), where there is no one to share with.
	WaitShare int
	// NotifyAt are the fractions of the limit whose first crossing in a
	// period posts a threshold notice (usage export); nil: none.
	NotifyAt []float64
	// Exprs are the limit's expressions (when, key, cost_expr); nil
	// without any, so a limit without them pays one nil check
	// (limit_expr.go).
	Exprs *Exprs
	// Answer is the limit's own answer to a request it denies (response);
	// nil: the 429 problem (limit_answer.go).
	Answer *Answer
	// Tag is set for mode = "tag": the limit is a shadow limit whose
	// denials are forwarded with a header (limit_rollout.go).
	Tag *Tag
	// EnforcePercent is the share of keys the limit is enforced for,
	// 0..100; the rest see it as a shadow limit (limit_rollout.go).
	EnforcePercent int
	// Jitter is retry_after_jitter (0: none): the most added to a
	// denial's wait (limit_rollout.go).
	Jitter time.Duration
	// twins are the shadow copies of this limit's definitions, for the
	// keys EnforcePercent leaves out (limit_rollout.go).
	twins twinCache

	exemptKeys      map[[32]byte]struct{}
	exemptConsumers map[string]struct{}
	// plans are the variants of [limits.plan_rates] by plan index (from
	// zero; nil: the plan gets Limit); custom those of consumers with
	// rates of their own. See For.
	plans  []*ratelimit.Limit
	custom map[*keys.Consumer]*ratelimit.Limit
	// redisLog is set when the store is Redis: every definition of the
	// limit (its own, plans', consumers', overrides') is held to
	// maxRedisLogUnits (checkRedisLog).
	redisLog bool
}

// OnMissing is a limit's on_missing setting.
type OnMissing uint8

// The on_missing values.
const (
	// OnMissingShared keys a missing part as the literal "-".
	OnMissingShared OnMissing = iota
	// OnMissingIP keys the request by its client IP instead.
	OnMissingIP
	// OnMissingReject answers 401 without counting.
	OnMissingReject
)

// Exempt reports whether the client id is exempt from l: by its IP, its
// API key or its consumer. An invalid IP and an empty API key match
// nothing.
func (l *Limit) Exempt(id *keys.Identity) bool {
	if id.Consumer != nil && len(l.exemptConsumers) > 0 {
		if _, ok := l.exemptConsumers[id.Consumer.Name]; ok {
			return true
		}
	}
	return l.ExemptAddr(id.IP, id.APIKey)
}

// ExemptAddr reports whether a client with this IP or API key is exempt
// from l. An invalid ip and an empty apiKey match nothing.
func (l *Limit) ExemptAddr(ip netip.Addr, apiKey string) bool {
	if ip.IsValid() && len(l.ExemptIPs) > 0 {
		a := ip.Unmap().WithZone("")
		for _, p := range l.ExemptIPs {
			if p.Contains(a) {
				return true
			}
		}
	}
	if apiKey != "" && len(l.exemptKeys) > 0 {
		_, ok := l.exemptKeys[keys.HashAPIKey(apiKey)]
		return ok
	}
	return false
}

// ExemptKeys returns how many API keys are exempt from l.
func (l *Limit) ExemptKeys() int { return len(l.exemptKeys) }

// Route is one compiled [[routes]] entry.
type Route struct {
	// Name identifies the route (and is the "route" key part).
	Name string
	// Host is the lower-case host the route is restricted to; "" for any.
	Host string
	// PathPrefix is the prefix in normal form (NormalizePath; "/" matches
	// every path).
	PathPrefix string
	// Methods are the allowed methods, upper case; empty allows all.
	Methods []string
	// Upstream is where requests go: the route's first target (its only
	// one when Upstreams is Single); nil when Respond is set. An h2c://
	// upstream is compiled to http:// with H2C set.
	Upstream *url.URL
	// H2C is set for an h2c:// upstream: cleartext HTTP/2 with prior
	// knowledge (a gRPC server without TLS).
	H2C bool
	// Upstreams are the route's targets and how they are balanced,
	// probed and retried (upstream or upstreams); nil when Respond is
	// set.
	Upstreams *upstream.Spec
	// StripPrefix removes PathPrefix from the forwarded path.
	StripPrefix bool
	// Timeout is the budget for the upstream's response headers (then
	// 504); 0 means none. It does not bound the body.
	Timeout time.Duration
	// IdleTimeout bounds each wait for bytes of the upstream's response
	// body; 0 (the default) means none. Upgraded connections are not
	// bound.
	IdleTimeout time.Duration
	// Upgrades are the protocols a client may upgrade to on this route,
	// lower case, each a name ("websocket": any version) or name/version;
	// empty (the default) forwards no Upgrade. See AllowsUpgrade.
	Upgrades []string
	// Respond, when not nil, is the route's own answer (no upstream).
	Respond *Respond
	// RequestHeaders and ResponseHeaders are the route's header rules
	// (nil: none): the request's before it is forwarded, the upstream
	// answer's before it is sent on.
	RequestHeaders, ResponseHeaders *HeaderRules
	// HideCredentials removes the API key and bearer token the gateway
	// reads before forwarding.
	HideCredentials bool
	// MaxBodyBytes bounds the request body (413 past it); 0: no bound.
	// The route's own max_body_bytes, else server.max_body_bytes.
	MaxBodyBytes int64
	// CORS is the route's cors table; nil: the gateway does no CORS.
	CORS *CORS
	// Limits are gateway.limits then the route's own, duplicates removed.
	Limits []*Limit
	// Adaptive are the adaptive_concurrency limits among them, in the
	// same order, kept out of Limits: no store decides them.
	Adaptive []*Limit
	// priority is the route's priority class (noPriority: none).
	priority int8
	// RateLimitPolicy is the RateLimit-Policy header value of Limits'
	// enforced windows, built once (with quotas' nominal windows: see
	// RateLimitPolicyAt).
	RateLimitPolicy string
	// quotaPolicy is set when Limits have a quota, whose window in the
	// header is its current period's (RateLimitPolicyAt).
	quotaPolicy *periodPolicy

	// loose says how PathPrefix reads in Match's loose reading, and
	// foldedPrefix is that reading when it is a plain path that differs.
	loose        looseKind
	foldedPrefix string
	// planPolicies are RateLimitPolicy per plan index (from zero).
	planPolicies []string
}

// Respond is a route's fixed answer.
type Respond struct {
	// Status is the response status.
	Status int
	// Body is the response body.
	Body string
	// ContentType is the response Content-Type.
	ContentType string
	// ContentTypeHeader and ContentLengthHeader are the header values,
	// built once so that answering allocates nothing. Read-only.
	ContentTypeHeader, ContentLengthHeader []string
	// Quota, when not nil, makes the answer the caller's own budget
	// instead of Body.
	Quota *Quota
}

// Quota is what a quota answer reports.
type Quota struct {
	// Routes are the routes whose limits it reports, in configuration
	// order.
	Routes []*Route
}

// Limit returns the limit named name, or nil.
func (p *Policy) Limit(name string) *Limit { return p.byName[name] }
