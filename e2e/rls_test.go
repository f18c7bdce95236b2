package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/internal/testcerts"
)

// rlsYAML is an envoyproxy/ratelimit configuration file, as that service
// reads it. Every window is a day, so that no test crosses a window's
// end except at midnight UTC (the tests move the gateway's clock to noon).
const rlsYAML = `domain: edge
descriptors:
  - key: remote_address
    rate_limit:
      unit: day
      requests_per_unit: {{IP}}
  - key: path
    value: /login
    rate_limit: {unit: day, requests_per_unit: 5}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 1}
  - key: bulk
    rate_limit: {unit: day, requests_per_unit: 10, name: bulk}
  - key: free
    rate_limit: {unlimited: true}
  - key: batched
    sync: batched
    lease_size: 3
    rate_limit: {unit: day, requests_per_unit: 10}
`

// noonOffset is the clock offset that puts the gateway at noon UTC of
// today: a day window then has twelve hours left whatever the test does.
func noonOffset() time.Duration {
	now := time.Now().UTC()
	noon := time.Date(now.Year(), now.Month(), now.Day(), 12, 0, 0, 0, time.UTC)
	return noon.Sub(now)
}

type rlsClient struct {
	t  *testing.T
	c  rlpb.RateLimitServiceClient
	cc *grpc.ClientConn
}

func dialRLS(t *testing.T, addr string) *rlsClient {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &rlsClient{t: t, c: rlpb.NewRateLimitServiceClient(cc), cc: cc}
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *commonpb.RateLimitDescriptor {
	d := &commonpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func (c *rlsClient) call(req *rlpb.RateLimitRequest) *rlpb.RateLimitResponse {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.c.ShouldRateLimit(ctx, req)
	if err != nil {
		c.t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

func (c *rlsClient) one(domain string, ds ...*commonpb.RateLimitDescriptor) *rlpb.RateLimitResponse {
	c.t.Helper()
	return c.call(&rlpb.RateLimitRequest{Domain: domain, Descriptors: ds})
}

// expect checks one descriptor's status: its code and, when limit > 0,
// its limit and remaining.
func expectRLS(t *testing.T, what string, st *rlpb.RateLimitResponse_DescriptorStatus, code rlpb.RateLimitResponse_Code, limit, remaining uint32) {
	t.Helper()
	if st.GetCode() != code {
		t.Fatalf("%s: code %v, want %v (%v)", what, st.GetCode(), code, st)
	}
	if limit == 0 {
		if st.GetCurrentLimit() != nil {
			t.Fatalf("%s: current_limit %v, want none", what, st.GetCurrentLimit())
		}
		return
	}
	if cl := st.GetCurrentLimit(); cl.GetRequestsPerUnit() != limit || cl.GetUnit() != rlpb.RateLimitResponse_RateLimit_DAY {
		t.Fatalf("%s: current_limit %v, want %d per DAY", what, cl, limit)
	}
	if st.GetLimitRemaining() != remaining {
		t.Fatalf("%s: limit_remaining %d, want %d", what, st.GetLimitRemaining(), remaining)
	}
}

func writeRLSYAML(t *testing.T, dir string, ipLimit string) {
	t.Helper()
	writeFileAtomic(t, filepath.Join(dir, "edge.yaml"), []byte(strings.Replace(rlsYAML, "{{IP}}", ipLimit, 1)))
}

// TestRLSMemory drives Envoy's rate limit service through the binary on
// the memory store, with a configuration that has no route.
func TestRLSMemory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRLSYAML(t, dir, "3")
	g := startGateway(t, "rls.toml.tmpl", gwOpts{Data: map[string]any{"Dir": dir, "Extra": ""}, FreshPorts: []string{"RLS"},
		Env: []string{"GATEWAY_TEST_CLOCK_OFFSET=" + noonOffset().String()}})
	runRLS(t, g, g.Port("RLS"), dir, true)
}

// TestRLSRedis is TestRLSMemory on a Redis store (its own clock: the
// windows are still a day long and aligned to the epoch).
func TestRLSRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	dir := t.TempDir()
	writeRLSYAML(t, dir, "3")
	data := redisData(rs.Addr, nil, "deny", "2s", "")
	data["RLSDir"] = dir
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data, FreshPorts: []string{"RLS"}})
	addr := g.Port("RLS")
	// Redis decides on its own clock: near midnight UTC a day window may
	// end during the test, so it brackets rather than pins the reset.
	runRLS(t, g, addr, dir, false)
}

