package admin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
)

// consumerAdminPolicy: a registry of acme (plan pro, keys acme-key-1 and
// acme-key-2) and carol (no plan, rates of her own for per-consumer, key
// carol-key), and one limit per key-part combination a consumer's
// counters can have, all on one route.
func consumerAdminPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	sum := func(k string) string { s := sha256.Sum256([]byte(k)); return hex.EncodeToString(s[:]) }
	reg := `[[consumers]]
name = "acme"
plan = "pro"
api_keys_sha256 = ["` + sum("acme-key-1") + `", "` + sum("acme-key-2") + `"]
[[consumers]]
name = "carol"
api_keys_sha256 = ["` + sum("carol-key") + `"]
[consumers.rates]
per-consumer = ["50/1h"]
`
	c := config.Default()
	c.Consumers = config.ConsumersConfig{File: "consumers.toml"}
	c.Plans = []config.PlanConfig{{Name: "pro"}}
	lim := func(name string, by ...string) config.LimitConfig {
		l := config.DefaultLimit()
		l.Name, l.Algorithm, l.Rates, l.By = name, "fixed_window", []string{"100/1h"}, by
		return l
	}
	perConsumer := lim("per-consumer", "consumer")
	perConsumer.PlanRates = map[string][]string{"pro": {"70/1h"}}
	quota := lim("quota", "consumer")
	quota.Algorithm, quota.Rates = "quota", []string{"1000/month", "100/day"}
	quota.PlanRates = map[string][]string{"pro": {"5000/month", "500/day"}}
	c.Limits = []config.LimitConfig{
		perConsumer,
		quota,
		lim("per-client", "client"),
		lim("by-route", "consumer", "route"),
		lim("by-method", "consumer", "method"),
		lim("by-tenant", "consumer", "header:X-Tenant"),
		lim("by-key", "api_key"),
		lim("by-user", "user"),
		lim("by-ip", "ip"),
	}
	rt := config.DefaultRoute()
	rt.Name, rt.PathPrefix = "demo", "/"
	rt.Limits = []string{"per-consumer", "quota", "per-client", "by-route", "by-method", "by-tenant", "by-key", "by-user", "by-ip"}
	rt.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
	c.Routes = []config.RouteConfig{rt}
	p, err := policy.Compile(c, func(string) string { return "" }, func(name string) ([]byte, error) {
		if name == "consumers.toml" {
			return []byte(reg), nil
		}
		return nil, errors.New("no such file in this test")
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCounterKeyConsumer sends a consumer's requests through the gateway
// with both of its keys and checks that every admin name of the consumer
// (consumer:NAME, either key) finds, for each key-part combination, a
// counter with exactly the units those requests spent, read against the
// consumer's plan's or own rates: the oracle is the store's count of the
// live requests and the configured numbers, not the key formula.
func TestCounterKeyConsumer(t *testing.T) {
	p := consumerAdminPolicy(t)
	store, send := liveRequests(t, p)
	send("POST", "192.0.2.1:1000", "acme-key-1", "t1")
	send("GET", "192.0.2.2:1000", "acme-key-2", "t1")
	send("GET", "192.0.2.2:1000", "acme-key-2", "t2")
	send("GET", "192.0.2.3:1000", "carol-key", "t1")
	acme := []string{"consumer:acme", "api_key:acme-key-1", "acme-key-2"}
	for _, tc := range []struct {
		name, limit string
		clients     []string
		q           url.Values
		used, max   int64 // max: the first window's limit (the shortest: rates are sorted)
	}{
		{"by consumer, plan rates", "per-consumer", acme, nil, 3, 70},
		{"by consumer, own rates", "per-consumer", []string{"consumer:carol", "carol-key"}, nil, 1, 50},
		{"quota, plan rates", "quota", acme, nil, 3, 500},
		{"quota, no plan", "quota", []string{"consumer:carol"}, nil, 1, 100},
		{"by client", "per-client", acme, nil, 3, 100},
		{"by consumer and route", "by-route", acme, url.Values{"route": {"demo"}}, 3, 100},
		{"by consumer and method", "by-method", acme, url.Values{"method": {"POST"}}, 1, 100},
		{"by consumer and method GET", "by-method", acme, url.Values{"method": {"GET"}}, 2, 100},
		{"by consumer and header", "by-tenant", acme, url.Values{"header:X-Tenant": {"t1"}}, 2, 100},
		{"by consumer and another header value", "by-tenant", acme, url.Values{"header:X-Tenant": {"t2"}}, 1, 100},
		{"by api_key: the first key alone", "by-key", []string{"api_key:acme-key-1"}, nil, 1, 100},
		{"by api_key: the second key alone", "by-key", []string{"api_key:acme-key-2"}, nil, 2, 100},
		{"by ip: an IP is named by ip:A", "by-ip", []string{"ip:192.0.2.2"}, nil, 2, 100},
	} {
		for _, client := range tc.clients {
			l, key, err := counterKey(p, tc.limit, client, tc.q)
			if err != nil {
				t.Errorf("%s: counterKey(%s, %q, %v): %v", tc.name, tc.limit, client, tc.q, err)
				continue
			}
			u, err := store.Usage(context.Background(), time.Now(), l, key)
			if err != nil || len(u) == 0 || u[0].Used != tc.used || u[0].Rate.Limit != tc.max {
				t.Errorf("%s: counterKey(%s, %q): usage %+v, %v; want %d used of %d", tc.name, tc.limit, client, u, err, tc.used, tc.max)
			}
		}
	}
	// A consumer's name names no single key's or user's counter, nor an
	// IP's; an
	// unregistered name is not found (404), naming it.
	for _, bad := range []struct{ limit, client string }{
		{"by-key", "consumer:acme"},
		{"by-user", "consumer:acme"},
		{"by-user", "consumer:carol"},
		{"by-ip", "consumer:acme"},
		{"per-consumer", "consumer:"},
	} {
		if _, _, err := counterKey(p, bad.limit, bad.client, nil); err == nil {
			t.Errorf("counterKey(%s, %q): no error", bad.limit, bad.client)
		}
	}
	_, _, err := counterKey(p, "per-consumer", "consumer:nobody", nil)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"nobody"`) {
		t.Errorf("counterKey(consumer:nobody): %v, want a not-found error naming nobody", err)
	}
}
