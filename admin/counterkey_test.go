package admin

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/policytest"
	"github.com/tollgate/gateway/policy/config"
)

// TestCounterKeyMatchesLivePath sends one request per client through the
// gateway and checks that the admin query naming that client finds a
// counter with exactly one unit used: the oracle is the store's own count
// of the live request, not the key formula.
func TestCounterKeyMatchesLivePath(t *testing.T) {
	p := policytest.Compile(t, func(c *config.Config) {
		lim := func(name string, by []string, onMissing string) config.LimitConfig {
			l := config.DefaultLimit()
			l.Name, l.Algorithm, l.Rates, l.By = name, "fixed_window", []string{"100/1h"}, by
			if onMissing != "" {
				l.OnMissing = onMissing
			}
			return l
		}
		c.Limits = []config.LimitConfig{
			lim("per-client", []string{"client"}, ""),
			lim("shared", []string{}, ""),
			lim("by-route", []string{"client", "route"}, ""),
			lim("by-method", []string{"client", "method"}, ""),
			lim("by-tenant", []string{"header:X-Tenant"}, ""),
			lim("key-or-ip", []string{"api_key"}, "ip"),
			lim("key-or-401", []string{"api_key"}, "reject"),
			lim("by-ip", []string{"ip"}, ""),
		}
		rt := config.DefaultRoute()
		rt.Name, rt.PathPrefix = "demo", "/"
		rt.Limits = []string{"per-client", "shared", "by-route", "by-method", "by-tenant", "key-or-ip", "by-ip"}
		rt.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
		strict := rt
		strict.Name, strict.PathPrefix, strict.Limits = "strict", "/strict", []string{"key-or-401"}
		c.Routes = []config.RouteConfig{strict, rt}
	})
	store, send := liveRequests(t, p)
	send("POST", "192.0.2.1:1000", "alice", "acme") // alice, with a tenant
	send("GET", "[2001:db8::7]:1000", "", "")       // keyless, IPv6
	send("GET", "198.51.100.9:1000", "", "")        // keyless, IPv4
	for _, tc := range []struct {
		name, limit, key string
		q                url.Values
		want             int64 // units used; -1: the query is an error
	}{
		{"api key", "per-client", "api_key:alice", nil, 1},
		{"bare api key", "per-client", "alice", nil, 1},
		{"bare IP", "per-client", "198.51.100.9", nil, 1},
		{"IPv6 in the same /64", "per-client", "ip:2001:db8::ffff", nil, 1},
		{"unknown client", "per-client", "api_key:bob", nil, 0},
		{"shared", "shared", "", nil, 3},
		{"route", "by-route", "alice", url.Values{"route": {"demo"}}, 1},
		{"route missing", "by-route", "alice", nil, -1},
		{"method", "by-method", "alice", url.Values{"method": {"POST"}}, 1},
		{"other method", "by-method", "alice", url.Values{"method": {"GET"}}, 0},
		{"method missing", "by-method", "alice", nil, -1},
		{"header", "by-tenant", "", url.Values{"header:x-tenant": {"acme"}}, 1},
		{"header, shared '-' counter needs the header", "by-tenant", "", nil, -1},
		{"on_missing=ip: the key's counter", "key-or-ip", "api_key:alice", nil, 1},
		{"on_missing=ip: a keyless client's IP counter", "key-or-ip", "ip:198.51.100.9", nil, 1},
		{"on_missing=ip: IPv6 keyless client", "key-or-ip", "ip:2001:db8::1", nil, 1},
		{"on_missing=ip: a user has no key, counted by IP: needs ip:A", "key-or-ip", "user:u", nil, -1},
		{"on_missing=reject: keyless requests have no counter", "key-or-401", "ip:198.51.100.9", nil, -1},
		{"by ip needs an IP", "by-ip", "api_key:alice", nil, -1},
		{"by ip", "by-ip", "ip:192.0.2.1", nil, 1},
		{"identity needed", "per-client", "", nil, -1},
		{"empty value", "per-client", "api_key:", nil, -1},
	} {
		l, key, err := counterKey(p, tc.limit, tc.key, tc.q)
		if tc.want < 0 {
			if err == nil {
				t.Errorf("%s: counterKey(%s, %q, %v): no error", tc.name, tc.limit, tc.key, tc.q)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: counterKey(%s, %q, %v): %v", tc.name, tc.limit, tc.key, tc.q, err)
			continue
		}
		u, err := store.Usage(context.Background(), time.Now(), l, key)
		if err != nil || len(u) != 1 || u[0].Used != tc.want {
			t.Errorf("%s: counterKey(%s, %q): usage %+v, %v; want %d used", tc.name, tc.limit, tc.key, u, err, tc.want)
		}
	}
}

// TestCounterKeyHostile lists admin queries that an operator could mistake
// for one another, or that try to smuggle a part in through another: no
// two of them may name the same counter, and none may fail to be refused
// when it names no counter at all.
func TestCounterKeyHostile(t *testing.T) {
	p := policytest.Compile(t, func(c *config.Config) {
		lim := func(name string, by ...string) config.LimitConfig {
			l := config.DefaultLimit()
			l.Name, l.Algorithm, l.Rates, l.By = name, "fixed_window", []string{"100/1h"}, by
			return l
		}
		c.Limits = []config.LimitConfig{lim("per-client", "client"), lim("per-tenant", "client", "header:X-Tenant")}
		rt := config.DefaultRoute()
		rt.Name, rt.PathPrefix, rt.Limits = "demo", "/", []string{"per-client", "per-tenant"}
		rt.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
		c.Routes = []config.RouteConfig{rt}
	})
	key := func(limit, client string, q url.Values) string {
		t.Helper()
		_, k, err := counterKey(p, limit, client, q)
		if err != nil {
			t.Fatalf("counterKey(%s, %q, %v): %v", limit, client, q, err)
		}
		return k
	}
	distinct := []struct {
		name string
		a, b string
	}{
		{"an API key that spells an IP vs that IP", key("per-client", "api_key:10.0.0.1", nil), key("per-client", "ip:10.0.0.1", nil)},
		{"an API key vs a user of the same text", key("per-client", "api_key:x", nil), key("per-client", "user:x", nil)},
		{"an API key with a kind prefix inside", key("per-client", "api_key:user:x", nil), key("per-client", "user:x", nil)},
		{"a certificate subject vs a user of the same text", key("per-client", "mtls:CN=x", nil), key("per-client", "user:CN=x", nil)},
		{"two tenants", key("per-tenant", "k", url.Values{"header:X-Tenant": {"a"}}), key("per-tenant", "k", url.Values{"header:X-Tenant": {"b"}})},
	}
	for _, d := range distinct {
		if d.a == d.b {
			t.Errorf("%s: both name counter %s", d.name, d.a)
		}
	}
	same := []struct {
		name string
		a, b string
	}{
		{"a bare IP is an IP", key("per-client", "10.0.0.1", nil), key("per-client", "ip:10.0.0.1", nil)},
		{"a mapped IPv4 is the IPv4 client", key("per-client", "ip:::ffff:10.0.0.1", nil), key("per-client", "ip:10.0.0.1", nil)},
		{"a zone does not make another client", key("per-client", "ip:fe80::1%eth0", nil), key("per-client", "ip:fe80::1", nil)},
		{"header names are case-insensitive", key("per-tenant", "k", url.Values{"header:x-tenant": {"a"}}), key("per-tenant", "k", url.Values{"header:X-Tenant": {"a"}})},
		{"only a part the limit reads counts", key("per-client", "k", url.Values{"header:X-Tenant": {"a"}, "method": {"POST"}}), key("per-client", "k", nil)},
	}
	for _, s := range same {
		if s.a != s.b {
			t.Errorf("%s: %s and %s", s.name, s.a, s.b)
		}
	}
	for _, bad := range []struct {
		limit, client string
		q             url.Values
	}{
		{"nope", "k", nil},
		{"per-client", "ip:", nil},
		{"per-client", "ip:10.0.0.1/8", nil},
		{"per-client", "ip:10.0.0.256", nil},
		{"per-tenant", "k", url.Values{"header:X-Tenant": {""}}},
	} {
		if _, _, err := counterKey(p, bad.limit, bad.client, bad.q); err == nil {
			t.Errorf("counterKey(%s, %q, %v): no error", bad.limit, bad.client, bad.q)
		}
	}
}
