package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// consumerOverrideExtra registers consumers (file from the test), a plan
// "free" with its own rates of a per-consumer limit on /c, and a quota
// route reporting /c.
const consumerOverrideExtra = `
[consumers]
file = "%s"
unknown_api_key = "anonymous"

[[plans]]
name = "free"

[[limits]]
name = "per-consumer"
by = ["consumer"]
rates = ["2/minute"]
algorithm = "sliding_window_log"
[limits.plan_rates]
free = ["3/minute"]

[[routes]]
name = "c"
path_prefix = "/c"
respond = { status = 200, body = "c" }
limits = ["per-consumer"]

[[routes]]
name = "quota"
path_prefix = "/rate_limit"
respond = { quota = true, routes = ["c"] }
`

// TestOverridesConsumer: an override naming a consumer applies to every
// key of the consumer, beats its plan's rates while it lasts, shows in
// the consumer's quota answer (with its consumer and plan), and gives the
// plan's rates back at expiry; an unregistered consumer is refused.
func TestOverridesConsumer(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "consumers.toml")
	if err := os.WriteFile(file, []byte("[[consumers]]\nname = \"acme\"\nplan = \"free\"\napi_keys_env = \"ACME_KEYS\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "ops.toml.tmpl", gwOpts{
		Data: opsData(t, up, "Extra", fmt.Sprintf(consumerOverrideExtra, file)),
		Env:  []string{"ACME_KEYS=acme-1,acme-2"},
	})
	c := newClient(t, "")
	k1, k2 := map[string]string{"X-API-Key": "acme-1"}, map[string]string{"X-API-Key": "acme-2"}
	avoidWindowEdge(time.Minute)
	for i := range 3 {
		if r := get(t, c, g.url("/c"), k1); r.Status != 200 {
			t.Fatalf("request %d on the free plan's 3/minute: %s", i+1, r)
		}
	}
	get(t, c, g.url("/c"), k2).problem(t, 429)
	a := getQuota(t, g, c, k2)
	if a.Consumer != "acme" || a.Plan != "free" || a.Client != "consumer" {
		t.Errorf("quota answer names %q/%q/%q, want consumer acme, plan free, client consumer", a.Client, a.Consumer, a.Plan)
	}
	if rem := a.remaining(t, "c", "per-consumer"); rem != 0 {
		t.Errorf("remaining %d after the plan's 3, want 0", rem)
	}

	if r := adminSend(t, g, "PUT", "/admin/overrides", "", overrideBody("per-consumer", "consumer=nobody", "5/minute", time.Now().Add(time.Hour), "")); r.Status != 422 {
		t.Errorf("override for an unregistered consumer: %s, want 422", r)
	}
	expires := time.Now().Add(4 * time.Second)
	if r := adminSend(t, g, "PUT", "/admin/overrides", "", overrideBody("per-consumer", "consumer=acme", "5/minute", expires, "trial")); r.Status != 200 {
		t.Fatalf("PUT: %s", r)
	}
	a = getQuota(t, g, c, k1)
	if rem := a.remaining(t, "c", "per-consumer"); rem != 2 || a.Routes[0].Limits[0].OverrideExpires == "" {
		t.Errorf("quota under the override: remaining %d, override_expires %q; want 2 and the expiry", rem, a.Routes[0].Limits[0].OverrideExpires)
	}
	got := countStatuses(4, func(i int) *response {
		return get(t, c, g.url("/c"), map[string]string{"X-API-Key": []string{"acme-1", "acme-2"}[i%2]})
	})
	if !got.exactly(2, 2) {
		t.Errorf("4 requests of both keys under the 5/minute override after 3: %v, want 2 × 200, 2 × 429", got)
	}
	time.Sleep(time.Until(expires) + 50*time.Millisecond)
	get(t, c, g.url("/c"), k1).problem(t, 429)
	if a := getQuota(t, g, c, k1); a.Routes[0].Limits[0].OverrideExpires != "" || a.Routes[0].Limits[0].Windows[0].Limit != 3 {
		t.Errorf("quota after expiry: %+v, want the plan's 3 and no override", a.Routes[0].Limits[0])
	}
}
