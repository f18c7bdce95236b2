package upstream

import (
	"context"
	"log/slog"
	"net"
	"sort"
	"sync"
)

// Options configures a Registry.
type Options struct {
	// Logger receives the health and resolution changes; nil uses
	// slog.Default().
	Logger *slog.Logger
	// Resolver resolves the targets' DNS names; nil uses
	// net.DefaultResolver (the system's configuration).
	Resolver Resolver
	// Inert makes Pools that neither probe nor resolve: their targets stay
	// as configured, healthy (replay and tests, whose transport is a
	// stub).
	Inert bool
}

// Registry holds the Pools of the routes in force across reloads, and
// runs their background work: a Pool's health probes and DNS resolution
// start when Update makes it and stop when an Update drops it.
type Registry struct {
	log      *slog.Logger
	resolver Resolver
	inert    bool

	// update serializes Updates; mu guards pools, held only briefly so
	// that readers (/readyz, metrics) never wait for an Update's lookups.
	update sync.Mutex
	mu     sync.Mutex
	pools  map[string]*Pool // by route name
}

// NewRegistry returns an empty Registry.
func NewRegistry(o Options) *Registry {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	return &Registry{log: o.Logger, resolver: o.Resolver, inert: o.Inert, pools: map[string]*Pool{}}
}

// Update makes specs (by route name) the routes in force and returns
// their Pools: a route whose Spec is Equal to its previous one keeps its
// Pool; the Pools of other routes are stopped. A route whose Spec changed
// gets a new Pool that keeps the targets (and their health and ejection
// state) of the old one that it names again, and the old one's resolved
// addresses until its names resolve anew. The new Pools' names are
// resolved before Update returns, within StartResolveTimeout.
func (r *Registry) Update(specs map[string]*Spec) map[string]*Pool {
	r.update.Lock()
	defer r.update.Unlock()
	r.mu.Lock()
	prev := r.pools
	r.mu.Unlock()
	out := make(map[string]*Pool, len(specs))
	var fresh []*Pool
	for route, s := range specs {
		old := prev[route]
		if old != nil && old.spec.Equal(s) {
			out[route] = old
			continue
		}
		// The old Pool stops first: its probes write the targets the new
		// one may keep.
		if old != nil {
			old.stop()
		}
		p := newPool(route, s)
		p.log = r.log
		if !r.inert {
			if p.Watched() {
				// Only a Pool that balances or probes resolves its names;
				// a single upstream's is resolved when it is dialled.
				p.names = namesOf(s)
			}
			p.adopt(old)
			fresh = append(fresh, p)
		}
		out[route] = p
	}
	for route, p := range prev {
		if _, kept := specs[route]; !kept {
			p.stop()
		}
	}
	r.start(fresh)
	r.mu.Lock()
	r.pools = out
	r.mu.Unlock()
	return out
}

// start resolves the names of ps concurrently, within StartResolveTimeout
// in all, then starts their background work.
func (r *Registry) start(ps []*Pool) {
	ctx, cancel := context.WithTimeout(context.Background(), StartResolveTimeout)
	var wg sync.WaitGroup
	for _, p := range ps {
		if len(p.names) > 0 {
			wg.Go(func() { p.resolveAll(ctx, r.resolver) })
		}
	}
	wg.Wait()
	cancel()
	for _, p := range ps {
		p.start(r.resolver)
	}
}

// adopt takes over from old, the Pool p replaces: the resolved addresses
// of the names both have, and the *Target of every target both list (with
// the same address, weight and protocol). A target whose route no longer
// checks health is healthy.
func (p *Pool) adopt(old *Pool) {
	if old != nil {
		prev := make(map[string]*name, len(old.names))
		for _, n := range old.names {
			prev[n.spec.URL.String()] = n
		}
		for _, n := range p.names {
			if o := prev[n.spec.URL.String()]; o != nil {
				n.addrs = o.current()
			}
		}
	}
	ts := p.build()
	if old != nil {
		ts = reuse(ts, old.Targets())
	}
	p.targets.Store(&ts)
	if p.spec.Health == nil {
		for _, t := range ts {
			resetHealth(t)
		}
	}
}

// Watched reports whether p balances over its targets, checks their
// health or retries on another one (its Spec is not Single): only then
// are its DNS names resolved into targets, one per address, and retries
// can go to another address of one name. A route with one upstream, no
// retries and no health check forwards to it as it always did (its name
// resolved by the transport when it dials: a "localhost" upstream is not
// split into an IPv4 and an IPv6 target), and its one target shows in no
// upstream metric.
func (p *Pool) Watched() bool { return !p.spec.Single() }

// start begins p's background work: the health loop when p has a health
// check, the resolution loop when it has names to resolve again.
func (p *Pool) start(res Resolver) {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	if p.spec.Health != nil {
		p.wg.Add(1)
		go p.healthLoop(ctx)
	}
	if len(p.names) > 0 && p.spec.ResolveInterval > 0 {
		p.wg.Add(1)
		go p.resolveLoop(ctx, res)
	}
}

// stop ends p's background work (health probes, DNS resolution) and
// waits for it: no probe of p writes its targets afterwards.
func (p *Pool) stop() {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	p.h1.prune(nil)
}

// Pools returns the Pools in force, by route name.
func (r *Registry) Pools() []*Pool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Pool, 0, len(r.pools))
	for _, p := range r.pools {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].route < out[j].route })
	return out
}

// Close stops every Pool.
func (r *Registry) Close() {
	r.Update(nil)
}
