package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// overrideHostileExtra adds a limit keyed by nothing (one shared counter),
// a concurrency limit and an exact log, each on its own route.
const overrideHostileExtra = `
[[limits]]
name = "shared"
rates = ["100/minute"]
by = []

[[limits]]
name = "slots"
algorithm = "concurrency"
max_in_flight = 2
by = ["client"]

[[routes]]
name = "shared"
path_prefix = "/shared"
respond = { status = 200, body = "shared" }
limits = ["shared", "slots"]
`

// TestOverridesHostile: every body, token and date an admin client could
// send to /admin/overrides that is not an override is answered 400, 401,
// 413 or 422 with problem+json naming the field, and stores nothing.
func TestOverridesHostile(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	const token = "override-admin-token"
	g := startGateway(t, "ops.toml.tmpl", gwOpts{
		Data: opsData(t, up, "TokenEnv", "OPS_ADMIN_TOKEN", "Extra", overrideHostileExtra),
		Env:  []string{"OPS_ADMIN_TOKEN=" + token},
	})
	exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	body := func(kv ...any) string {
		m := map[string]any{"limit": "sticky", "key": "ip:203.0.113.7", "rates": []string{"1000/s"}, "expires": exp}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	manyRates := make([]string, 17)
	for i := range manyRates {
		manyRates[i] = fmt.Sprintf("%d/%ds", i+1, i+1)
	}
	tests := []struct {
		name, method, token, body string
		status                    int
		field                     string // the field the problem names ("" to skip)
	}{
		{"no token", "PUT", "", body(), 401, ""},
		{"wrong token", "PUT", "nope", body(), 401, ""},
		{"list without token", "GET", "", "", 401, ""},
		{"delete without token", "DELETE", "", "", 401, ""},
		{"body over 16 KiB", "PUT", token, body("reason", strings.Repeat("x", 17<<10)), 413, ""},
		{"not JSON", "PUT", token, `{"limit": `, 400, "body"},
		{"an array", "PUT", token, `[]`, 400, "body"},
		{"two objects", "PUT", token, body() + body(), 400, "body"},
		{"empty body", "PUT", token, ``, 400, "body"},
		{"unknown field", "PUT", token, body("rate", "1000/s"), 400, "rate"},
		{"rates as a string", "PUT", token, body("rates", "1000/s"), 400, "rates"},
		{"burst as a float", "PUT", token, body("burst", 1.5), 400, "burst"},
		{"unknown limit", "PUT", token, body("limit", "no-such-limit"), 422, "limit"},
		{"no limit", "PUT", token, body("limit", nil), 422, "limit"},
		{"consumer and key", "PUT", token, body("consumer", "acme"), 422, "key"},
		{"neither consumer nor key", "PUT", token, body("key", nil), 422, "consumer"},
		{"consumer name with a slash", "PUT", token, body("key", nil, "consumer", "acme/../x"), 422, "consumer"},
		{"empty key value", "PUT", token, body("key", "api_key:"), 422, "key"},
		{"key not an IP", "PUT", token, body("key", "ip:999.1.1.1"), 422, "key"},
		{"key over max_value_len", "PUT", token, body("key", "api_key:"+strings.Repeat("k", 1025)), 422, "key"},
		{"limit keyed by nothing", "PUT", token, body("limit", "shared"), 422, "key"},
		{"no expires", "PUT", token, body("expires", nil), 422, "expires"},
		{"expires not RFC 3339", "PUT", token, body("expires", "tomorrow"), 422, "expires"},
		{"expires without a zone", "PUT", token, body("expires", "2030-01-01T00:00:00"), 422, "expires"},
		{"expires in the past", "PUT", token, body("expires", "2001-01-01T00:00:00Z"), 422, "expires"},
		{"expires now", "PUT", token, body("expires", time.Now().Add(-time.Second).UTC().Format(time.RFC3339)), 422, "expires"},
		{"expires in 9999", "PUT", token, body("expires", "9999-12-31T23:59:59Z"), 422, "expires"},
		{"expires past the year 10000", "PUT", token, body("expires", "+10000-01-01T00:00:00Z"), 422, "expires"},
		{"no rates", "PUT", token, body("rates", nil), 422, "rates"},
		{"zero rate", "PUT", token, body("rates", []string{"0/s"}), 422, "rates[0]"},
		{"rate above 2^53", "PUT", token, body("rates", []string{"9007199254740993/s"}), 422, "rates[0]"},
		{"rate window over 366 days", "PUT", token, body("rates", []string{"1/400d"}), 422, "rates[0]"},
		{"17 rates", "PUT", token, body("rates", manyRates), 422, "rates"},
		{"a window twice", "PUT", token, body("rates", []string{"1/s", "2/1s"}), 422, "rates[1]"},
		{"log over 64 MiB a key", "PUT", token, body("rates", []string{"10000000000000/day"}), 422, "rates"},
		{"burst on a log", "PUT", token, body("burst", 5), 422, "burst"},
		{"max_in_flight on a rate limit", "PUT", token, body("max_in_flight", 5), 422, "max_in_flight"},
		{"rates on a concurrency limit", "PUT", token, body("limit", "slots"), 422, "rates"},
		{"max_in_flight 0 on concurrency", "PUT", token, body("limit", "slots", "rates", nil), 422, "max_in_flight"},
		{"reason over 1 KiB", "PUT", token, body("reason", strings.Repeat("r", 1025)), 422, "reason"},
		{"delete without a subject", "DELETE", token, "", 400, ""},
	}
	c := &http.Client{Timeout: 10 * time.Second}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := "/admin/overrides"
			if tc.method == "DELETE" {
				path += "?limit=sticky"
			}
			hdr := map[string]string{"Content-Type": "application/json"}
			if tc.token != "" {
				hdr["Authorization"] = "Bearer " + tc.token
			}
			r, err := tryDo(c, tc.method, g.adminURL(path), hdr, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			r.problem(t, tc.status)
			if tc.field != "" {
				var p struct {
					Errors []map[string]string `json:"errors"`
				}
				if err := json.Unmarshal(r.Body, &p); err != nil || len(p.Errors) == 0 || p.Errors[0]["field"] != tc.field || p.Errors[0]["message"] == "" {
					t.Errorf("problem names %+v, want field %q: %s", p.Errors, tc.field, r.Body)
				}
			}
		})
	}
	if l := listOverrides(t, g, token); len(l.Overrides) != 0 {
		t.Errorf("hostile requests stored overrides: %+v", l)
	}
	// The same bodies made valid are accepted: the table is not what
	// refused them.
	for _, b := range []string{body(), body("limit", "slots", "rates", nil, "max_in_flight", 3), body("key", "api_key:k1")} {
		if r := adminSend(t, g, "PUT", "/admin/overrides", token, b); r.Status != 200 {
			t.Errorf("PUT %s: %s", b, r)
		}
	}
	l := listOverrides(t, g, token)
	if len(l.Overrides) != 3 {
		t.Fatalf("after 3 valid PUTs: %+v", l)
	}
	for _, o := range l.Overrides {
		if strings.Contains(o.Key, "k1") || strings.Contains(o.Subject, "k1") {
			t.Errorf("an API key shows in the listing: %+v", o)
		}
	}
}
