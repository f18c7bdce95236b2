package upstream

import (
	"net/url"
	"slices"
	"time"
)

// Balance is how a route picks among its targets.
type Balance uint8

const (
	// RoundRobin takes the targets in turn, each as often as its weight
	// says (smooth weighted round robin: no target is taken twice in a row
	// when another's turn is due).
	RoundRobin Balance = iota
	// LeastRequest draws two targets by weight and takes the one with
	// fewer requests in flight (the power of two choices).
	LeastRequest
	// Hash maps a request's hash key to a target by consistent hashing:
	// a client sticks to its target, and a target joining or leaving
	// moves only its own share of the clients.
	Hash
)

// String returns the configuration name of b.
func (b Balance) String() string {
	switch b {
	case LeastRequest:
		return "least_request"
	case Hash:
		return "hash"
	}
	return "round_robin"
}

// TargetSpec is one configured target.
type TargetSpec struct {
	// URL is where requests go: scheme http or https (h2c:// compiled to
	// http with H2C set), a host that is an address or a DNS name, a port,
	// and optionally a base path. Read-only.
	URL *url.URL
	// H2C is set for cleartext HTTP/2 with prior knowledge.
	H2C bool
	// Weight is the target's share relative to the others, ≥ 1. Every
	// address a name resolves to is a target of this weight.
	Weight int
}

// HealthCheck is a route's active health check.
type HealthCheck struct {
	// Path is the path requested with GET from each target.
	Path string
	// Interval is the time between two probes of one target.
	Interval time.Duration
	// Timeout bounds one probe.
	Timeout time.Duration
	// UnhealthyAfter and HealthyAfter are the numbers of failed and of
	// passed probes in a row that change a target's health.
	UnhealthyAfter, HealthyAfter int
}

// Outlier configures passive health: ejection of a target that keeps
// failing.
type Outlier struct {
	// ConsecutiveFailures ejects a target after this many failures in a
	// row; 0 ejects none.
	ConsecutiveFailures int
	// BaseEjection is the first ejection's length, doubled for each
	// further ejection in a row, up to MaxEjection.
	BaseEjection, MaxEjection time.Duration
}

// RetryBudget bounds the share of a route's requests that are retries.
type RetryBudget struct {
	// Percent is the largest share, 0..100, of the requests of Window
	// that may be retries.
	Percent int
	// Window is the span over which requests and retries are counted.
	Window time.Duration
	// MinRetries is the number of retries a Window allows whatever the
	// share.
	MinRetries int
}

// Spec is a route's upstream as the configuration describes it. A single
// upstream URL is a Spec of one target.
type Spec struct {
	// Targets are the configured targets, at least one.
	Targets []TargetSpec
	// Balance picks among the targets.
	Balance Balance
	// HashHeader is the canonical header whose value Hash balancing
	// hashes; "" hashes the client's identity.
	HashHeader string
	// Health is the active health check; nil probes nothing.
	Health *HealthCheck
	// Outlier is the passive health check.
	Outlier Outlier
	// Retries is the number of other targets a failed idempotent request
	// is tried on.
	Retries int
	// RetryBodyBytes is the largest request body buffered for a retry.
	RetryBodyBytes int64
	// Budget bounds the retries.
	Budget RetryBudget
	// ResolveInterval is how often DNS names are resolved again; 0 resolves
	// once.
	ResolveInterval time.Duration
}

// Single reports whether s is one target with nothing to balance, probe
// or retry: the route forwards to it directly, as a route with one
// upstream URL always has. Passive health does not count: it never
// ejects a route's only target (at most half of the targets, rounded
// down, are ever ejected).
func (s *Spec) Single() bool {
	return len(s.Targets) == 1 && s.Health == nil && s.Retries == 0
}

// Equal reports whether s and o describe the same upstream, so that a
// reload keeps the Pool (and its health) of an unchanged route.
func (s *Spec) Equal(o *Spec) bool {
	if s == nil || o == nil {
		return s == o
	}
	if s.Balance != o.Balance || s.HashHeader != o.HashHeader || s.Outlier != o.Outlier ||
		s.Retries != o.Retries || s.RetryBodyBytes != o.RetryBodyBytes || s.Budget != o.Budget ||
		s.ResolveInterval != o.ResolveInterval {
		return false
	}
	if (s.Health == nil) != (o.Health == nil) || s.Health != nil && *s.Health != *o.Health {
		return false
	}
	return slices.EqualFunc(s.Targets, o.Targets, func(a, b TargetSpec) bool {
		return a.URL.String() == b.URL.String() && a.H2C == b.H2C && a.Weight == b.Weight
	})
}
