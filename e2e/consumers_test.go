package e2e

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// keySum is the registry's spelling of an API key: its hex SHA-256.
func keySum(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

// registry is the consumers file of the consumer tests: acme (pro, two
// keys), bob (plan bobPlan, a key from the environment) and carol (no
// plan).
func registry(bobPlan string) string {
	return fmt.Sprintf(`[[consumers]]
name = "acme"
plan = "pro"
api_keys_sha256 = ["%s", "%s"]

[[consumers]]
name = "bob"
plan = "%s"
api_keys_env = "BOB_KEYS"

[[consumers]]
name = "carol"
api_keys_sha256 = ["%s"]
`, keySum("acme-key-1"), keySum("acme-key-2"), bobPlan, keySum("carol-key"))
}

// consumersGateway starts a gateway on consumers.toml.tmpl: the memory
// store when redisAddr is "", else that Redis. It returns the gateway, the
// registry's path and the upstream.
func consumersGateway(t *testing.T, redisAddr, unknown string) (*gw, string, *upstream) {
	t.Helper()
	return consumersGatewayWatch(t, redisAddr, unknown, false)
}

// consumersGatewayWatch is consumersGateway with server.watch_config set
// as watch says.
func consumersGatewayWatch(t *testing.T, redisAddr, unknown string, watch bool) (*gw, string, *upstream) {
	t.Helper()
	dir := t.TempDir()
	reg := filepath.Join(dir, "consumers.toml")
	writeFileAtomic(t, reg, []byte(registry("free")))
	up := newUpstream(t)
	g := startGateway(t, "consumers.toml.tmpl", gwOpts{
		Data: map[string]any{"Redis": redisAddr, "Prefix": "tollgate:", "Registry": reg, "Unknown": unknown,
			"Upstream": up.URL, "Watch": watch, "AccessLog": filepath.Join(dir, "access.log")},
		Env: []string{"BOB_KEYS=bob-key"},
	})
	return g, reg, up
}

// tally sends n requests from c with the API key keyOf(i) (none when "")
// and counts the statuses.
func tally(t *testing.T, c *http.Client, g *gw, n int, keyOf func(i int) string) statuses {
	t.Helper()
	return countStatuses(n, func(i int) *response {
		hdr := map[string]string{"X-Consumer": "spoofed", "X-Plan": "spoofed"}
		if k := keyOf(i); k != "" {
			hdr["X-API-Key"] = k
		}
		return get(t, c, g.url("/api/x"), hdr)
	})
}

func wantTally(t *testing.T, who string, got statuses, ok, limited int) {
	t.Helper()
	if !got.exactly(ok, limited) {
		t.Errorf("%s: %v, want %d × 200 and %d × 429", who, got, ok, limited)
	}
}

// storeKeys counts the counters the store holds: the Redis keys of
// counters (prefix, then "{TAG}HASH:limit ID:format"), the live-keys gauge
// of the memory store.
func storeKeys(t *testing.T, g *gw, rs *redistest.Server) int {
	t.Helper()
	if rs != nil {
		ks, err := rs.Do("KEYS", "tollgate:{*}*:*")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, k := range ks.([]any) {
			// The gateway's own keys ({tollgate-probe}, ...) come and go.
			if !strings.HasPrefix(k.(string), "tollgate:{tollgate-") {
				n++
			}
		}
		return n
	}
	for _, v := range scrape(t, g, "").family("tollgate_store_memory_keys") {
		return int(v)
	}
	t.Fatal("no tollgate_store_memory_keys gauge")
	return 0
}

// randomKeys sends n requests, each with a fresh random API key, from
// eight connections at once, and counts the statuses.
func randomKeys(t *testing.T, g *gw, n int) statuses {
	t.Helper()
	var mu sync.Mutex
	got := statuses{}
	var wg sync.WaitGroup
	const workers = 8
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext, MaxIdleConnsPerHost: 1}}
			defer c.CloseIdleConnections()
			local := statuses{}
			for i := w; i < n; i += workers {
				r, err := tryDo(c, "GET", g.url("/api/x"), map[string]string{"X-API-Key": rand.Text()}, nil)
				if err != nil {
					local[-1]++
					continue
				}
				local[r.Status]++
			}
			mu.Lock()
			for k, v := range local {
				got[k] += v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return got
}

