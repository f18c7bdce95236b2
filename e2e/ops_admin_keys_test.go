package e2e

import (
	"testing"
)

// adminKeysExtra adds limits keyed by api_key with on_missing = "ip", by
// method and by header, each on its own respond route.
const adminKeysExtra = `
[[limits]]
name = "key-or-ip"
rates = ["3/minute"]
algorithm = "sliding_window_log"
by = ["api_key"]
on_missing = "ip"

[[limits]]
name = "per-method"
rates = ["3/minute"]
algorithm = "sliding_window_log"
by = ["client", "method"]

[[limits]]
name = "per-tenant"
rates = ["3/minute"]
algorithm = "sliding_window_log"
by = ["header:X-Tenant"]

[[routes]]
name = "keyed"
path_prefix = "/keyed"
respond = { status = 200, body = "keyed" }
limits = ["key-or-ip"]

[[routes]]
name = "method"
path_prefix = "/method"
respond = { status = 200, body = "method" }
limits = ["per-method"]

[[routes]]
name = "tenant"
path_prefix = "/tenant"
respond = { status = 200, body = "tenant" }
limits = ["per-tenant"]
`

// TestOpsAdminOnMissingIP: a limit by ["api_key"] with on_missing = "ip"
// counts keyless requests per IP; GET and DELETE /admin/limits with
// key=ip:A reach exactly that counter (they used to build the key from
// "by" and found nothing), and key=api_key:K still reaches the key's.
func TestOpsAdminOnMissingIP(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "ops.toml.tmpl", gwOpts{Data: opsData(t, up, "Extra", adminKeysExtra)})
	keyless := newClient(t, "127.0.0.2")
	c := newClient(t, "")
	keyA := map[string]string{"X-API-Key": "key-a"}

	for i := 0; i < 3; i++ {
		if r := get(t, keyless, g.url("/keyed"), nil); r.Status != 200 {
			t.Fatalf("keyless request %d: %s", i+1, r)
		}
	}
	get(t, keyless, g.url("/keyed"), nil).problem(t, 429)
	if r := get(t, c, g.url("/keyed"), keyA); r.Status != 200 {
		t.Fatalf("key-a: %s", r)
	}

	if w := limitUsage(t, g, "", "key-or-ip", "ip:127.0.0.2").Windows[0]; w.Used != 3 || w.Remaining != 0 {
		t.Errorf("usage of keyless 127.0.0.2: %+v, want used 3, remaining 0", w)
	}
	if w := limitUsage(t, g, "", "key-or-ip", "127.0.0.2").Windows[0]; w.Used != 3 {
		t.Errorf("usage of keyless 127.0.0.2 (bare IP): %+v, want used 3", w)
	}
	if w := limitUsage(t, g, "", "key-or-ip", "api_key:key-a").Windows[0]; w.Used != 1 || w.Remaining != 2 {
		t.Errorf("usage of key-a: %+v, want used 1, remaining 2", w)
	}
	if w := limitUsage(t, g, "", "key-or-ip", "ip:127.0.0.1").Windows[0]; w.Used != 0 {
		t.Errorf("usage of keyless 127.0.0.1 (it only sent key-a): %+v, want used 0", w)
	}
	if r := adminDo(t, g, "DELETE", "/admin/limits?limit=key-or-ip&key=ip:127.0.0.2", ""); r.Status != 200 {
		t.Fatalf("DELETE key=ip:127.0.0.2: %s", r)
	}
	if r := get(t, keyless, g.url("/keyed"), nil); r.Status != 200 {
		t.Fatalf("keyless 127.0.0.2 right after its reset: %s", r)
	}
	if w := limitUsage(t, g, "", "key-or-ip", "api_key:key-a").Windows[0]; w.Used != 1 {
		t.Errorf("usage of key-a after the IP's reset: %+v, want used 1", w)
	}
	// A user is neither an API key nor an IP: such a client is counted by
	// IP, which the query does not name.
	if r := adminDo(t, g, "GET", "/admin/limits?limit=key-or-ip&key=user:u", ""); r.Status != 400 {
		t.Errorf("key=user:u on an api_key/on_missing=ip limit: %s, want 400", r)
	}
}

