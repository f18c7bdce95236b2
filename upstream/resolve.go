package upstream

import (
	"context"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/gateway/internal/logthrottle"
)

// DNS resolution of targets.
//
// A target whose host is a name (not an IP literal) is resolved when its
// Pool starts (bounded by StartResolveTimeout, so that a dead DNS server
// delays a start or reload but never hangs it) and again every
// ResolveInterval; each address it resolves to becomes a Target of the
// configured weight, named by the configured URL. Until a name first
// resolves, its one Target carries the name itself, which the transport
// dials as it always has. A failed lookup, and an answer with no address,
// keep the last good addresses: a DNS outage, or a zone emptied by
// mistake, must not take a healthy upstream out of service.

// MaxAddrs bounds the addresses one name becomes: an answer of thousands
// keeps the MaxAddrs lowest (sorted, so that the same answer in another
// order keeps the same ones).
const MaxAddrs = 64

// StartResolveTimeout bounds the resolution of a Pool's names when it
// starts.
const StartResolveTimeout = 5 * time.Second

// Resolver looks names up; *net.Resolver is one. network is "ip".
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// name is one configured target whose host is a DNS name.
type name struct {
	spec       TargetSpec
	host, port string

	mu    sync.Mutex
	addrs []netip.Addr // last good answer; nil before the first

	failures atomic.Uint64
	lastErr  atomic.Pointer[string]
	logs     logthrottle.Throttle
}

// namesOf returns the targets of s whose host is a name.
func namesOf(s *Spec) []*name {
	var out []*name
	for _, t := range s.Targets {
		host := t.URL.Hostname()
		if _, err := netip.ParseAddr(host); err == nil {
			continue
		}
		port := t.URL.Port()
		if port == "" {
			port = "80"
			if t.URL.Scheme == "https" {
				port = "443"
			}
		}
		out = append(out, &name{spec: t, host: host, port: port})
	}
	return out
}

// lookup resolves n once, keeping its last good addresses when the lookup
// fails or answers none; it reports whether the addresses changed.
func (n *name) lookup(ctx context.Context, r Resolver, p *Pool) bool {
	addrs, err := r.LookupNetIP(ctx, "ip", n.host)
	if err == nil {
		if addrs = normalize(addrs); len(addrs) == 0 {
			err = &net.DNSError{Err: errNoAddrs.Err, Name: n.host, IsNotFound: true}
		}
	}
	if err != nil {
		n.failures.Add(1)
		msg := err.Error()
		n.lastErr.Store(&msg)
		if s, ok := n.logs.Allow(time.Now()); ok {
			p.log.Warn("upstream name did not resolve; keeping its last addresses", "route", p.route,
				"target", n.spec.URL.String(), "error", err, "suppressed", s)
		}
		return false
	}
	n.lastErr.Store(nil)
	n.mu.Lock()
	defer n.mu.Unlock()
	if slices.Equal(addrs, n.addrs) {
		return false
	}
	n.addrs = addrs
	return true
}

var errNoAddrs = &net.DNSError{Err: "no usable addresses in the answer", IsNotFound: true}

// normalize sorts addrs, unmaps IPv4-in-IPv6, drops duplicates, the zone
// and the addresses no upstream is at (unusable), and keeps at most
// MaxAddrs.
func normalize(addrs []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, min(len(addrs), MaxAddrs))
	seen := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if !a.IsValid() || seen[a] || unusable(a) {
			continue
		}
		seen[a] = true
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	if len(out) > MaxAddrs {
		out = out[:MaxAddrs:MaxAddrs]
	}
	return out
}

// unusable reports whether a DNS answer's address a is one that no
// upstream is at, and that the gateway must not be pointed at by whoever
// answers for the name: the unspecified address and the rest of
// 0.0.0.0/8 (a connection to 0.0.0.0 reaches the gateway's own host, any
// service listening on loopback included), multicast and broadcast, and
// link-local addresses (169.254.0.0/16 holds the cloud instance metadata
// service, 169.254.169.254, whose credentials a forwarded request could
// read; fe80::/10 needs an interface a DNS answer cannot name). An
// operator who means such an address writes it as the target's host, which
// is never resolved.
func unusable(a netip.Addr) bool {
	if a.Is4() && (a.As4()[0] == 0 || a == netip.AddrFrom4([4]byte{255, 255, 255, 255})) {
		return true
	}
	return a.IsUnspecified() || a.IsMulticast() || a.IsLinkLocalUnicast() ||
		a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast()
}

func (n *name) current() []netip.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.addrs
}

// build returns p's target list from its spec and its names' addresses:
// the configured order, each name expanded into its addresses (or itself
// when it has none yet).
func (p *Pool) build() []*Target {
	byHost := make(map[string]*name, len(p.names))
	for _, n := range p.names {
		byHost[n.spec.URL.String()] = n
	}
	var ts []*Target
	for _, t := range p.spec.Targets {
		n := byHost[t.URL.String()]
		if n == nil {
			ts = append(ts, newTarget(t, t.URL.Host))
			continue
		}
		addrs := n.current()
		if len(addrs) == 0 {
			ts = append(ts, newTarget(t, t.URL.Host))
			continue
		}
		for _, a := range addrs {
			ts = append(ts, newTarget(t, net.JoinHostPort(a.String(), n.port)))
		}
	}
	return ts
}

// resolveAll resolves p's names concurrently until ctx ends and installs
// the targets when any changed.
func (p *Pool) resolveAll(ctx context.Context, r Resolver) {
	var wg sync.WaitGroup
	var changed atomic.Bool
	for _, n := range p.names {
		wg.Go(func() {
			if n.lookup(ctx, r, p) {
				changed.Store(true)
			}
		})
	}
	wg.Wait()
	if changed.Load() {
		p.setTargets(p.build())
	}
}

// resolveLoop resolves p's names every ResolveInterval until ctx ends.
func (p *Pool) resolveLoop(ctx context.Context, r Resolver) {
	defer p.wg.Done()
	iv := p.spec.ResolveInterval
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		// Up to a tenth early: the pools made by one reload spread out.
		timer.Reset(iv - rand.N(iv/10+1))
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		lctx, cancel := context.WithTimeout(ctx, min(iv, StartResolveTimeout))
		p.resolveAll(lctx, r)
		cancel()
	}
}

// NameStatus is the DNS state of one configured target whose host is a
// name.
type NameStatus struct {
	// Target is the configured URL.
	Target string
	// Addrs are the addresses in use (the last good answer); none before
	// the first.
	Addrs []netip.Addr
	// Failures counts the lookups that failed or answered no address.
	Failures uint64
	// LastError is why the last lookup failed, "" when it succeeded.
	LastError string
}

// Names returns the DNS state of p's targets whose host is a name.
func (p *Pool) Names() []NameStatus {
	out := make([]NameStatus, 0, len(p.names))
	for _, n := range p.names {
		st := NameStatus{Target: n.spec.URL.String(), Addrs: n.current(), Failures: n.failures.Load()}
		if e := n.lastErr.Load(); e != nil {
			st.LastError = *e
		}
		out = append(out, st)
	}
	return out
}
