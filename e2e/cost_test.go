package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// TestCostLogLimitBoundedByMemory: a sliding log keeps up to one entry per
// unit of its limit, so a limit of 10^13/day (with which single requests
// of cost 10^12 once added ~45 MB each, and 2^52 got the gateway
// OOM-killed) is refused by validate and at startup, naming the bytes.
func TestCostLogLimitBoundedByMemory(t *testing.T) {
	t.Parallel()
	cfg := renderTemplate(t, "costlog.toml.tmpl", map[string]any{
		"Listen": "127.0.0.1:1", "Admin": "127.0.0.1:2", "Rate": "10000000000000/day", "Redis": ""})
	path := filepath.Join(t.TempDir(), "gateway.toml")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runGateway(t, nil, "validate", "--config", path)
	if code != 2 || !strings.Contains(stderr, "limits[0]") || !strings.Contains(stderr, "160000000000048 bytes per key") {
		t.Fatalf("validate: exit %d, stderr:\n%s\nwant exit 2 naming limits[0] and its bytes per key", code, stderr)
	}
	code, _, stderr = runGateway(t, nil, "--config", path)
	if code == 0 || !strings.Contains(stderr, "bytes per key") {
		t.Fatalf("serve: exit %d, stderr:\n%s\nwant a refusal naming the bytes per key", code, stderr)
	}
}

// TestCostHugeOnLog: on the largest log a configuration may take
// (4,000,000/day on the memory store, 1,000/day on Redis, which decodes a
// log whole on every call), requests of a quarter of the capacity, of the
// whole capacity and of 2^52 units answer at once with exact decisions,
// and the state stays a few bytes per request: in Redis the key's MEMORY
// USAGE (a log that split a cost into 65,536-unit runs held 512 bytes of
// entries after four million-unit requests), in the gateway its resident
// memory.
func TestCostHugeOnLog(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			capacity := int64(4_000_000)
			var rs *redistest.Server
			if backend == "redis" {
				capacity = 1000 // maxRedisLogUnits in policy/redislog.go
				rs = redistest.Standalone(t)
			}
			data := map[string]any{"Rate": strconv.FormatInt(capacity, 10) + "/day", "Redis": ""}
			if rs != nil {
				data["Redis"], data["Prefix"] = rs.Addr, "huge:"
			}
			quarter := strconv.FormatInt(capacity/4, 10)
			g := startGateway(t, "costlog.toml.tmpl", gwOpts{Data: data})
			c := newClient(t, "")
			c.Timeout = 10 * time.Second // a request that spends seconds fails here
			rss0 := rssKB(t, g)
			send := func(cost string) *response {
				t.Helper()
				return get(t, c, g.url("/big"), map[string]string{"X-Cost": cost})
			}
			for i, rem := range []int64{3 * capacity / 4, capacity / 2, capacity / 4, 0} {
				r := send(quarter)
				if r.Status != 200 {
					t.Fatalf("request %d of %s units: %s", i+1, quarter, r)
				}
				if got := r.Header.Get("RateLimit"); !strings.HasPrefix(got, `"big";r=`+strconv.FormatInt(rem, 10)+";") {
					t.Fatalf("request %d: RateLimit %q, want remaining %d", i+1, got, rem)
				}
				time.Sleep(2 * time.Millisecond) // distinct ticks: one entry each
			}
			for _, cost := range []string{"1", strconv.FormatInt(capacity, 10), "4503599627370496", "9007199254740992"} {
				r := send(cost)
				check429Body(t, r, "big")
			}
			if r := send("9007199254740993"); r.Status != http.StatusBadRequest {
				t.Fatalf("cost 2^53+1: %s, want 400", r)
			}
			if rs != nil {
				v, err := rs.Do("KEYS", "huge:*")
				all, _ := v.([]any)
				var ks []string
				for _, k := range all {
					if s, _ := k.(string); !strings.Contains(s, "tollgate-probe") { // the readiness probe's key
						ks = append(ks, s)
					}
				}
				if err != nil || len(ks) != 1 {
					t.Fatalf("KEYS huge:* = %v, %v; want one counter key", v, err)
				}
				key := ks[0]
				v, err = rs.Do("MEMORY", "USAGE", key)
				n, _ := v.(int64)
				// 4 entries of 8 bytes (15 from a cost of 65,535 on)
				// behind a 7-byte base and a 4-byte length, plus Redis's
				// own overhead for a string key (about 200 in all with
				// Redis 7); a log split into 65,536-unit runs would hold
				// more than 600.
				if err != nil || n <= 0 || n > 320 {
					t.Fatalf("MEMORY USAGE %s = %v, %v; want at most 320 bytes for 4 entries", key, v, err)
				}
				t.Logf("MEMORY USAGE of the key after four million-unit requests: %d bytes", n)
			}
			if grown := rssKB(t, g) - rss0; grown > 16<<10 {
				t.Fatalf("the gateway's resident memory grew by %d KiB over 9 requests", grown)
			}
		})
	}
}

