package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// opsData is ops.toml.tmpl's data for a gateway in front of up, with its
// defaults overridden by kv pairs.
func opsData(t testing.TB, up *upstream, kv ...any) map[string]any {
	t.Helper()
	d := map[string]any{
		"Upstream": up.URL, "Dead": "http://" + freePort(t), "Body": "v1", "Rate": "3/minute",
		"Watch": false, "JWTSecretEnv": "", "RedisURL": "", "TokenEnv": "", "TokenFile": "", "AccessLog": "", "Format": "jsonl",
		"Extra": "",
	}
	for i := 0; i+1 < len(kv); i += 2 {
		d[kv[i].(string)] = kv[i+1]
	}
	return d
}

// adminDo sends a request to the admin listener, with a bearer token when
// token is not empty.
func adminDo(t testing.TB, g *gw, method, path, token string) *response {
	t.Helper()
	hdr := map[string]string{}
	if token != "" {
		hdr["Authorization"] = "Bearer " + token
	}
	return do(t, &http.Client{Timeout: 10 * time.Second}, method, g.adminURL(path), hdr)
}

// metrics is one scrape of /metrics: sample value by series, the series
// written as in the exposition, `name{label="value",...}` (the exporter
// sorts labels by name).
type metrics map[string]float64

// scrape reads the admin listener's /metrics.
func scrape(t testing.TB, g *gw, token string) metrics {
	t.Helper()
	r := adminDo(t, g, "GET", "/metrics", token)
	if r.Status != 200 {
		t.Fatalf("GET /metrics: %s", r)
	}
	m := metrics{}
	sc := bufio.NewScanner(bytes.NewReader(r.Body))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("/metrics: malformed line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics: malformed value in %q", line)
		}
		m[line[:i]] = v
	}
	return m
}

// family returns the series of one metric name whose labels contain every
// given `label="value"` fragment.
func (m metrics) family(name string, labels ...string) metrics {
	out := metrics{}
	for k, v := range m {
		base, _, _ := strings.Cut(k, "{")
		if base != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(k, l) {
				ok = false
			}
		}
		if ok {
			out[k] = v
		}
	}
	return out
}

func (m metrics) String() string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString("\n  " + k + " " + strconv.FormatFloat(m[k], 'g', -1, 64))
	}
	return b.String()
}

// checkFamily checks that the series of metric name are exactly want
// (series → value): nothing missing, nothing extra, every value equal.
func checkFamily(t testing.TB, m metrics, name string, want map[string]float64) {
	t.Helper()
	got := m.family(name)
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v; the family:%s", k, g, ok, v, got)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected series %s %v", k, got[k])
		}
	}
}

// usage is the JSON of GET /admin/limits.
type usage struct {
	Limit      string        `json:"limit"`
	Mode       string        `json:"mode"`
	CounterKey string        `json:"counter_key"`
	Windows    []usageWindow `json:"windows"`
}

// usageWindow is one window of a counter's usage, as GET /admin/limits
// and a quota route answer it.
type usageWindow struct {
	Rate      string  `json:"rate"`
	Limit     int64   `json:"limit"`
	Used      int64   `json:"used"`
	Remaining int64   `json:"remaining"`
	Reset     float64 `json:"reset_seconds"`
}

// limitUsage reads GET /admin/limits?limit=limit&key=key (one window).
func limitUsage(t testing.TB, g *gw, token, limit, key string) *usage {
	t.Helper()
	r := adminDo(t, g, "GET", "/admin/limits?limit="+limit+"&key="+key, token)
	if r.Status != 200 {
		t.Fatalf("GET /admin/limits %s %s: %s", limit, key, r)
	}
	var u usage
	if err := json.Unmarshal(r.Body, &u); err != nil {
		t.Fatalf("GET /admin/limits: %v: %s", err, r.Body)
	}
	if len(u.Windows) != 1 {
		t.Fatalf("GET /admin/limits %s %s: %d windows, want 1: %s", limit, key, len(u.Windows), r.Body)
	}
	return &u
}

// waitReload waits until /readyz reports a reload newer than before and
// returns it.
func waitReload(t testing.TB, g *gw, before time.Time) *readyzBody {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rd := readyz(t, g)
		if rd.LastReload != nil && rd.LastReload.At.After(before) {
			return rd
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz last_reload did not change within 10s: %+v", rd.LastReload)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitBody polls GET url until it answers 200 with body, or fails after 10 s.
func waitBody(t testing.TB, c *http.Client, url, body string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := get(t, c, url, nil)
		if r.Status == 200 && string(r.Body) == body {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s never answered %q; last: %s", url, body, r)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
