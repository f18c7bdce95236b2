package telemetry

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// opts is one attribute set, prepared as the option slice the counters
// take, so that counting builds nothing.
type opts struct {
	add []metric.AddOption
}

func newOpts(kv ...attribute.KeyValue) opts {
	return opts{add: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}}
}

type reqKey struct{ route, method, outcome string }

func reqAttrs(k reqKey) attribute.Set {
	return attribute.NewSet(AttrRoute.String(k.route), AttrMethod.String(k.method), AttrOutcome.String(k.outcome))
}

func routeAttrs(route string) attribute.Set { return attribute.NewSet(AttrRoute.String(route)) }

func noAttrs(struct{}) attribute.Set { return *attribute.EmptySet() }

type limitKey struct {
	name            string
	allowed, shadow bool
	// plan is the client's plan, "" for none: bounded by [[plans]] (a
	// consumer's name never becomes a label).
	plan string
}

func limitAttrs(k limitKey) attribute.Set {
	decision, mode := "denied", "enforce"
	if k.allowed {
		decision = "allowed"
	}
	if k.shadow {
		mode = "shadow"
	}
	if k.plan != "" {
		return attribute.NewSet(AttrLimit.String(k.name), AttrDecision.String(decision), AttrMode.String(mode), AttrPlan.String(k.plan))
	}
	return attribute.NewSet(AttrLimit.String(k.name), AttrDecision.String(decision), AttrMode.String(mode))
}

func nearAttrs(name string) attribute.Set { return attribute.NewSet(AttrLimit.String(name)) }

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

// counters counts events by label combination on the request path with
// one atomic add, and reports the counts to an observable counter at
// collection. Reads are a lock-free map lookup; a new combination copies
// the map under a mutex. Like cache, its size is bounded by the
// configured names.
type counters[K comparable] struct {
	m  atomic.Pointer[map[K]*count]
	mu sync.Mutex
}

// count is one label combination's running total.
type count struct {
	n     atomic.Int64
	attrs metric.ObserveOption
}

// add counts one event of k; attrs builds k's attribute set the first time.
func (c *counters[K]) add(k K, attrs func(K) attribute.Set) {
	if m := c.m.Load(); m != nil {
		if n, ok := (*m)[k]; ok {
			n.n.Add(1)
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if n, ok := (*old)[k]; ok {
			n.n.Add(1)
			return
		}
	}
	next := make(map[K]*count, 1+lenCounts(old))
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	n := &count{attrs: metric.WithAttributeSet(attrs(k))}
	n.n.Add(1)
	next[k] = n
	c.m.Store(&next)
}

// observe reports every combination's total to inst.
func (c *counters[K]) observe(o metric.Observer, inst metric.Int64Observable) {
	m := c.m.Load()
	if m == nil {
		return
	}
	for _, n := range *m {
		o.ObserveInt64(inst, n.n.Load(), n.attrs)
	}
}

func lenCounts[K comparable](m *map[K]*count) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