// checkConsumers drives the consumer story through g (reject mode):
// every plan's exact rates, two keys of one consumer on one budget, the
// consumer and plan named to the upstream (client copies removed), an
// unknown key answered 401 and counted nowhere (10,000 of them create no
// counter), and a reload moving a consumer to another plan that changes
// its rates at once and keeps its count.
func checkConsumers(t *testing.T, g *gw, reg string, up *upstream, rs *redistest.Server) {
	avoidWindowEdge(time.Minute)
	c := newClient(t, "127.0.0.5")
	// acme is pro (7/minute), with two keys on one budget.
	wantTally(t, "acme, keys alternating", tally(t, c, g, 9, func(i int) string { return fmt.Sprintf("acme-key-%d", 1+i%2) }), 7, 2)
	last := up.all()[up.count()-1]
	if got := last.Header.Values("X-Consumer"); len(got) != 1 || got[0] != "acme" {
		t.Errorf("upstream X-Consumer %q, want [acme] (the client's copy removed)", got)
	}
	if got := last.Header.Values("X-Plan"); len(got) != 1 || got[0] != "pro" {
		t.Errorf("upstream X-Plan %q, want [pro]", got)
	}
	if last.Header.Get("X-Api-Key") != "acme-key-1" {
		t.Errorf("upstream X-API-Key %q: the key is the upstream's to see", last.Header.Get("X-Api-Key"))
	}
	// The admin API names a consumer by name or by any of its keys, and
	// reads its usage against its plan's rates.
	for _, key := range []string{"consumer:acme", "api_key:acme-key-2"} {
		if w := limitUsage(t, g, "", "per-consumer", key).Windows[0]; w.Limit != 7 || w.Used != 7 || w.Remaining != 0 {
			t.Errorf("/admin/limits key=%s: %+v, want limit 7, used 7", key, w)
		}
	}
	// DELETE by the consumer's name resets the one counter both keys
	// spend: each key is allowed again, and the budget is the plan's.
	if r := adminDo(t, g, "DELETE", "/admin/limits?limit=per-consumer&key=consumer:acme", ""); r.Status != 200 && r.Status != 204 {
		t.Fatalf("DELETE /admin/limits key=consumer:acme: %s", r)
	}
	if w := limitUsage(t, g, "", "per-consumer", "api_key:acme-key-1").Windows[0]; w.Used != 0 || w.Remaining != 7 {
		t.Errorf("after DELETE key=consumer:acme: %+v, want 0 used of 7", w)
	}
	wantTally(t, "acme after the reset, keys alternating", tally(t, c, g, 8, func(i int) string { return fmt.Sprintf("acme-key-%d", 2-i%2) }), 7, 1)
	if w := limitUsage(t, g, "", "per-consumer", "consumer:acme").Windows[0]; w.Used != 7 {
		t.Errorf("after the reset and 7 requests: %+v, want 7 used", w)
	}
	// A name the registry does not hold: 404, naming it.
	for _, m := range []string{"GET", "DELETE"} {
		r := adminDo(t, g, m, "/admin/limits?limit=per-consumer&key=consumer:nobody", "")
		if r.Status != 404 || !strings.Contains(string(r.Body), `\"nobody\"`) {
			t.Errorf("%s /admin/limits key=consumer:nobody: %s, want 404 naming nobody", m, r)
		}
	}
	wantTally(t, "bob (free)", tally(t, c, g, 5, func(int) string { return "bob-key" }), 4, 1)
	wantTally(t, "carol (no plan)", tally(t, c, g, 3, func(int) string { return "carol-key" }), 2, 1)
	// No key: the client by its IP, at the limit's own rates; its
	// requests reach the upstream without consumer headers.
	n := up.count()
	wantTally(t, "anonymous", tally(t, newClient(t, "127.0.0.6"), g, 3, func(int) string { return "" }), 2, 1)
	if up.count() != n+2 {
		t.Fatalf("upstream saw %d anonymous requests, want 2", up.count()-n)
	}
	if h := up.all()[up.count()-1].Header; h.Get("X-Consumer") != "" || h.Get("X-Plan") != "" {
		t.Errorf("anonymous request reached the upstream with X-Consumer %q, X-Plan %q", h.Get("X-Consumer"), h.Get("X-Plan"))
	}

	// An unknown key: 401, a challenge, a problem body; nothing counted.
	r := get(t, c, g.url("/api/x"), map[string]string{"X-API-Key": "not-a-key"})
	r.problem(t, 401)
	if ch := r.Header.Get("WWW-Authenticate"); ch != `ApiKey header="X-API-Key"` {
		t.Errorf("WWW-Authenticate %q", ch)
	}
	// The same on a route without limits: the key is a credential there
	// too, and a known one passes.
	n = up.count()
	get(t, c, g.url("/open/x"), map[string]string{"X-API-Key": "not-a-key"}).problem(t, 401)
	if r := get(t, c, g.url("/open/x"), map[string]string{"X-API-Key": "bob-key"}); r.Status != 200 {
		t.Errorf("known key on a route without limits: %d, want 200", r.Status)
	}
	if up.count() != n+1 {
		t.Errorf("route without limits: upstream saw %d requests, want 1 (the known key's)", up.count()-n)
	}
	before := storeKeys(t, g, rs)
	n = up.count()
	if got := randomKeys(t, g, 10000); got[401] != 10000 {
		t.Errorf("10,000 random keys: %v, want 10,000 × 401", got)
	}
	if up.count() != n {
		t.Errorf("random keys reached the upstream %d times", up.count()-n)
	}
	if after := storeKeys(t, g, rs); after != before {
		t.Errorf("counters before the random keys %d, after %d: unknown keys were counted", before, after)
	}

	// bob moves to pro: 7/minute at once, with the 4 he used counted.
	writeFileAtomic(t, reg, []byte(registry("pro")))
	if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 200 {
		t.Fatalf("POST /admin/reload: %s", r)
	}
	wantTally(t, "bob after the move to pro", tally(t, c, g, 4, func(int) string { return "bob-key" }), 3, 1)
	// acme, unchanged by the reload, kept its counters: still denied.
	wantTally(t, "acme after the reload", tally(t, c, g, 1, func(int) string { return "acme-key-2" }), 0, 1)
	if last := up.all()[up.count()-1]; last.Header.Get("X-Plan") != "pro" || last.Header.Get("X-Consumer") != "bob" {
		t.Errorf("after the move: upstream saw consumer %q plan %q, want bob, pro", last.Header.Get("X-Consumer"), last.Header.Get("X-Plan"))
	}
}