// rssKB returns the gateway process's resident set size in KiB.
func rssKB(t testing.TB, g *gw) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(g.cmd.Process.Pid) + "/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatal("no VmRSS in /proc/PID/status")
	return 0
}

// TestCostAboveCapacityHeaders (issue: a 429 for a cost above capacity
// showed `r=0;t=0` on an unused bucket): such a 429 reports the window as
// it is, its true remaining, and no reset when nothing is used (nothing
// comes back); on a used window, the time until more comes back.
func TestCostAboveCapacityHeaders(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "cost.toml.tmpl", gwOpts{})
	c := newClient(t, "")
	units := func(cost string) *response {
		t.Helper()
		return get(t, c, g.url("/units"), map[string]string{"X-Request-Cost": cost})
	}
	r := units("11")
	check429Body(t, r, "units")
	if got := r.Header.Get("RateLimit"); got != `"units";r=10` {
		t.Errorf("cost 11 on an unused 10/minute: RateLimit %q, want %q", got, `"units";r=10`)
	}
	if r := units("4"); r.Status != 200 {
		t.Fatalf("cost 4: %s", r)
	}
	r = units("11")
	check429Body(t, r, "units")
	if got := r.Header.Get("RateLimit"); got != `"units";r=6;t=60` {
		t.Errorf("cost 11 after 4: RateLimit %q, want %q (the 4 units come back in 60 s)", got, `"units";r=6;t=60`)
	}
	if _, ok := r.retryAfter(t); ok {
		t.Errorf("cost 11 > capacity: Retry-After %q promises a retry that can never succeed", r.Header.Get("Retry-After"))
	}
}

// TestCostHeaderTrust: a cost header is client-controlled, so by default a
// client cannot declare less than the static cost (cost_min defaults to
// cost); with cost_header_trusted_from the header of any other peer is
// ignored (the static cost applies, malformed or not), and a trusted
// peer's is believed down to cost_min.
func TestCostHeaderTrust(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "cost.toml.tmpl", gwOpts{})
	c := newClient(t, "")
	for _, step := range []struct {
		path, cost string
		status     int
		remaining  string
	}{
		{"/floored", "1", 200, "6"}, // paid the floor 4, not 1
		{"/floored", "5", 200, "1"}, // more than the floor: as declared
		{"/floored", "1", 429, ""},
		{"/proxied", "1", 200, "6"},   // not from 192.0.2.0/24: cost 4
		{"/proxied", "abc", 200, "2"}, // ignored, not even parsed
		{"/trusted", "1", 200, "9"},   // from loopback: believed, floor 1
		{"/trusted", "abc", 400, ""},
		{"/trusted", "", 200, "5"}, // absent: the static cost 4
	} {
		hdr := map[string]string{}
		if step.cost != "" {
			hdr["X-Request-Cost"] = step.cost
		}
		r := get(t, c, g.url(step.path), hdr)
		if r.Status != step.status {
			t.Fatalf("%s with cost %q: %s, want %d", step.path, step.cost, r, step.status)
		}
		if step.remaining != "" {
			name := strings.TrimPrefix(step.path, "/")
			if got, want := r.Header.Get("RateLimit"), `"`+name+`";r=`+step.remaining+";"; !strings.HasPrefix(got, want) {
				t.Fatalf("%s with cost %q: RateLimit %q, want %s…", step.path, step.cost, got, want)
			}
		}
	}
}

// TestCostHeaderSpellings: header spellings a client may try so that one
// reader sees a cheap cost and another an expensive one: the header sent
// twice, or as a list, is a 400 that counts nothing; outer whitespace is
// trimmed by HTTP parsing (7 units); a sign is not a number.
func TestCostHeaderSpellings(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "cost.toml.tmpl", gwOpts{})
	c := newClient(t, "")
	send := func(values ...string) *response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, g.url("/units"), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			req.Header.Add("X-Request-Cost", v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return &response{Status: resp.StatusCode, Header: resp.Header}
	}
	for _, vs := range [][]string{{"1", "9"}, {"9", "1"}, {"1, 9"}, {"+3"}, {"3 3"}} {
		if r := send(vs...); r.Status != http.StatusBadRequest {
			t.Errorf("X-Request-Cost %q: %d, want 400", vs, r.Status)
		}
	}
	r := send(" 7\t")
	if got := r.Header.Get("RateLimit"); r.Status != 200 || !strings.HasPrefix(got, `"units";r=3;`) {
		t.Fatalf("X-Request-Cost \" 7\\t\": %d %q, want 200 with 3 of 10 left (nothing counted before)", r.Status, got)
	}
}