// TestRLSRedisCluster is TestRLSRedis on a Redis Cluster: each
// descriptor's counter is a hash tag of its own, so one call's
// descriptors land on several masters and are still decided together.
func TestRLSRedisCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.Cluster(t)
	dir := t.TempDir()
	writeRLSYAML(t, dir, "3")
	data := redisData("", cl.Addrs(), "deny", "2s", "")
	data["RLSDir"] = dir
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data, FreshPorts: []string{"RLS"}})
	addr := g.Port("RLS")
	runRLS(t, g, addr, dir, false)
}

func runRLS(t *testing.T, g *gw, addr, dir string, pinnedClock bool) {
	c := dialRLS(t, addr)

	// The standard health service, for the whole server and by name.
	hc := healthpb.NewHealthClient(c.cc)
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q: %v %v", svc, r, err)
		}
	}

	// A fixed window of 3 a day: remaining 2, 1, 0, then over the limit.
	for i, want := range []uint32{2, 1, 0} {
		before := time.Now()
		r := c.one("edge", desc("remote_address", "10.0.0.1"))
		after := time.Now()
		if r.GetOverallCode() != rlpb.RateLimitResponse_OK {
			t.Fatalf("call %d: %v", i+1, r)
		}
		st := r.GetStatuses()[0]
		expectRLS(t, "remote_address", st, rlpb.RateLimitResponse_OK, 3, want)
		// The window is the UTC day: the reset is the time to midnight.
		checkReset(t, st, before, after, pinnedClock)
		if i == 0 {
			h := map[string]string{}
			for _, hv := range r.GetResponseHeadersToAdd() {
				h[hv.GetKey()] = hv.GetValue()
			}
			if !strings.Contains(h["RateLimit-Policy"], "q=3;w=86400") || !strings.Contains(h["RateLimit"], "r=2") {
				t.Fatalf("headers %v", h)
			}
		}
	}
	r := c.one("edge", desc("remote_address", "10.0.0.1"))
	if r.GetOverallCode() != rlpb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("4th call: %v", r)
	}
	expectRLS(t, "4th", r.GetStatuses()[0], rlpb.RateLimitResponse_OVER_LIMIT, 3, 0)

	// Atomic: a request denied by its first descriptor debits none of the
	// others. The reference counts /login here (5 → 4); Tollgate does not,
	// so five more calls on /login alone all pass.
	r = c.one("edge", desc("remote_address", "10.0.0.1"), desc("path", "/login"))
	if r.GetOverallCode() != rlpb.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("mixed call: %v", r)
	}
	expectRLS(t, "mixed ip", r.GetStatuses()[0], rlpb.RateLimitResponse_OVER_LIMIT, 3, 0)
	expectRLS(t, "mixed path", r.GetStatuses()[1], rlpb.RateLimitResponse_OK, 5, 5)
	for i, want := range []uint32{4, 3, 2, 1, 0} {
		r := c.one("edge", desc("path", "/login"))
		if r.GetOverallCode() != rlpb.RateLimitResponse_OK {
			t.Fatalf("/login call %d: %v", i+1, r)
		}
		expectRLS(t, "/login", r.GetStatuses()[0], rlpb.RateLimitResponse_OK, 5, want)
	}

	// /admin/top names the descriptor denied twice (the 4th call and the
	// mixed one), hashed as the access log hashes a client.
	tr := adminDo(t, g, "GET", "/admin/top?limit=edge.remote_address&span=1m", "")
	var top topBody
	if tr.Status != 200 || json.Unmarshal(tr.Body, &top) != nil {
		t.Fatalf("GET /admin/top: %s", tr)
	}
	if top.Denied.Total != 2 || len(top.Denied.Clients) != 1 || top.Denied.Clients[0].Count != 2 ||
		top.Denied.Clients[0].Client != accessLogHash("descriptor", "remote_address=10.0.0.1") {
		t.Fatalf("/admin/top: %s", tr.Body)
	}

	// The dashboard's data lists the service's limits that decided.
	if ui := adminDo(t, g, "GET", "/admin/ui/data?top=edge.remote_address", ""); ui.Status != 200 ||
		!strings.Contains(string(ui.Body), `"name":"edge.remote_address","algorithm":"fixed_window"`) ||
		!strings.Contains(string(ui.Body), accessLogHash("descriptor", "remote_address=10.0.0.1")) {
		t.Fatalf("GET /admin/ui/data: %s", ui)
	}

	// Unknown domain, unknown key, unlimited: OK with no limit.
	r = c.one("nowhere", desc("remote_address", "10.0.0.1"))
	if r.GetOverallCode() != rlpb.RateLimitResponse_OK {
		t.Fatalf("unknown domain: %v", r)
	}
	expectRLS(t, "unknown domain", r.GetStatuses()[0], rlpb.RateLimitResponse_OK, 0, 0)
	r = c.one("edge", desc("nope", "x"), desc("free", "x"))
	expectRLS(t, "unknown key", r.GetStatuses()[0], rlpb.RateLimitResponse_OK, 0, 0)
	if st := r.GetStatuses()[1]; st.GetCode() != rlpb.RateLimitResponse_OK || st.GetLimitRemaining() != 1<<32-1 {
		t.Fatalf("unlimited: %v", st)
	}

	// Shadow mode: over its limit of 1, still OK.
	for i := range 3 {
		r = c.one("edge", desc("shadow", "s"))
		if r.GetOverallCode() != rlpb.RateLimitResponse_OK || r.GetStatuses()[0].GetCode() != rlpb.RateLimitResponse_OK {
			t.Fatalf("shadow call %d: %v", i+1, r)
		}
	}

	// hits_addend: the request's (4), a descriptor's own 0 (check only),
	// then over and exactly at the limit of 10.
	r = c.call(&rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{desc("bulk", "b")}, HitsAddend: 4})
	expectRLS(t, "bulk +4", r.GetStatuses()[0], rlpb.RateLimitResponse_OK, 10, 6)
	peek := desc("bulk", "b")
	peek.HitsAddend = wrapperspb.UInt64(0)
	r = c.call(&rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{peek}, HitsAddend: 4})
	expectRLS(t, "bulk +0", r.GetStatuses()[0], rlpb.RateLimitResponse_OK, 10, 6)
	// A check on a counter never used reports the window's end all the
	// same, as the reference does: the reset is where the window ends,
	// not when something counted in it expires.
	fresh := desc("bulk", "fresh")
	fresh.HitsAddend = wrapperspb.UInt64(0)
	before := time.Now()
	r = c.call(&rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{fresh}})
	expectRLS(t, "fresh +0", r.GetStatuses()[0], rlpb.RateLimitResponse_OK, 10, 10)
	checkReset(t, r.GetStatuses()[0], before, time.Now(), pinnedClock)
	r = c.call(&rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{desc("bulk", "b")}, HitsAddend: 7})
	expectRLS(t, "bulk +7", r.GetStatuses()[0], rlpb.RateLimitResponse_OVER_LIMIT, 10, 0)
	own := desc("bulk", "b")
	own.HitsAddend = wrapperspb.UInt64(6)
	r = c.call(&rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{own}, HitsAddend: 100})
	expectRLS(t, "bulk own +6", r.GetStatuses()[0], rlpb.RateLimitResponse_OK, 10, 0)
	if n := r.GetStatuses()[0].GetCurrentLimit().GetName(); n != "bulk" {
		t.Fatalf("current_limit name %q", n)
	}

	// sync: batched (leases of 3 on a Redis store; exact on memory): one
	// gateway admits exactly the 10 of the day.
	okCalls := 0
	for range 14 {
		if c.one("edge", desc("batched", "x")).GetOverallCode() == rlpb.RateLimitResponse_OK {
			okCalls++
		}
	}
	if okCalls != 10 {
		t.Fatalf("batched: %d calls allowed, want 10", okCalls)
	}
	if !pinnedClock {
		// On Redis leases decided them: some hits were decided locally,
		// without a Redis call.
		m := string(adminDo(t, g, "GET", "/metrics", "").Body)
		if strings.Contains(m, "tollgate_store_leases_total 0") || strings.Contains(m, "tollgate_store_local_decisions_total 0") ||
			!strings.Contains(m, "tollgate_store_local_decisions_total") {
			t.Fatalf("leases: %s", grepLines(m, "tollgate_store_l"))
		}
	}

	// Refused requests: no domain, no descriptor, too many descriptors.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	many := make([]*commonpb.RateLimitDescriptor, 65)
	for i := range many {
		many[i] = desc("remote_address", "x")
	}
	for name, req := range map[string]*rlpb.RateLimitRequest{
		"no domain":      {Descriptors: []*commonpb.RateLimitDescriptor{desc("k", "v")}},
		"no descriptor":  {Domain: "edge"},
		"65 descriptors": {Domain: "edge", Descriptors: many},
	} {
		if _, err := c.c.ShouldRateLimit(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%s: %v, want InvalidArgument", name, err)
		}
	}

	big := desc("remote_address", strings.Repeat("x", 2<<20))
	if _, err := c.c.ShouldRateLimit(ctx, &rlpb.RateLimitRequest{Domain: "edge", Descriptors: []*commonpb.RateLimitDescriptor{big}}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("2 MiB message: %v, want ResourceExhausted", err)
	}

	// Metrics by domain, configured descriptor and code; an unknown
	// domain is not a label.
	m := string(adminDo(t, g, "GET", "/metrics", "").Body)
	for _, want := range []string{`code="over_limit",descriptor="edge.remote_address",domain="edge"`,
		`code="shadow_over_limit",descriptor="edge.shadow",domain="edge"`, `code="no_limit",descriptor="none",domain=""`} {
		if !strings.Contains(m, want) {
			t.Fatalf("/metrics lacks %s:\n%s", want, grepLines(m, "tollgate_rls"))
		}
	}
	if strings.Contains(m, "nowhere") {
		t.Fatal("an unknown domain became a label")
	}

	// A reload raises the limit of 3 to 5: the counts made so far carry
	// over (the limit's identity does not depend on its number), so the
	// exhausted address has 2 left.
	writeRLSYAML(t, dir, "5")
	if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 200 {
		t.Fatalf("reload: %s", r)
	}
	r = c.one("edge", desc("remote_address", "10.0.0.1"))
	expectRLS(t, "after reload", r.GetStatuses()[0], rlpb.RateLimitResponse_OK, 5, 1)

	// A broken file is refused with its name and path; the service keeps
	// the last good configuration.
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status == 200 || !strings.Contains(string(r.Body), "bad.yaml: descriptors[0].rate_limit.unit: invalid rate limit unit 'fortnight'") {
		t.Fatalf("bad reload: %s", r)
	}
	r = c.one("edge", desc("remote_address", "10.0.0.1"))
	expectRLS(t, "after refused reload", r.GetStatuses()[0], rlpb.RateLimitResponse_OK, 5, 0)
}