// TestConsumersMemory: the consumer story on the memory store.
func TestConsumersMemory(t *testing.T) {
	t.Parallel()
	g, reg, up := consumersGateway(t, "", "reject")
	checkConsumers(t, g, reg, up, nil)
}

// TestConsumersRedis: the consumer story on Redis.
func TestConsumersRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	g, reg, up := consumersGateway(t, rs.Addr, "reject")
	checkConsumers(t, g, reg, up, rs)
}

// checkAnonymous: with unknown_api_key = "anonymous" an unknown key is
// ignored and the client is its IP: rotating keys gets no fresh budget,
// and a known key still gets its plan.
func checkAnonymous(t *testing.T, g *gw) {
	avoidWindowEdge(time.Minute)
	c := newClient(t, "127.0.0.7")
	wantTally(t, "rotating unknown keys from one IP", tally(t, c, g, 4, func(i int) string { return fmt.Sprintf("random-%d", i) }), 2, 2)
	wantTally(t, "no key from the same IP", tally(t, c, g, 1, func(int) string { return "" }), 0, 1)
	wantTally(t, "acme from the same IP", tally(t, c, g, 8, func(int) string { return "acme-key-1" }), 7, 1)
}

// TestConsumersAnonymousMemory: anonymous mode on the memory store.
func TestConsumersAnonymousMemory(t *testing.T) {
	t.Parallel()
	g, _, _ := consumersGateway(t, "", "anonymous")
	checkAnonymous(t, g)
}

// TestConsumersAnonymousRedis: anonymous mode on Redis.
func TestConsumersAnonymousRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	g, _, _ := consumersGateway(t, rs.Addr, "anonymous")
	checkAnonymous(t, g)
}

