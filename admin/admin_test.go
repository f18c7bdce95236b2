package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/policytest"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

var t0 = time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)

type fixture struct {
	srv     *httptest.Server
	store   *memstore.Store
	gateway *proxy.Handler
	reloads int
	now     time.Time
}

// searchPolicy has one limit, "search" (3/minute and 10/hour per client),
// on a route that answers 200 itself.
func searchPolicy(t *testing.T) *policy.Policy {
	return policytest.Compile(t, func(c *config.Config) {
		l := config.DefaultLimit()
		l.Name, l.Algorithm, l.Rates = "search", "fixed_window", []string{"3/1m", "10/1h"}
		c.Limits = []config.LimitConfig{l}
		rt := config.DefaultRoute()
		rt.Name, rt.PathPrefix, rt.Limits = "demo", "/", []string{"search"}
		rt.Respond = &config.RespondConfig{Status: 200, Body: "ok"}
		c.Routes = []config.RouteConfig{rt}
	})
}

func newFixture(t *testing.T, token string) *fixture {
	t.Helper()
	f := &fixture{store: memstore.New(memstore.Options{MaxKeys: 1000}), now: t0}
	t.Cleanup(func() { f.store.Close() })
	p := searchPolicy(t)
	gw, err := proxy.New(p, proxy.Options{Store: f.store, Now: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	f.gateway = gw
	h := Handler(Options{
		Config: func() any {
			c := p.Config
			c.Store.Redis.URL, c.Store.Redis.PasswordEnv = "redis://app:hunter2@10.0.0.5:6379/0", "REDIS_PW"
			c.Identity.JWT.HS256SecretEnv = "JWT_SECRET"
			return struct {
				config.Config
				Token policy.Secret `json:"token"`
			}{c, "s3cr3t"}
		},
		Store:  f.store,
		Policy: gw.Policy,
		Reload: func() error {
			f.reloads++
			if f.reloads > 1 {
				return errors.New("routes[0].limits[0]: unknown limit \"serch\"")
			}
			return nil
		},
		Token: token,
		Now:   func() time.Time { return f.now },
	})
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

// hit sends one request with API key key through the gateway and reports
// whether it was allowed.
func (f *fixture) hit(t *testing.T, key string) bool {
	t.Helper()
	r := httptest.NewRequest("GET", "/x", nil)
	r.Header.Set("X-API-Key", key)
	w := httptest.NewRecorder()
	f.gateway.ServeHTTP(w, r)
	switch w.Code {
	case 200:
		return true
	case 429:
		return false
	}
	t.Fatalf("status %d: %s", w.Code, w.Body)
	return false
}

func (f *fixture) do(t *testing.T, method, path, token string) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(b) > 0 && method != http.MethodHead {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: body %q is not JSON: %v", method, path, b, err)
		}
	}
	return resp.StatusCode, resp.Header, m
}

func TestResetUnblocksClient(t *testing.T) {
	f := newFixture(t, "")
	for i := 0; i < 3; i++ {
		if !f.hit(t, "alice") {
			t.Fatalf("hit %d denied", i)
		}
	}
	if f.hit(t, "alice") {
		t.Fatal("4th hit allowed by a 3/minute limit")
	}
	f.hit(t, "bob")

	code, _, body := f.do(t, "GET", "/admin/limits?limit=search&key=alice", "")
	if code != 200 {
		t.Fatalf("GET limits = %d %v", code, body)
	}
	ws := body["windows"].([]any)
	w0, w1 := ws[0].(map[string]any), ws[1].(map[string]any)
	if body["limit"] != "search" || body["mode"] != "enforce" || body["algorithm"] != "fixed_window" || len(fmt.Sprint(body["counter_key"])) != 46 || strings.Contains(fmt.Sprint(body["counter_key"]), "alice") ||
		w0["used"] != 3.0 || w0["remaining"] != 0.0 || w0["limit"] != 3.0 || w0["window_seconds"] != 60.0 || w0["reset_seconds"] != 60.0 ||
		w1["used"] != 3.0 || w1["remaining"] != 7.0 || w1["rate"] != "10/1h0m0s" {
		t.Errorf("usage = %v", body)
	}

	code, _, body = f.do(t, "DELETE", "/admin/limits?limit=search&key=alice", "")
	if code != 200 || body["reset"] != true {
		t.Fatalf("DELETE limits = %d %v", code, body)
	}
	if !f.hit(t, "alice") {
		t.Error("alice still denied after the reset")
	}
	_, _, body = f.do(t, "GET", "/admin/limits?limit=search&key=bob", "")
	if w := body["windows"].([]any)[0].(map[string]any); w["used"] != 1.0 {
		t.Errorf("bob's counters changed by alice's reset: %v", body)
	}
}

func TestErrors(t *testing.T) {
	f := newFixture(t, "")
	for _, tc := range []struct {
		method, path string
		code         int
		detail       string
	}{
		{"GET", "/admin/limits?limit=serch&key=a", 404, `limit "serch": not found`},
		{"GET", "/admin/limits?key=a", 400, `"limit" is required`},
		{"GET", "/admin/limits?limit=search", 400, `"key" is required`},
		{"DELETE", "/admin/limits?limit=search&key=ip:a", 400, "not an IP address"},
		{"GET", "/admin/limits?limit=search&key=", 400, "keyed by a client identity"},
		{"PUT", "/admin/limits?limit=search&key=a", 405, "not allowed"},
		{"GET", "/admin/reload", 405, "not allowed"},
		{"GET", "/admin/nope", 404, "no admin route"},
	} {
		code, h, body := f.do(t, tc.method, tc.path, "")
		if code != tc.code || body["status"] != float64(tc.code) || !strings.Contains(fmt.Sprint(body["detail"]), tc.detail) ||
			h.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s = %d %s %v, want %d problem with %q", tc.method, tc.path, code, h.Get("Content-Type"), body, tc.code, tc.detail)
		}
	}
}

