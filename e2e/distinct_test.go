package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// TestDistinctLimits drives the three shapes a distinct-count limit is
// for through the binary, on the memory store, a standalone Redis and a
// Redis Cluster (testdata/distinct.toml.tmpl):
//   - key sharing: one API key from more than 3 networks (/24s) an hour is
//     denied from a new network, and still served from the ones counted;
//     another key is not affected;
//   - credential stuffing: one IP trying more than 5 usernames (a header)
//     is denied a sixth, still served for the five, and a request without
//     the header is answered 401 (on_missing = "reject");
//   - scraping: one client fetching more than 200 distinct paths, past the
//     exact range (the HyperLogLog estimate decides), is denied new paths
//     within the estimate's error, and still served the paths it fetched.
func TestDistinctLimits(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) map[string]any{
		"memory": func(*testing.T) map[string]any { return map[string]any{"Redis": "", "Cluster": ""} },
		"redis": func(t *testing.T) map[string]any {
			return map[string]any{"Redis": redistest.Standalone(t).Addr, "Cluster": ""}
		},
		"cluster": func(t *testing.T) map[string]any {
			return map[string]any{"Redis": "", "Cluster": `["` + strings.Join(redistest.Cluster(t).Addrs(), `", "`) + `"]`}
		},
	}
	for _, name := range []string{"memory", "redis", "cluster"} {
		t.Run(name, func(t *testing.T) {
			avoidWindowEdge(time.Hour)
			g := startGateway(t, "distinct.toml.tmpl", gwOpts{Data: stores[name](t)})
			c := &http.Client{Timeout: 10 * time.Second}
			t.Run("key-sharing", func(t *testing.T) { distinctKeySharing(t, g, c) })
			t.Run("stuffing", func(t *testing.T) { distinctStuffing(t, g, c) })
			t.Run("scraping", func(t *testing.T) { distinctScraping(t, g, c) })
		})
	}
}

func wantStatus(t *testing.T, r *response, want int, what string) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("%s: %s, want %d", what, r, want)
	}
	if want == http.StatusTooManyRequests {
		if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 {
			t.Fatalf("%s: 429 without Retry-After ≥ 1: %s", what, r)
		}
	}
}

func distinctKeySharing(t *testing.T, g *gw, c *http.Client) {
	from := func(key, ip string) map[string]string {
		return map[string]string{"X-API-Key": key, "X-Forwarded-For": ip}
	}
	for _, ip := range []string{"10.0.1.5", "10.0.2.5", "10.0.3.5", "10.0.3.77", "10.0.1.200"} {
		wantStatus(t, get(t, c, g.url("/api/x"), from("shared-key", ip)), 200, "a counted network "+ip)
	}
	wantStatus(t, get(t, c, g.url("/api/x"), from("shared-key", "10.0.4.5")), 429, "a fourth network")
	wantStatus(t, get(t, c, g.url("/api/x"), from("shared-key", "10.0.2.99")), 200, "a counted network after the denial")
	wantStatus(t, get(t, c, g.url("/api/x"), from("own-key", "10.0.4.5")), 200, "another key from the fourth network")
	// The admin API reads the key's count (the store's Usage, no value),
	// and its reset lets a new network in.
	u := adminDo(t, g, "GET", "/admin/limits?limit=key-sharing&key=api_key:shared-key", "")
	var usage struct {
		Algorithm string `json:"algorithm"`
		Windows   []struct {
			Used      int64 `json:"used"`
			Remaining int64 `json:"remaining"`
		} `json:"windows"`
	}
	if err := json.Unmarshal(u.Body, &usage); err != nil || u.Status != 200 || usage.Algorithm != "distinct" ||
		len(usage.Windows) != 1 || usage.Windows[0].Used != 3 || usage.Windows[0].Remaining != 0 {
		t.Fatalf("GET /admin/limits: %s; want distinct, used 3, remaining 0", u)
	}
	if r := adminDo(t, g, "DELETE", "/admin/limits?limit=key-sharing&key=api_key:shared-key", ""); r.Status != 200 {
		t.Fatalf("DELETE /admin/limits: %s", r)
	}
	wantStatus(t, get(t, c, g.url("/api/x"), from("shared-key", "10.0.4.5")), 200, "a fourth network after the reset")
	// The dashboard names what the limit counts.
	if d := adminDo(t, g, "GET", "/admin/ui/data", ""); d.Status != 200 || !strings.Contains(string(d.Body), `"distinct":"ip/24"`) {
		t.Fatalf("GET /admin/ui/data: %s; want the limit's distinct ip/24", d)
	}
}

