package main

import (
	"github.com/tollgate/gateway/jwks"
	"github.com/tollgate/gateway/policy"
)

// jwksConfig is the fetch a policy's key set needs.
func jwksConfig(s *policy.JWKS) jwks.Config {
	return jwks.Config{URL: s.URL, Issuer: s.Issuer, Refresh: s.Refresh}
}

// keysFor binds p's token verification to the key set it names (nil
// without one, p unchanged): the running set when its fetch is the same,
// so a reload neither forgets the keys nor fetches them again, else a new
// set, started (its first fetch, bounded by jwks.FetchTimeout, happens
// here: a provider that is down leaves the set empty and /readyz
// unready, and every token refused, until it answers). The caller makes
// the set live with useKeys once p is, or closes a new one it drops.
func (g *gateway) keysFor(p *policy.Policy) (*jwks.Set, error) {
	if p.JWKS == nil {
		return nil, nil
	}
	cfg := jwksConfig(p.JWKS)
	set := g.jwks.Load()
	if set == nil || set.Config() != cfg {
		set = jwks.New(cfg, jwks.Options{Logger: g.log, Fetched: g.metrics.JWKSFetched})
		set.Start()
	}
	ex, err := p.Identity.WithKeySet(set)
	if err != nil {
		g.dropKeys(set)
		return nil, err
	}
	p.Identity = ex
	return set, nil
}

// useKeys makes set (nil for none) the running key set and stops the one
// it replaces.
func (g *gateway) useKeys(set *jwks.Set) {
	if old := g.jwks.Swap(set); old != nil && old != set {
		old.Close()
	}
}

// dropKeys stops set unless it is the running one.
func (g *gateway) dropKeys(set *jwks.Set) {
	if set != nil && set != g.jwks.Load() {
		set.Close()
	}
}

// bindLiveKeys binds a candidate's token verification to the running key
// set when it names the same one; a candidate naming another set refuses
// every token until promoted (a candidate starts no fetch of its own).
func (g *gateway) bindLiveKeys(p *policy.Policy) {
	set := g.jwks.Load()
	if p.JWKS == nil || set == nil || set.Config() != jwksConfig(p.JWKS) {
		return
	}
	if ex, err := p.Identity.WithKeySet(set); err == nil {
		p.Identity = ex
	}
}

// jwksStatus is the running key set's state for /readyz and the metrics;
// ok is false without one.
func (g *gateway) jwksStatus() (jwks.Status, bool) {
	set := g.jwks.Load()
	if set == nil {
		return jwks.Status{}, false
	}
	return set.Status(), true
}
