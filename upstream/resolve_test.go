package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeResolver answers lookups from a table the test changes.
type fakeResolver struct {
	mu     sync.Mutex
	answer []netip.Addr
	err    error
	block  bool // hang until the context ends
	calls  atomic.Int64
}

func (f *fakeResolver) set(err error, addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.answer = err, nil
	for _, a := range addrs {
		f.answer = append(f.answer, netip.MustParseAddr(a))
	}
}

func (f *fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	f.calls.Add(1)
	f.mu.Lock()
	block, answer, err := f.block, f.answer, f.err
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return answer, err
}

func addrsOf(p *Pool) []string {
	var out []string
	for _, t := range p.Targets() {
		out = append(out, t.URL.Host)
	}
	return out
}

// TestResolveFollowsAnswers resolves a named target through a resolver
// whose answer changes: one Target per address, named by the configured
// URL and carrying its Host and server name; an address that stays keeps
// its *Target; a failed lookup and an empty answer keep the last good
// addresses; an IP-literal target beside it is never looked up.
func TestResolveFollowsAnswers(t *testing.T) {
	res := &fakeResolver{}
	res.set(nil, "10.0.0.2", "10.0.0.1")
	spec := &Spec{Targets: []TargetSpec{
		{URL: mustURL(t, "https://api.example:8443/base"), Weight: 3},
		{URL: mustURL(t, "http://192.0.2.1:80"), Weight: 1},
	}, ResolveInterval: time.Second}
	r := NewRegistry(Options{Resolver: res})
	defer r.Close()
	p := r.Update(map[string]*Spec{"api": spec})["api"]
	if got := fmt.Sprint(addrsOf(p)); got != "[10.0.0.1:8443 10.0.0.2:8443 192.0.2.1:80]" {
		t.Fatalf("targets %s", got)
	}
	t1 := p.Targets()[0]
	if t1.Name != "https://api.example:8443/base" || t1.Host != "api.example:8443" || t1.ServerName != "api.example" ||
		t1.Weight != 3 || t1.URL.Path != "/base" || t1.URL.Scheme != "https" {
		t.Fatalf("target %+v", t1)
	}
	if lit := p.Targets()[2]; lit.ServerName != "" || lit.Host != "192.0.2.1:80" {
		t.Fatalf("IP-literal target %+v", lit)
	}

	for _, step := range []struct {
		name  string
		err   error
		addrs []string
		want  string
	}{
		{"new address", nil, []string{"10.0.0.1", "10.0.0.3"}, "[10.0.0.1:8443 10.0.0.3:8443 192.0.2.1:80]"},
		{"resolver down", errors.New("connection refused"), nil, "[10.0.0.1:8443 10.0.0.3:8443 192.0.2.1:80]"},
		{"empty answer", nil, nil, "[10.0.0.1:8443 10.0.0.3:8443 192.0.2.1:80]"},
		{"back", nil, []string{"10.0.0.4"}, "[10.0.0.4:8443 192.0.2.1:80]"},
	} {
		res.set(step.err, step.addrs...)
		n := res.calls.Load()
		waitFor(t, step.name+": two more lookups", func() bool { return res.calls.Load() >= n+2 })
		if got := fmt.Sprint(addrsOf(p)); got != step.want {
			t.Fatalf("%s: targets %s, want %s", step.name, got, step.want)
		}
		if step.name == "new address" && p.Targets()[0] != t1 {
			t.Fatal("the address that stayed got a new Target")
		}
	}
	st := p.Names()
	if len(st) != 1 || st[0].Failures < 2 {
		t.Fatalf("name status %+v", st)
	}
}

