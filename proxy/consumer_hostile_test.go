package proxy_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

const hostileSecret = "a-test-secret-of-at-least-32-bytes!!"

// token signs claims with HS256 and secret.
func token(claims map[string]any, secret string) string {
	enc := base64.RawURLEncoding
	h := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	c, _ := json.Marshal(claims)
	signed := h + "." + enc.EncodeToString(c)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(signed))
	return "Bearer " + signed + "." + enc.EncodeToString(m.Sum(nil))
}

func hexSum(key string) string {
	s := sha256.Sum256([]byte(key))
	return hex.EncodeToString(s[:])
}

// consumerPolicy: acme (pro, key "acme-key"), bob (no plan, key
// "bob-key"); one limit by consumer, 1/minute, pro 3/minute; JWT on, with
// client_id naming a consumer and plan naming a plan; the API key also
// read from ?api_key=; consumer and plan forwarded as X-Consumer, X-Plan.
func consumerPolicy(t *testing.T, upstream string) *policy.Policy {
	t.Helper()
	c := config.Default()
	c.Identity.APIKeyQuery = "api_key"
	c.Identity.JWT.HS256SecretEnv = "JWT_SECRET"
	c.Consumers = config.ConsumersConfig{File: "consumers.toml", JWTClaim: "client_id", PlanClaim: "plan",
		ForwardHeaders: config.ForwardHeadersConfig{Consumer: "X-Consumer", Plan: "X-Plan"}}
	c.Plans = []config.PlanConfig{{Name: "pro"}}
	l := limit("per-consumer", "fixed_window", "1/minute")
	l.By = []string{"consumer"}
	l.PlanRates = map[string][]string{"pro": {"3/minute"}}
	c.Limits = []config.LimitConfig{l}
	c.Routes = []config.RouteConfig{route("api", "/", upstream, "per-consumer")}
	reg := `[[consumers]]
name = "acme"
plan = "pro"
api_keys_sha256 = ["` + hexSum("acme-key") + `"]
[[consumers]]
name = "bob"
api_keys_sha256 = ["` + hexSum("bob-key") + `"]
`
	p, err := policy.Compile(c, func(k string) string {
		if k == "JWT_SECRET" {
			return hostileSecret
		}
		return ""
	}, func(name string) ([]byte, error) {
		if name == "consumers.toml" {
			return []byte(reg), nil
		}
		return nil, io.ErrUnexpectedEOF
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConsumerHostileInputs: requests that would dodge a per-consumer
// limit, spoof a consumer or a plan, or make the gateway spend on keys it
// does not know. Each row runs on a fresh gateway and memory store; it
// sends five requests and checks the first answer, how many of the five
// were admitted, and what the upstream was told.
func TestConsumerHostileInputs(t *testing.T) {
	good := map[string]any{"sub": "u1"}
	with := func(k string, v any) map[string]any {
		m := map[string]any{"sub": "u1"}
		m[k] = v
		return m
	}
	for _, tc := range []struct {
		name     string
		header   http.Header
		query    string
		status   int    // the first answer
		admitted int    // of five
		consumer string // what the upstream was told
		plan     string
	}{
		{"known key: the plan's budget", http.Header{"X-Api-Key": {"acme-key"}}, "", 200, 3, "acme", "pro"},
		{"surrounding spaces are trimmed", http.Header{"X-Api-Key": {" acme-key\t"}}, "", 200, 3, "acme", "pro"},
		{"another case is another key", http.Header{"X-Api-Key": {"ACME-KEY"}}, "", 401, 0, "", ""},
		{"header name in lower case", http.Header{"x-api-key": {"acme-key"}}, "", 200, 3, "acme", "pro"},
		{"two key headers: the first decides (unknown)", http.Header{"X-Api-Key": {"nope", "acme-key"}}, "", 401, 0, "", ""},
		{"two key headers: the first decides (known)", http.Header{"X-Api-Key": {"acme-key", "nope"}}, "", 200, 3, "acme", "pro"},
		{"the registry's hash is not the key", http.Header{"X-Api-Key": {hexSum("acme-key")}}, "", 401, 0, "", ""},
		{"a huge key is an unknown key, not no key", http.Header{"X-Api-Key": {strings.Repeat("k", 5000)}}, "", 401, 0, "", ""},
		{"an empty key is no key", http.Header{"X-Api-Key": {""}}, "", 200, 1, "", ""},
		{"key in the query", nil, "api_key=acme-key", 200, 3, "acme", "pro"},
		{"unknown key in the query", nil, "api_key=nope", 401, 0, "", ""},
		{"header beats query", http.Header{"X-Api-Key": {"nope"}}, "api_key=acme-key", 401, 0, "", ""},
		{"spoofed consumer headers are removed", http.Header{"X-Consumer": {"acme"}, "X-Plan": {"pro"}, "X_consumer": {"acme"}}, "", 200, 1, "", ""},
		{"spoofed headers beside a real key", http.Header{"X-Api-Key": {"bob-key"}, "X-Consumer": {"acme"}, "X-Plan": {"pro"}}, "", 200, 1, "bob", ""},
		{"verified token with a plan claim", http.Header{"Authorization": {token(with("plan", "pro"), hostileSecret)}}, "", 200, 3, "", "pro"},
		{"unverified token's plan claim is not read", http.Header{"Authorization": {token(with("plan", "pro"), "another-secret-of-32-bytes-or-more!!")}}, "", 200, 1, "", ""},
		{"a token cannot invent a plan", http.Header{"Authorization": {token(with("plan", "platinum"), hostileSecret)}}, "", 200, 1, "", ""},
		{"a plan claim that is not a string", http.Header{"Authorization": {token(with("plan", []string{"pro"}), hostileSecret)}}, "", 200, 1, "", ""},
		{"verified token naming a consumer", http.Header{"Authorization": {token(with("client_id", "acme"), hostileSecret)}}, "", 200, 3, "acme", "pro"},
		{"unverified token naming a consumer", http.Header{"Authorization": {token(with("client_id", "acme"), "another-secret-of-32-bytes-or-more!!")}}, "", 200, 1, "", ""},
		{"key and token: the token's user decides (sources: user first)", http.Header{"X-Api-Key": {"acme-key"}, "Authorization": {token(good, hostileSecret)}}, "", 200, 1, "", ""},
		{"key and a token naming another consumer: the token decides", http.Header{"X-Api-Key": {"bob-key"}, "Authorization": {token(with("client_id", "acme"), hostileSecret)}}, "", 200, 3, "acme", "pro"},
		// The wall clock is read for tokens only (identityClock): a token
		// past its exp, or before its nbf, names nobody.
		{"expired token naming a consumer", http.Header{"Authorization": {token(map[string]any{"sub": "u1", "client_id": "acme",
			"exp": time.Now().Add(-time.Minute).Unix()}, hostileSecret)}}, "", 200, 1, "", ""},
		{"expired token with a plan claim", http.Header{"Authorization": {token(map[string]any{"sub": "u1", "plan": "pro",
			"exp": time.Now().Add(-time.Minute).Unix()}, hostileSecret)}}, "", 200, 1, "", ""},
		{"token naming a consumer, not valid before an hour from now", http.Header{"Authorization": {token(map[string]any{"sub": "u1",
			"client_id": "acme", "nbf": time.Now().Add(time.Hour).Unix()}, hostileSecret)}}, "", 200, 1, "", ""},
		{"an unknown key beside a verified token is still rejected", http.Header{"X-Api-Key": {"nope"}, "Authorization": {token(good, hostileSecret)}}, "", 401, 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, nil)
			p := consumerPolicy(t, up.URL)
			h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
			if err != nil {
				t.Fatal(err)
			}
			srv := gateway(t, h)
			admitted, first := 0, 0
			for i := range 5 {
				req, _ := http.NewRequest("GET", srv.URL+"/x?"+tc.query, nil)
				for k, vs := range tc.header {
					req.Header[k] = vs
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if i == 0 {
					first = resp.StatusCode
					if first == 401 && (resp.Header.Get("WWW-Authenticate") == "" || !strings.Contains(string(body), "unknown API key")) {
						t.Errorf("401 without challenge or problem: %v %s", resp.Header, body)
					}
				}
				if resp.StatusCode == 200 {
					admitted++
				}
			}
			if first != tc.status || admitted != tc.admitted {
				t.Errorf("first answer %d, admitted %d of 5; want %d and %d", first, admitted, tc.status, tc.admitted)
			}
			if tc.admitted == 0 {
				if up.hits.Load() != 0 {
					t.Errorf("the upstream saw %d requests", up.hits.Load())
				}
				return
			}
			hdr, _ := up.last()
			if got := strings.Join(hdr.Values("X-Consumer"), ","); got != tc.consumer {
				t.Errorf("upstream X-Consumer %q, want %q", got, tc.consumer)
			}
			if got := strings.Join(hdr.Values("X-Plan"), ","); got != tc.plan {
				t.Errorf("upstream X-Plan %q, want %q", got, tc.plan)
			}
			for k := range hdr {
				if strings.EqualFold(strings.ReplaceAll(k, "_", "-"), "x-consumer") && k != "X-Consumer" {
					t.Errorf("upstream got the respelled header %q", k)
				}
			}
		})
	}
}

// TestExpiredTokenEveryPath: a verified token past its exp names nobody on
// every path that resolves an identity, each reading the wall clock only
// because tokens are verified: the live limits, a quota route's answer
// and a candidate configuration's decision. A fresh token is the user on
// each.
func TestExpiredTokenEveryPath(t *testing.T) {
	c := config.Default()
	c.Identity.JWT.HS256SecretEnv = "JWT_SECRET"
	l := limit("per-user", "fixed_window", "100/minute")
	l.By, l.OnMissing = []string{"user"}, "reject"
	c.Limits = []config.LimitConfig{l}
	up := newUpstream(t, nil)
	quota := route("quota", "/quota", "")
	quota.Respond = &config.RespondConfig{Quota: true}
	c.Routes = []config.RouteConfig{quota, route("api", "/api", up.URL, "per-user")}
	p, err := policy.Compile(c, func(k string) string {
		if k == "JWT_SECRET" {
			return hostileSecret
		}
		return ""
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var kinds []string
	h.SetCandidate(&proxy.Candidate{Policy: p, Store: memstore.New(memstore.Options{}), Record: func(o *proxy.CandidateOutcome) {
		mu.Lock()
		kinds = append(kinds, o.ClientKind)
		mu.Unlock()
	}})
	for _, tc := range []struct {
		name string
		exp  time.Duration
		want string
	}{
		{"expired a minute ago", -time.Minute, "ip"},
		{"expired a second ago", -time.Second, "ip"},
		{"valid for an hour", time.Hour, "user"},
	} {
		bearer := token(map[string]any{"sub": "u1", "exp": time.Now().Add(tc.exp).Unix()}, hostileSecret)
		// The limit by user answers 401 without one (on_missing).
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/api/x", nil)
		r.Header.Set("Authorization", bearer)
		h.ServeHTTP(w, r)
		if live := map[bool]string{true: "user", false: "ip"}[w.Code == http.StatusOK]; live != tc.want {
			t.Errorf("%s: live status %d, want the identity %s", tc.name, w.Code, tc.want)
		}
		w = httptest.NewRecorder()
		r = httptest.NewRequest("GET", "/quota", nil)
		r.Header.Set("Authorization", bearer)
		h.ServeHTTP(w, r)
		var ans proxy.QuotaAnswer
		if err := json.Unmarshal(w.Body.Bytes(), &ans); err != nil || ans.Client != tc.want {
			t.Errorf("%s: quota answer %d %s (%v), want client %q", tc.name, w.Code, w.Body, err, tc.want)
		}
		mu.Lock()
		if len(kinds) == 0 || kinds[0] != tc.want {
			t.Errorf("%s: candidate identities %q, want %q first", tc.name, kinds, tc.want)
		}
		kinds = kinds[:0]
		mu.Unlock()
	}
}
