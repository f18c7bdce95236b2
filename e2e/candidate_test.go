package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// candidateBody is a configuration whose per-key limit allows n requests
// an hour; live and candidate differ only in n, so the limit keeps its ID
// (and its counters) across a promotion.
func candidateBody(n int) string {
	return fmt.Sprintf(`[[limits]]
name = "per-key"
algorithm = "sliding_window_log"
rates = ["%d/hour"]
by = ["client"]

[[routes]]
name = "api"
path_prefix = "/api"
respond = { status = 200, body = "ok" }
limits = ["per-key"]
`, n)
}

// candidateReport is the part of GET /admin/candidate the test reads.
type candidateReport struct {
	Requests     int64 `json:"requests"`
	AgreeAllowed int64 `json:"agree_allowed"`
	ExtraDenials int64 `json:"extra_denials"`
	FewerDenials int64 `json:"fewer_denials"`
	StoreErrors  int64 `json:"store_errors"`
	Limits       map[string]struct {
		ExtraDenials int64 `json:"extra_denials"`
		FewerDenials int64 `json:"fewer_denials"`
	} `json:"limits"`
	TopClients []struct {
		Client string `json:"client"`
		Extra  int64  `json:"extra_denials"`
	} `json:"top_clients"`
	FirstDiverging []struct {
		Path            string   `json:"path"`
		CandidateDenied []string `json:"candidate_denied"`
	} `json:"first_diverging"`
}

// TestCandidateConfig: a gateway allowing 10 requests an hour per key runs
// a candidate allowing 4 (--candidate). Replayed traffic — key a 6
// requests, b 3, c 8 — is all allowed live; the candidate reports exactly
// the extra denials a hand count gives (a: 2, c: 4), per limit, per
// client (c first) and as first diverging requests, without a single 429
// reaching a client. The admin token is required. Promotion under
// concurrent traffic fails no request, and keeps the live counters of the
// unchanged limit: a, having used 6, is denied at once under the new 4.
// On Redis the candidate's counters live under "<prefix>candidate:" with
// an expiry. Both stores.
func TestCandidateConfig(t *testing.T) {
	stores(t, func(t *testing.T, redis string) {
		const token = "cand-secret"
		dir := t.TempDir()
		next := filepath.Join(dir, "next.toml")
		// The candidate file is a whole configuration; its server and
		// store sections are not used (the live ones are).
		if err := os.WriteFile(next, []byte(candidateBody(4)), 0o600); err != nil {
			t.Fatal(err)
		}
		g := startGateway(t, "candidate.toml.tmpl", gwOpts{Data: map[string]any{"Redis": redis, "Body": candidateBody(10)},
			Env: []string{"TG_CAND_TOKEN=" + token}, Args: []string{"--candidate", next}})
		c := &http.Client{Timeout: 10 * time.Second}
		for _, tr := range []struct {
			key string
			n   int
		}{{"a", 6}, {"b", 3}, {"c", 8}} {
			for i := 0; i < tr.n; i++ {
				if r := get(t, c, g.url("/api/x"), map[string]string{"X-API-Key": tr.key}); r.Status != 200 {
					t.Fatalf("key %s request %d: status %d: the candidate must never change a response", tr.key, i+1, r.Status)
				}
			}
		}
		if r := adminDo(t, g, "GET", "/admin/candidate", ""); r.Status != http.StatusUnauthorized {
			t.Fatalf("GET /admin/candidate without the token: %d, want 401", r.Status)
		}
		var rep candidateReport
		// The candidate decides after each response: the last one may
		// still be counting when the report is read.
		deadline := time.Now().Add(5 * time.Second)
		for {
			r := adminDo(t, g, "GET", "/admin/candidate", token)
			if r.Status != 200 {
				t.Fatalf("GET /admin/candidate: %d %s", r.Status, r.Body)
			}
			rep = candidateReport{}
			if err := json.Unmarshal(r.Body, &rep); err != nil {
				t.Fatal(err)
			}
			if rep.Requests >= 17 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if rep.Requests != 17 || rep.ExtraDenials != 6 || rep.FewerDenials != 0 || rep.AgreeAllowed != 11 || rep.StoreErrors != 0 {
			t.Fatalf("report %+v: want 17 requests, 6 extra denials (a: 2, c: 4), 11 agreed, none fewer", rep)
		}
		if d := rep.Limits["per-key"]; d.ExtraDenials != 6 || d.FewerDenials != 0 {
			t.Fatalf("per-key: %+v, want 6 extra denials", d)
		}
		if len(rep.TopClients) != 2 || rep.TopClients[0].Extra != 4 || rep.TopClients[1].Extra != 2 {
			t.Fatalf("top clients %+v: want c (4) then a (2)", rep.TopClients)
		}
		for _, tc := range rep.TopClients {
			if tc.Client == "a" || tc.Client == "c" || len(tc.Client) != 16 {
				t.Fatalf("client %q: identities must appear hashed", tc.Client)
			}
		}
		if len(rep.FirstDiverging) != 6 || rep.FirstDiverging[0].Path != "/api/x" ||
			strings.Join(rep.FirstDiverging[0].CandidateDenied, ",") != "per-key" {
			t.Fatalf("first diverging %+v: want the 6 extra denials", rep.FirstDiverging)
		}
		if redis != "" {
			keys, err := redistest.Do(redis, "KEYS", "tgc:candidate:*")
			ks, _ := keys.([]any)
			if err != nil || len(ks) == 0 {
				t.Fatalf("no candidate keys under tgc:candidate: (%v, %v)", keys, err)
			}
			for _, k := range ks {
				ttl, err := redistest.Do(redis, "PTTL", fmt.Sprint(k))
				if n, ok := ttl.(int64); err != nil || !ok || n <= 0 {
					t.Fatalf("candidate key %v: PTTL %v %v, want an expiry", k, ttl, err)
				}
			}
		}

		// Promote while clients send: no request fails.
		var failed atomic.Int64
		var sent atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					r, err := tryDo(c, "GET", g.url("/api/y"), map[string]string{"X-API-Key": fmt.Sprintf("w%d-%d", w, i%8)}, nil)
					sent.Add(1)
					if err != nil || (r.Status != 200 && r.Status != 429) {
						failed.Add(1)
					}
				}
			}()
		}
		time.Sleep(100 * time.Millisecond)
		r := adminDo(t, g, "POST", "/admin/candidate/promote", token)
		time.Sleep(100 * time.Millisecond)
		close(stop)
		wg.Wait()
		if r.Status != 200 {
			t.Fatalf("promote: %d %s", r.Status, r.Body)
		}
		if failed.Load() != 0 || sent.Load() == 0 {
			t.Fatalf("%d of %d requests failed around the promotion", failed.Load(), sent.Load())
		}
		// a used 6 of the live limit: under 4 an hour it is denied at
		// once, its counter kept; b used 3 and has one left.
		if r := get(t, c, g.url("/api/x"), map[string]string{"X-API-Key": "a"}); r.Status != 429 {
			t.Fatalf("a after promotion: %d, want 429 (its counter kept)", r.Status)
		}
		if r := get(t, c, g.url("/api/x"), map[string]string{"X-API-Key": "b"}); r.Status != 200 {
			t.Fatalf("b after promotion: %d, want 200 (4th of 4)", r.Status)
		}
		if r := get(t, c, g.url("/api/x"), map[string]string{"X-API-Key": "b"}); r.Status != 429 {
			t.Fatalf("b after promotion: %d, want 429 (5th of 4)", r.Status)
		}
		if r := adminDo(t, g, "GET", "/admin/candidate", token); r.Status != 404 {
			t.Fatalf("GET /admin/candidate after promotion: %d, want 404", r.Status)
		}
	})
}

