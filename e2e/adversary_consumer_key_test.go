package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestAdminNamesConsumerByKey: with a consumer registry, the admin API
// names a client by one of a consumer's API keys as the live path counts
// it — as the consumer. /admin/limits?key=api_key:K reads the consumer's
// counter (it read a counter no request uses), an override PUT for
// api_key:K applies to the consumer's requests (it was accepted and never
// applied), and an override for a key no consumer owns is refused (its
// requests are never counted under it).
func TestAdminNamesConsumerByKey(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	file := filepath.Join(t.TempDir(), "consumers.toml")
	if err := os.WriteFile(file, []byte("[[consumers]]\nname = \"acme\"\nplan = \"free\"\napi_keys_env = \"ACME_KEYS\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "ops.toml.tmpl", gwOpts{
		Data: opsData(t, up, "Extra", fmt.Sprintf(consumerOverrideExtra, file)),
		Env:  []string{"ACME_KEYS=acme-1,acme-2"},
	})
	c := newClient(t, "")
	k1 := map[string]string{"X-API-Key": "acme-1"}
	avoidWindowEdge(time.Minute)
	for i := range 3 {
		if r := get(t, c, g.url("/c"), k1); r.Status != 200 {
			t.Fatalf("request %d on the free plan's 3/minute: %s", i+1, r)
		}
	}
	get(t, c, g.url("/c"), k1).problem(t, 429)

	r := adminDo(t, g, "GET", "/admin/limits?limit=per-consumer&key=api_key:acme-2", "")
	var u usage
	if err := json.Unmarshal(r.Body, &u); err != nil || r.Status != 200 || len(u.Windows) != 1 || u.Windows[0].Used != 3 {
		t.Errorf("GET /admin/limits by the consumer's other key: %s; want its consumer's 3 used", r)
	}

	if r := adminSend(t, g, "PUT", "/admin/overrides", "", overrideBody("per-consumer", "key=api_key:nobody-owns-this", "5/minute", time.Now().Add(time.Hour), "")); r.Status != 422 {
		t.Errorf("override for an API key no consumer owns: %s, want 422", r)
	}
	if r := adminSend(t, g, "PUT", "/admin/overrides", "", overrideBody("per-consumer", "key=api_key:acme-1", "5/minute", time.Now().Add(time.Hour), "")); r.Status != 200 {
		t.Fatalf("PUT override by the consumer's key: %s", r)
	}
	got := statuses{}
	for range 3 {
		got[get(t, c, g.url("/c"), k1).Status]++
	}
	if got[200] != 2 || got[429] != 1 {
		t.Errorf("3 requests under a 5/minute override after 3: %v, want 2 × 200, 1 × 429", got)
	}
}