func TestReload(t *testing.T) {
	f := newFixture(t, "")
	if code, _, body := f.do(t, "POST", "/admin/reload", ""); code != 200 || body["reloaded"] != true {
		t.Errorf("first reload = %d %v", code, body)
	}
	code, _, body := f.do(t, "POST", "/admin/reload", "")
	if code != 422 || !strings.Contains(body["detail"].(string), `unknown limit \"serch\"`) && !strings.Contains(body["detail"].(string), `unknown limit "serch"`) {
		t.Errorf("bad reload = %d %v", code, body)
	}
}

func TestConfigRedacted(t *testing.T) {
	f := newFixture(t, "")
	req, _ := http.NewRequest("GET", f.srv.URL+"/admin/config", nil)
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	s := string(b)
	if resp.StatusCode != 200 || strings.Contains(s, "hunter2") || strings.Contains(s, "s3cr3t") {
		t.Fatalf("config = %d %s", resp.StatusCode, s)
	}
	for _, want := range []string{`"password_env": "REDIS_PW"`, `"hs256_secret_env": "JWT_SECRET"`, `redis://app:REDACTED@10.0.0.5:6379/0`, `"token": "REDACTED"`} {
		if !strings.Contains(s, want) {
			t.Errorf("config lacks %s:\n%s", want, s)
		}
	}
}

func TestToken(t *testing.T) {
	f := newFixture(t, "t0ken")
	for _, tc := range []struct {
		auth string
		code int
	}{
		{"", 401},
		{"Bearer wrong", 401},
		{"Bearer t0ke", 401},
		{"Basic t0ken", 401},
		{"Bearer ", 401},
		{"Bearer t0ken", 200},
		{"bearer t0ken", 200},
	} {
		req, _ := http.NewRequest("GET", f.srv.URL+"/admin/config", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("Authorization %q = %d, want %d", tc.auth, resp.StatusCode, tc.code)
		}
		if tc.code == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("401 without a Bearer challenge")
		}
	}
}

func TestNotConfigured(t *testing.T) {
	srv := httptest.NewServer(Handler(Options{}))
	defer srv.Close()
	for _, p := range []string{"/admin/config", "/admin/limits?limit=a&key=b"} {
		resp, err := srv.Client().Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 501 {
			t.Errorf("GET %s with no callbacks = %d, want 501", p, resp.StatusCode)
		}
	}
}
