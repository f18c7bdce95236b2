package upstream

import (
	"log/slog"
	"sync"
)

// Options configures a Registry.
type Options struct {
	// Logger receives the health and resolution changes; nil uses
	// slog.Default().
	Logger *slog.Logger
}

// Registry holds the Pools of the routes in force across reloads.
type Registry struct {
	log *slog.Logger

	mu    sync.Mutex
	pools map[string]*Pool // by route name
}

// NewRegistry returns an empty Registry.
func NewRegistry(o Options) *Registry {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Registry{log: o.Logger, pools: map[string]*Pool{}}
}

// Update makes specs (by route name) the routes in force and returns
// their Pools: a route whose Spec is Equal to its previous one keeps its
// Pool; the Pools of other routes are stopped.
func (r *Registry) Update(specs map[string]*Spec) map[string]*Pool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]*Pool, len(specs))
	for route, s := range specs {
		if p := r.pools[route]; p != nil && p.spec.Equal(s) {
			out[route] = p
			continue
		}
		out[route] = newPool(route, s)
	}
	for route, p := range r.pools {
		if out[route] != p {
			p.stop()
		}
	}
	r.pools = out
	return out
}

// Pools returns the Pools in force.
func (r *Registry) Pools() []*Pool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Pool, 0, len(r.pools))
	for _, p := range r.pools {
		out = append(out, p)
	}
	return out
}

// Close stops every Pool.
func (r *Registry) Close() {
	r.Update(nil)
}

// stop ends p's background work (health probes, DNS resolution).
func (p *Pool) stop() {}