// checkReset checks a day window's duration_until_reset: the time to
// midnight UTC, on the gateway's clock moved to noon (pinned) or on the
// store's clock, bracketed by the instants before and after the call.
func checkReset(t *testing.T, st *rlpb.RateLimitResponse_DescriptorStatus, before, after time.Time, pinned bool) {
	t.Helper()
	reset := st.GetDurationUntilReset().AsDuration()
	if pinned {
		// The gateway's clock is noon plus the time since the offset was
		// taken: its reset lies within 12 h of the call.
		if reset > 12*time.Hour || reset < 11*time.Hour {
			t.Fatalf("reset %v, want just under 12h (clock at noon UTC)", reset)
		}
		return
	}
	lo, hi := untilMidnight(after), untilMidnight(before)
	if reset < lo-time.Second || reset > hi+time.Second {
		t.Fatalf("reset %v, want in [%v, %v]", reset, lo, hi)
	}
}

// grepLines returns the lines of s containing sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// untilMidnight is the time from t to the next midnight UTC.
func untilMidnight(t time.Time) time.Duration {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC).Sub(t)
}

// TestRLSMutualTLS: rls.tls with client_ca_file serves the service over
// TLS to a client with a certificate its CA signed; a client without one,
// or speaking cleartext, gets no answer.
func TestRLSMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRLSYAML(t, dir, "3")
	servers := testcerts.NewCA(t, "server CA")
	clients := testcerts.NewCA(t, "client CA")
	cert, key := servers.Server(t, "localhost", "127.0.0.1").Write(t, dir, "server")
	caFile := writeFile(t, dir, "clients.pem", clients.PEM)
	extra := fmt.Sprintf("[rls.tls]\ncert_file = %q\nkey_file = %q\nclient_ca_file = %q\n", cert, key, caFile)
	g := startGateway(t, "rls.toml.tmpl", gwOpts{Data: map[string]any{"Dir": dir, "Extra": extra}, FreshPorts: []string{"RLS"}})
	addr := g.Port("RLS")

	call := func(creds credentials.TransportCredentials) error {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := rlpb.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, &rlpb.RateLimitRequest{Domain: "edge",
			Descriptors: []*commonpb.RateLimitDescriptor{desc("remote_address", "10.0.0.9")}})
		if err == nil && r.GetStatuses()[0].GetLimitRemaining() != 2 {
			t.Fatalf("answer %v", r)
		}
		return err
	}
	client := clients.Client(t, "envoy", "mesh").TLS(t)
	if err := call(credentials.NewTLS(&tls.Config{RootCAs: servers.Pool(), Certificates: []tls.Certificate{client}, ServerName: "localhost"})); err != nil {
		t.Fatalf("mutual TLS: %v", err)
	}
	if err := call(credentials.NewTLS(&tls.Config{RootCAs: servers.Pool(), ServerName: "localhost"})); err == nil {
		t.Fatal("answered a client without a certificate")
	}
	if err := call(insecure.NewCredentials()); err == nil {
		t.Fatal("answered a cleartext client")
	}
}

