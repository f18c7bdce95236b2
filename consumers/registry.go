// Package consumers is the registry of known API clients: who owns which
// API key, on which plan, with which rates of their own. The registry is
// read from its own file (so that a deploy pipeline or a secret manager
// can write it without touching routes), compiled once per configuration,
// and looked up on the request path by the SHA-256 of the key the request
// carries: O(1), without allocating, and with no plaintext key kept.
package consumers

import (
	"crypto/sha256"
	"strings"
	"sync"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/ratelimit"
)

// Consumer is one compiled registry entry.
type Consumer struct {
	// Consumer is what identity resolution sees: name, plan, and whether
	// Rates is set.
	keys.Consumer
	// Rates are the consumer's own rates by limit name (parsed, not yet
	// checked against the limit's algorithm: the policy builds the
	// variants and reports their problems at Path).
	Rates map[string][]ratelimit.Rate
	// Path is the entry's field path in the file ("consumers.toml:
	// consumers[3]"), for problems found when the policy builds its
	// variants.
	Path string
}

// Registry maps API keys to consumers. It is immutable once compiled and
// safe for concurrent use; a reload compiles a new one and swaps it in
// with the policy.
type Registry struct {
	byKey  map[[sha256.Size]byte]*keys.Consumer
	byName map[string]*Consumer
	list   []*Consumer
	// known maps the keys that requests have presented and that a
	// consumer owns to that consumer (string → *keys.Consumer), so that
	// a known key is hashed with SHA-256 once per registry, not once per
	// request. It holds only registered keys — one plaintext per digest
	// — so no client can grow it; unknown keys are never stored.
	known sync.Map
}

var _ keys.Directory = (*Registry)(nil)

// ByKey returns the consumer owning apiKey, or nil. A key seen before is
// one lookup in a concurrent map; another is hashed with SHA-256 and read
// from the digest map. Neither allocates, except the first time a
// registered key is seen (its copy is kept).
func (r *Registry) ByKey(apiKey string) *keys.Consumer {
	if r == nil || len(r.byKey) == 0 {
		return nil
	}
	if c, ok := r.known.Load(apiKey); ok {
		return c.(*keys.Consumer)
	}
	c := r.byDigest(apiKey)
	if c != nil {
		// The request's header memory is not ours to keep.
		r.known.Store(strings.Clone(apiKey), c)
	}
	return c
}

// byDigest looks apiKey up by its SHA-256.
func (r *Registry) byDigest(apiKey string) *keys.Consumer {
	if len(apiKey) <= stackKey {
		return r.byKey[sha256.Sum256([]byte(apiKey))] // the compiler copies into a stack buffer
	}
	bp := scratch.Get().(*[]byte)
	buf := append((*bp)[:0], apiKey...)
	c := r.byKey[sha256.Sum256(buf)]
	if cap(buf) <= maxPooled {
		*bp = buf
		scratch.Put(bp)
	}
	return c
}

// stackKey is the longest key whose []byte conversion the compiler keeps
// on the stack (a 32-byte buffer); longer keys are copied into a pooled
// buffer, so that no key length allocates.
const stackKey = 32

// scratch holds key buffers for ByKey.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// maxPooled bounds the buffers returned to the pool: one request with a
// huge key must not pin its size.
const maxPooled = 64 << 10

// ByName returns the consumer named name, or nil, as keys.Directory wants.
func (r *Registry) ByName(name string) *keys.Consumer {
	if c := r.Consumer(name); c != nil {
		return &c.Consumer
	}
	return nil
}

// Consumer returns the compiled consumer named name, or nil.
func (r *Registry) Consumer(name string) *Consumer {
	if r == nil {
		return nil
	}
	return r.byName[name]
}

// Consumers returns every consumer in file order. The slice is shared:
// do not modify it.
func (r *Registry) Consumers() []*Consumer {
	if r == nil {
		return nil
	}
	return r.list
}

// Len returns the number of consumers.
func (r *Registry) Len() int {
	if r == nil {
		return 0
	}
	return len(r.list)
}

// Keys returns the number of registered API keys.
func (r *Registry) Keys() int {
	if r == nil {
		return 0
	}
	return len(r.byKey)
}