func distinctStuffing(t *testing.T, g *gw, c *http.Client) {
	as := func(ip, user string) map[string]string {
		h := map[string]string{"X-Forwarded-For": ip}
		if user != "" {
			h["X-Username"] = user
		}
		return h
	}
	for i := range 5 {
		wantStatus(t, get(t, c, g.url("/login"), as("10.9.0.1", fmt.Sprintf("user%d", i))), 200, "username "+strconv.Itoa(i))
	}
	wantStatus(t, get(t, c, g.url("/login"), as("10.9.0.1", "user5")), 429, "a sixth username")
	wantStatus(t, get(t, c, g.url("/login"), as("10.9.0.1", "user0")), 200, "a tried username again")
	wantStatus(t, get(t, c, g.url("/login"), as("10.9.0.1", "")), 401, "no username")
	wantStatus(t, get(t, c, g.url("/login"), as("10.9.0.2", "user5")), 200, "the sixth username from another IP")
}

func distinctScraping(t *testing.T, g *gw, c *http.Client) {
	hdr := map[string]string{"X-API-Key": "scraper"}
	for i := range 190 {
		wantStatus(t, get(t, c, g.url(fmt.Sprintf("/pages/%d", i)), hdr), 200, "distinct path "+strconv.Itoa(i))
	}
	// 200 ± 2%: of the next 50 new paths, about 10 are admitted.
	admitted := 0
	for i := 190; i < 240; i++ {
		r := get(t, c, g.url(fmt.Sprintf("/pages/%d", i)), hdr)
		switch r.Status {
		case 200:
			admitted++
		case 429:
		default:
			t.Fatalf("new path %d: %s", i, r)
		}
	}
	if admitted < 6 || admitted > 14 {
		t.Fatalf("past 190 distinct paths, %d of 50 new ones admitted; want about 10 (a limit of 200 within 2%%)", admitted)
	}
	for i := 0; i < 190; i += 10 {
		wantStatus(t, get(t, c, g.url(fmt.Sprintf("/pages/%d", i)), hdr), 200, "a fetched path again")
	}
	wantStatus(t, get(t, c, g.url("/pages/new-one"), map[string]string{"X-API-Key": "reader"}), 200, "another client")
}

// TestDistinctValidate: `gateway validate` prints a distinct limit's most
// memory per key (the estimated layout: registers and a bitmap per
// sub-window, about 149 KB at four), and refuses a limit past 10,000 with
// the field path.
func TestDistinctValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, rate string) string {
		p := dir + "/" + name
		cfg := "[server]\nlisten = \"127.0.0.1:0\"\n\n[[limits]]\nname = \"stuffing\"\nalgorithm = \"distinct\"\ndistinct = \"header:X-Username\"\nby = [\"ip\"]\nrates = [\"" + rate + "\"]\n\n" +
			"[[routes]]\nname = \"login\"\npath_prefix = \"/login\"\nrespond = { status = 200, body = \"ok\" }\nlimits = [\"stuffing\"]\n"
		writeFileAtomic(t, p, []byte(cfg))
		return p
	}
	code, stdout, stderr := runGateway(t, nil, "validate", "--config", write("ok.toml", "5/10m"))
	if code != 0 || !strings.Contains(stdout, `limit "stuffing" distinct: up to 149062 bytes a key at worst`) {
		t.Fatalf("validate: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	code, stdout, stderr = runGateway(t, nil, "validate", "--config", write("big.toml", "20000/10m"))
	if code == 0 || !strings.Contains(stdout+stderr, "limits[0]") || !strings.Contains(stdout+stderr, "at most 10000") {
		t.Fatalf("validate of a limit of 20000: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}
