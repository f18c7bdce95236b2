package telemetry

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// opts is one attribute set, prepared as the option slices the instruments
// take, so that recording builds nothing.
type opts struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

func newOpts(kv ...attribute.KeyValue) opts {
	o := metric.WithAttributeSet(attribute.NewSet(kv...))
	return opts{add: []metric.AddOption{o}, record: []metric.RecordOption{o}}
}

type reqKey struct{ route, method, outcome string }

func newReqOpts(k reqKey) opts {
	return newOpts(AttrRoute.String(k.route), AttrMethod.String(k.method), AttrOutcome.String(k.outcome))
}

type limitKey struct {
	name            string
	allowed, shadow bool
}

func newLimitOpts(k limitKey) opts {
	decision, mode := "denied", "enforce"
	if k.allowed {
		decision = "allowed"
	}
	if k.shadow {
		mode = "shadow"
	}
	return newOpts(AttrLimit.String(k.name), AttrDecision.String(decision), AttrMode.String(mode))
}

func newNearOpts(name string) opts   { return newOpts(AttrLimit.String(name)) }
func newRouteOpts(route string) opts { return newOpts(AttrRoute.String(route)) }

// cache maps a label combination to its prepared options. Reads are a
// lock-free map lookup; a miss copies the map under a mutex. The number of
// entries is bounded by the configured route and limit names.
type cache[K comparable] struct {
	m  atomic.Pointer[map[K]opts]
	mu sync.Mutex
}

func (c *cache[K]) get(k K, build func(K) opts) opts {
	if m := c.m.Load(); m != nil {
		if o, ok := (*m)[k]; ok {
			return o
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if o, ok := (*old)[k]; ok {
			return o
		}
	}
	next := make(map[K]opts, 1+lenMap(old))
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	o := build(k)
	next[k] = o
	c.m.Store(&next)
	return o
}

func lenMap[K comparable](m *map[K]opts) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