// TestConsumersValidate: `gateway validate` names every registry problem
// with the file and its field path, in one run, and exits 2.
func TestConsumersValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	reg := filepath.Join(dir, "consumers.toml")
	bad := `[[consumers]]
name = "acme"
plan = "gold"
api_keys_sha256 = ["` + keySum("k") + `", "not-hex"]
[consumers.rates]
no-such-limit = ["5/s"]

[[consumers]]
name = "beta"
api_keys_sha256 = ["` + strings.ToUpper(keySum("k")) + `"]
`
	if err := os.WriteFile(reg, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "gateway.toml")
	data := map[string]any{"Listen": "127.0.0.1:0", "Admin": "", "Redis": "", "Prefix": "", "Registry": "consumers.toml",
		"Unknown": "reject", "Upstream": "http://127.0.0.1:1", "Watch": false, "AccessLog": ""}
	if err := os.WriteFile(cfg, renderTemplate(t, "consumers.toml.tmpl", data), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runGateway(t, nil, "validate", "--config", cfg)
	out := stdout + stderr
	if code != 2 {
		t.Fatalf("validate exit %d, want 2:\n%s", code, out)
	}
	for _, want := range []string{
		reg + `: consumers[0].plan: unknown plan "gold"`,
		reg + `: consumers[0].api_keys_sha256[1]: malformed SHA-256 "not-hex"`,
		reg + `: consumers[0].rates.no-such-limit: unknown limit "no-such-limit"`,
		reg + `: consumers[1].api_keys_sha256[0]: key already belongs to consumer "acme" (consumers[0].api_keys_sha256[0])`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
}

// TestConsumersWatchRegistry: with watch_config, rewriting only the
// registry reloads it (the configuration file is untouched): a consumer
// moved to another plan gets its rates at once, with its count kept; a
// registry truncated mid-write is not swapped in.
func TestConsumersWatchRegistry(t *testing.T) {
	t.Parallel()
	g, reg, _ := consumersGatewayWatch(t, "", "reject", true)
	avoidWindowEdge(time.Minute)
	c := newClient(t, "127.0.0.8")
	wantTally(t, "bob (free)", tally(t, c, g, 5, func(int) string { return "bob-key" }), 4, 1)
	before := time.Now()
	// An empty registry (a writer that truncates first) is skipped, not
	// swapped in: every key would be unknown.
	if err := os.WriteFile(reg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	wantTally(t, "acme while the registry is empty", tally(t, c, g, 1, func(int) string { return "acme-key-1" }), 1, 0)
	writeFileAtomic(t, reg, []byte(registry("pro")))
	if rd := waitReload(t, g, before); !rd.LastReload.OK {
		t.Fatalf("reload after the registry changed: %+v", rd.LastReload)
	}
	wantTally(t, "bob after the move to pro", tally(t, c, g, 4, func(int) string { return "bob-key" }), 3, 1)
}

// TestConsumersEmptyRegistryRefused: a registry emptied by a writer that
// truncates first and then a SIGHUP (or /admin/reload) is refused like a
// configuration without routes, so the keys registered so far keep
// working instead of every client with a key getting 401; validate says
// the same and --allow-empty lets an intended empty registry through.
func TestConsumersEmptyRegistryRefused(t *testing.T) {
	t.Parallel()
	g, reg, _ := consumersGatewayWatch(t, "", "reject", false)
	c := newClient(t, "127.0.0.9")
	if err := os.WriteFile(reg, []byte("# rewritten by the pipeline\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	g.signal(t, syscall.SIGHUP)
	rd := waitReload(t, g, before)
	if rd.LastReload.OK || !strings.Contains(rd.LastReload.Error, "holds no consumer") {
		t.Fatalf("reload with an empty registry: %+v, want it refused naming the empty registry", rd.LastReload)
	}
	if r := get(t, c, g.url("/api/x"), map[string]string{"X-API-Key": "acme-key-1"}); r.Status != 200 {
		t.Errorf("a registered key after the refused reload: %s, want 200", r)
	}
	if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status == 200 {
		t.Errorf("POST /admin/reload with an empty registry: %s, want it refused", r)
	}
	code, _, stderr := runGateway(t, nil, "validate", "--config", g.Config)
	if code != 2 || !strings.Contains(stderr, "--allow-empty") {
		t.Errorf("validate of an empty registry: exit %d, stderr %q; want 2 naming --allow-empty", code, stderr)
	}
	if code, _, stderr := runGateway(t, nil, "validate", "--allow-empty", "--config", g.Config); code != 0 {
		t.Errorf("validate --allow-empty of an empty registry: exit %d, stderr %q", code, stderr)
	}
}