// TestRLSValidate: `gateway validate` and startup refuse a bad
// envoyproxy/ratelimit file with the entry, the file, the YAML path and
// the line, every problem in one run; a good one is summarised.
func TestRLSValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "ratelimit"), 0o700); err != nil {
		t.Fatal(err)
	}
	yamlPath := filepath.Join(dir, "ratelimit", "edge.yaml")
	cfg := filepath.Join(dir, "gateway.toml")
	writeFileAtomic(t, cfg, []byte("[rls]\nlisten = \"127.0.0.1:0\"\nenvoy_config = [\"ratelimit/*.yaml\", \"missing/*.yaml\"]\n"))
	writeFileAtomic(t, yamlPath, []byte("domain: edge\ndescriptors:\n  - key: k\n  - key: k\n"))
	for _, args := range [][]string{{"validate", "--config", cfg}, {"--config", cfg}} {
		code, _, stderr := runGateway(t, nil, args...)
		// Startup logs the problems as JSON strings: quotes escaped.
		if code != 2 || !strings.Contains(stderr, "rls.envoy_config: "+yamlPath+": descriptors[1]: duplicate descriptor composite key 'edge.k' (line 4)") ||
			!strings.Contains(stderr, "rls.envoy_config[1]: ") || !strings.Contains(stderr, filepath.Join(dir, "missing/*.yaml")) ||
			!strings.Contains(stderr, "matches no file") {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
	}
	writeFileAtomic(t, cfg, []byte("[rls]\nlisten = \"127.0.0.1:0\"\nenvoy_config = [\"ratelimit/*.yaml\"]\n"))
	writeFileAtomic(t, yamlPath, []byte("domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"))
	code, stdout, stderr := runGateway(t, nil, "validate", "--config", cfg)
	if code != 0 || !strings.Contains(stdout, "rls 127.0.0.1:0: 1 files, 1 domains, 1 rate limits") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestRLSShutdown: SIGTERM with a caller's connection open stops the
// service: the process exits 0 within the shutdown budget and says it
// stopped (the open connection does not hold it).
func TestRLSShutdown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeRLSYAML(t, dir, "3")
	g := startGateway(t, "rls.toml.tmpl", gwOpts{Data: map[string]any{"Dir": dir, "Extra": ""}, FreshPorts: []string{"RLS"}})
	addr := g.Port("RLS")
	c := dialRLS(t, addr)
	if r := c.one("edge", desc("remote_address", "a")); r.GetOverallCode() != rlpb.RateLimitResponse_OK {
		t.Fatalf("call: %v", r)
	}
	g.signal(t, syscall.SIGTERM)
	code, err := g.wait(10 * time.Second)
	if err != nil || code != 0 || !strings.Contains(g.output(), `"msg":"stopped"`) {
		t.Fatalf("exit %d, %v\n%s", code, err, g.output())
	}
}