// TestOpsAdminMethodAndHeader: limits keyed by method or by a header are
// read and reset with method= and header:<Name>= in the admin query, and
// only the named counter changes.
func TestOpsAdminMethodAndHeader(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "ops.toml.tmpl", gwOpts{Data: opsData(t, up, "Extra", adminKeysExtra)})
	c := newClient(t, "")
	keyA := map[string]string{"X-API-Key": "key-a"}

	for i := 0; i < 2; i++ {
		if r := do(t, c, "POST", g.url("/method"), keyA); r.Status != 200 {
			t.Fatalf("POST %d: %s", i+1, r)
		}
	}
	if r := get(t, c, g.url("/method"), keyA); r.Status != 200 {
		t.Fatalf("GET: %s", r)
	}
	for i := 0; i < 2; i++ {
		if r := get(t, c, g.url("/tenant"), map[string]string{"X-Tenant": "acme"}); r.Status != 200 {
			t.Fatalf("tenant acme %d: %s", i+1, r)
		}
	}
	if r := get(t, c, g.url("/tenant"), map[string]string{"X-Tenant": "globex"}); r.Status != 200 {
		t.Fatalf("tenant globex: %s", r)
	}

	if w := limitUsage(t, g, "", "per-method", "api_key:key-a&method=POST").Windows[0]; w.Used != 2 {
		t.Errorf("usage of key-a POST: %+v, want used 2", w)
	}
	if w := limitUsage(t, g, "", "per-method", "api_key:key-a&method=GET").Windows[0]; w.Used != 1 {
		t.Errorf("usage of key-a GET: %+v, want used 1", w)
	}
	if w := limitUsage(t, g, "", "per-tenant", "&header:X-Tenant=acme").Windows[0]; w.Used != 2 {
		t.Errorf("usage of tenant acme: %+v, want used 2", w)
	}
	// Header names are case-insensitive, as in HTTP.
	if w := limitUsage(t, g, "", "per-tenant", "&header:x-tenant=globex").Windows[0]; w.Used != 1 {
		t.Errorf("usage of tenant globex: %+v, want used 1", w)
	}

	if r := adminDo(t, g, "DELETE", "/admin/limits?limit=per-method&key=api_key:key-a&method=POST", ""); r.Status != 200 {
		t.Fatalf("DELETE method=POST: %s", r)
	}
	if r := adminDo(t, g, "DELETE", "/admin/limits?limit=per-tenant&key=&header:X-Tenant=acme", ""); r.Status != 200 {
		t.Fatalf("DELETE header:X-Tenant=acme: %s", r)
	}
	for _, tc := range []struct {
		limit, key string
		used       int64
	}{
		{"per-method", "api_key:key-a&method=POST", 0},
		{"per-method", "api_key:key-a&method=GET", 1},
		{"per-tenant", "&header:X-Tenant=acme", 0},
		{"per-tenant", "&header:X-Tenant=globex", 1},
	} {
		if w := limitUsage(t, g, "", tc.limit, tc.key).Windows[0]; w.Used != tc.used {
			t.Errorf("after the resets, %s %s: %+v, want used %d", tc.limit, tc.key, w, tc.used)
		}
	}
	// A query that leaves out a part the limit is keyed by is refused,
	// not answered with some other counter.
	for _, path := range []string{
		"/admin/limits?limit=per-method&key=api_key:key-a",
		"/admin/limits?limit=per-tenant&key=",
	} {
		if r := adminDo(t, g, "GET", path, ""); r.Status != 400 {
			t.Errorf("GET %s: %s, want 400", path, r)
		}
	}
}