// TestCandidateAdminHostile: the admin inputs of docs/hostile-inputs.md's
// candidate table, through the binary: a body over 1 MiB is 413, an
// invalid configuration 400 with its field path (the running candidate
// unchanged), no token 401, wrong methods 405; a valid body replaces the
// candidate, DELETE removes it.
func TestCandidateAdminHostile(t *testing.T) {
	t.Parallel()
	const token = "cand-secret"
	g := startGateway(t, "candidate.toml.tmpl", gwOpts{Data: map[string]any{"Redis": "", "Body": candidateBody(10)},
		Env: []string{"TG_CAND_TOKEN=" + token}})
	c := &http.Client{Timeout: 10 * time.Second}
	post := func(path string, body []byte, tok string) *response {
		hdr := map[string]string{"Content-Type": "application/toml"}
		if tok != "" {
			hdr["Authorization"] = "Bearer " + tok
		}
		r, err := tryDo(c, "POST", g.adminURL(path), hdr, body)
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		return r
	}
	if r := post("/admin/candidate", []byte(candidateBody(4)), ""); r.Status != http.StatusUnauthorized {
		t.Fatalf("POST without the token: %d, want 401", r.Status)
	}
	if r := adminDo(t, g, "GET", "/admin/candidate", token); r.Status != 404 {
		t.Fatalf("GET without a candidate: %d, want 404", r.Status)
	}
	if r := post("/admin/candidate", []byte(candidateBody(4)), token); r.Status != http.StatusCreated {
		t.Fatalf("POST a valid candidate: %d %s", r.Status, r.Body)
	}
	huge := append([]byte("# "), make([]byte, 1<<20)...)
	for i := range huge[2:] {
		huge[2+i] = 'x'
	}
	if r := post("/admin/candidate", huge, token); r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST 1 MiB + 2: %d, want 413", r.Status)
	}
	bad := strings.Replace(candidateBody(4), `rates = ["4/hour"]`, `rates = ["4/fortnight"]`, 1)
	if r := post("/admin/candidate", []byte(bad), token); r.Status != http.StatusBadRequest ||
		!strings.Contains(string(r.Body), "limits[0].rates[0]") {
		t.Fatalf("POST an invalid candidate: %d %s, want 400 naming limits[0].rates[0]", r.Status, r.Body)
	}
	if r := post("/admin/candidate", []byte("[[routes]\n"), token); r.Status != http.StatusBadRequest {
		t.Fatalf("POST non-TOML: %d %s, want 400", r.Status, r.Body)
	}
	// The valid candidate still runs after the refused bodies.
	get(t, c, g.url("/api/x"), map[string]string{"X-API-Key": "k"})
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := adminDo(t, g, "GET", "/admin/candidate", token)
		if r.Status != 200 {
			t.Fatalf("GET after refused bodies: %d %s: the valid candidate must keep running", r.Status, r.Body)
		}
		if strings.Contains(string(r.Body), `"requests": 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the candidate did not count the request: %s", r.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := adminDo(t, g, "PUT", "/admin/candidate", token); r.Status != 405 {
		t.Fatalf("PUT: %d, want 405", r.Status)
	}
	if r := adminDo(t, g, "GET", "/admin/candidate/promote", token); r.Status != 405 {
		t.Fatalf("GET promote: %d, want 405", r.Status)
	}
	if r := adminDo(t, g, "DELETE", "/admin/candidate", token); r.Status != 204 {
		t.Fatalf("DELETE: %d, want 204", r.Status)
	}
	if r := post("/admin/candidate/promote", nil, token); r.Status != 404 {
		t.Fatalf("promote without a candidate: %d, want 404", r.Status)
	}
}

// TestCandidateFilesOutside: a posted candidate cannot make the gateway
// read a file outside the live configuration's directory, nor learn
// whether one exists or its length: an outside secret that exists, one
// that does not, /etc/shadow, a `..` escape and a symlink out of the
// directory get the same 400 naming the setting. A FIFO inside the
// directory is refused at once (its open used to hang the request), and
// a secret inside is read. A candidate's access_log path is never
// opened, even once promoted (it takes effect on restart, which reads
// the file on disk).
func TestCandidateFilesOutside(t *testing.T) {
	t.Parallel()
	const token = "cand-secret"
	g := startGateway(t, "candidate.toml.tmpl", gwOpts{Data: map[string]any{"Redis": "", "Body": candidateBody(10)},
		Env: []string{"TG_CAND_TOKEN=" + token}})
	confDir := filepath.Dir(g.Config)
	outside := t.TempDir()
	secret := filepath.Join(outside, "hs256")
	if err := os.WriteFile(secret, []byte("a 25 byte secret, outside"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(confDir, "escape")); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(confDir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "hs256"), []byte("an inside secret of thirty-two bytes or more"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	post := func(path string, body string) *response {
		t.Helper()
		r, err := tryDo(c, "POST", g.adminURL(path), map[string]string{"Content-Type": "application/toml",
			"Authorization": "Bearer " + token}, []byte(body))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		return r
	}
	withSecret := func(file string) string {
		return candidateBody(4) + fmt.Sprintf("\n[identity.jwt]\nhs256_secret_file = %q\n", file)
	}
	const want = "identity.jwt.hs256_secret_file: outside the configuration's directory"
	var first string
	for _, file := range []string{secret, filepath.Join(outside, "missing"), "/etc/shadow",
		filepath.Join(confDir, "..", filepath.Base(outside), "hs256"), filepath.Join(confDir, "escape")} {
		r := post("/admin/candidate", withSecret(file))
		body := string(r.Body)
		if r.Status != http.StatusBadRequest || !strings.Contains(body, want) {
			t.Fatalf("hs256_secret_file = %q: %d %s, want 400 with %q", file, r.Status, body, want)
		}
		if strings.Contains(body, "25 bytes") || strings.Contains(body, "no such file") || strings.Contains(body, outside) {
			t.Fatalf("hs256_secret_file = %q: the answer says something of the file: %s", file, body)
		}
		if first == "" {
			first = body
		} else if body != first {
			t.Fatalf("answers differ, so they tell files apart:\n%s\n%s", first, body)
		}
	}
	if r := post("/admin/candidate", withSecret(fifo)); r.Status != http.StatusBadRequest ||
		!strings.Contains(string(r.Body), "identity.jwt.hs256_secret_file: cannot be read") {
		t.Fatalf("a FIFO: %d %s, want 400 at once", r.Status, r.Body)
	}
	if r := post("/admin/candidate", withSecret(filepath.Join(confDir, "hs256"))); r.Status != http.StatusCreated {
		t.Fatalf("a secret inside the directory: %d %s, want 201", r.Status, r.Body)
	}

	logPath := filepath.Join(outside, "written.log")
	body := candidateBody(4) + fmt.Sprintf("\n[access_log]\npath = %q\n", logPath)
	if r := post("/admin/candidate", body); r.Status != http.StatusCreated {
		t.Fatalf("a candidate with an access log: %d %s", r.Status, r.Body)
	}
	get(t, c, g.url("/api/x"), map[string]string{"X-API-Key": "k"})
	if r := post("/admin/candidate/promote", ""); r.Status != http.StatusOK {
		t.Fatalf("promote: %d %s", r.Status, r.Body)
	}
	get(t, c, g.url("/api/x"), map[string]string{"X-API-Key": "k"})
	if _, err := os.Stat(logPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the candidate's access log %s was created (%v)", logPath, err)
	}
}