// TestRLSHealthFollowsStore: with store.on_error = "deny" every call
// is answered UNAVAILABLE while Redis is down, so the gRPC health service
// says NOT_SERVING then (a caller's health check sends its calls
// elsewhere) and SERVING again once Redis is back. Before, it said
// SERVING throughout.
func TestRLSHealthFollowsStore(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	dir := t.TempDir()
	writeRLSYAML(t, dir, "3")
	data := redisData(rs.Addr, nil, "deny", "500ms", "")
	data["RLSDir"] = dir
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: data, FreshPorts: []string{"RLS"}})
	c := dialRLS(t, g.Port("RLS"))
	hc := healthpb.NewHealthClient(c.cc)
	status := func() healthpb.HealthCheckResponse_ServingStatus {
		r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "envoy.service.ratelimit.v3.RateLimitService"})
		if err != nil {
			t.Fatalf("health check: %v", err)
		}
		return r.GetStatus()
	}
	waitStatus := func(want healthpb.HealthCheckResponse_ServingStatus, what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for status() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: health still %v after 20 s, want %v", what, status(), want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitStatus(healthpb.HealthCheckResponse_SERVING, "at start")
	rs.Kill()
	waitStatus(healthpb.HealthCheckResponse_NOT_SERVING, "Redis down")
	rs.Restart()
	waitStatus(healthpb.HealthCheckResponse_SERVING, "Redis back")
}