// TestResolveHostile is the table of DNS answers a gateway must survive.
func TestResolveHostile(t *testing.T) {
	many := make([]string, 5000)
	for i := range many {
		many[i] = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String()
	}
	for _, tc := range []struct {
		name    string
		err     error
		addrs   []string
		block   bool
		targets int
		host    string // the first target's URL host
	}{
		{"thousands of addresses", nil, many, false, MaxAddrs, "10.0.0.0:80"},
		{"duplicates and a mapped IPv4", nil, []string{"10.0.0.1", "10.0.0.1", "::ffff:10.0.0.1"}, false, 1, "10.0.0.1:80"},
		{"IPv6", nil, []string{"2001:db8::1"}, false, 1, "[2001:db8::1]:80"},
		{"no address", nil, nil, false, 1, "api.example"},
		{"resolver error", errors.New("SERVFAIL"), nil, false, 1, "api.example"},
		{"resolver hangs", nil, nil, true, 1, "api.example"},
		// Addresses no upstream is at, which whoever answers for the
		// name could point the gateway at: dropped; an answer of
		// nothing else is an answer with no address.
		{"unspecified, metadata, multicast beside a good one", nil, []string{"0.0.0.0", "169.254.169.254",
			"224.0.0.1", "255.255.255.255", "0.1.2.3", "10.0.0.9", "::", "fe80::1", "ff02::1", "::ffff:0.0.0.0"}, false, 1, "10.0.0.9:80"},
		{"only unusable addresses", nil, []string{"0.0.0.0", "169.254.169.254", "ff02::1", "::"}, false, 1, "api.example"},
		{"loopback and private are kept", nil, []string{"127.0.0.1", "::1", "192.168.1.1"}, false, 3, "127.0.0.1:80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &fakeResolver{block: tc.block}
			res.set(tc.err, tc.addrs...)
			spec := &Spec{Targets: []TargetSpec{{URL: mustURL(t, "http://api.example"), Weight: 1},
				{URL: mustURL(t, "http://192.0.2.1:80"), Weight: 1}}}
			r := NewRegistry(Options{Resolver: res})
			defer r.Close()
			p := r.Update(map[string]*Spec{"api": spec})["api"] // a hanging resolver: bounded by StartResolveTimeout
			ts := p.Targets()
			if len(ts)-1 != tc.targets || ts[0].URL.Host != tc.host {
				t.Fatalf("%d targets, first %s; want %d, %s", len(ts)-1, ts[0].URL.Host, tc.targets, tc.host)
			}
			if ts[0].Host != "api.example" {
				t.Fatalf("Host %q", ts[0].Host)
			}
		})
	}
}

// TestSingleTargetNotResolved: a route with one target and no health
// check is forwarded directly; its name is left to the transport.
func TestSingleTargetNotResolved(t *testing.T) {
	res := &fakeResolver{}
	res.set(nil, "10.0.0.1")
	r := NewRegistry(Options{Resolver: res})
	defer r.Close()
	p := r.Update(map[string]*Spec{"api": {Targets: []TargetSpec{{URL: mustURL(t, "http://api.example:80"), Weight: 1}}, ResolveInterval: time.Second}})["api"]
	if res.calls.Load() != 0 || p.Targets()[0].URL.Host != "api.example:80" {
		t.Fatalf("%d lookups, target %s", res.calls.Load(), p.Targets()[0].URL.Host)
	}
}

// TestPoolsDuringSlowUpdate: while an Update waits for a resolver that
// hangs (up to StartResolveTimeout), Pools answers at once: /readyz and
// /metrics read it, and a probe must not time out during a reload.
func TestPoolsDuringSlowUpdate(t *testing.T) {
	res := &fakeResolver{block: true}
	r := NewRegistry(Options{Resolver: res})
	defer r.Close()
	first := &Spec{Targets: []TargetSpec{{URL: mustURL(t, "http://192.0.2.1:80"), Weight: 1}, {URL: mustURL(t, "http://192.0.2.2:80"), Weight: 1}}}
	r.Update(map[string]*Spec{"a": first})
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Update(map[string]*Spec{"a": first, "b": {Targets: []TargetSpec{{URL: mustURL(t, "http://api.example"), Weight: 1},
			{URL: mustURL(t, "http://192.0.2.3:80"), Weight: 1}}}})
	}()
	waitFor(t, "the lookup to start", func() bool { return res.calls.Load() > 0 })
	ps := r.Pools()
	select {
	case <-done:
		t.Fatal("Pools waited for the Update's lookups to end")
	default:
	}
	if len(ps) != 1 || ps[0].Route() != "a" {
		t.Fatalf("during the Update, Pools = %d pools", len(ps))
	}
	<-done
	if len(r.Pools()) != 2 {
		t.Fatal("the Update's pools are not in force after it")
	}
}
