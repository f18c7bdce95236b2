package admin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/topk"
)

// TestTopHostileQueries: what an admin client can send /admin/top — no
// limit, an unknown limit, a span or n out of range, another method — gets
// a clear problem, never a panic or an unbounded answer; without a tracker
// the route answers 501.
func TestTopHostileQueries(t *testing.T) {
	p := searchPolicy(t)
	tr := topk.New(2, func(kind, value string) string { return kind + ":" + value })
	for _, c := range []string{"a", "b", "b", "c", "c", "c"} {
		tr.Record(tr.Limit("search"), t0, "ip", c, true, false, false, -1)
	}
	now := func() time.Time { return t0 }
	tracked := Handler(Options{Policy: func() *policy.Policy { return p }, Top: tr, Now: now})
	untracked := Handler(Options{Policy: func() *policy.Policy { return p }, Now: now})
	tests := []struct {
		name, method, target string
		h                    http.Handler
		status               int
		body                 string
	}{
		{"no limit", "GET", "/admin/top", tracked, 400, "limit is required"},
		{"unknown limit", "GET", "/admin/top?limit=nope", tracked, 404, `no limit \"nope\"`},
		{"control bytes in the limit", "GET", "/admin/top?limit=%1b%5b31m", tracked, 404, "no limit"},
		{"bad span", "GET", "/admin/top?limit=search&span=1h", tracked, 400, "span must be 1m or 15m"},
		{"bad n", "GET", "/admin/top?limit=search&n=-1", tracked, 400, "n must be a positive integer"},
		{"huge n is capped at k", "GET", "/admin/top?limit=search&n=99999999", tracked, 200, `"client": "ip:c"`},
		// k = 2: c replaced a (count 1) when it came, so its count 4
		// overestimates its 3 by the error 1.
		{"n=1", "GET", "/admin/top?limit=search&n=1", tracked, 200, `"count": 4`},
		{"post", "POST", "/admin/top?limit=search", tracked, 405, "not allowed"},
		{"untracked", "GET", "/admin/top?limit=search", untracked, 501, "not tracked"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			tc.h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.target, nil))
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) {
				t.Fatalf("%s %s: %d %s, want %d containing %q", tc.method, tc.target, w.Code, w.Body, tc.status, tc.body)
			}
			if tc.name == "n=1" && (strings.Count(w.Body.String(), `"client"`) != 1 || !strings.Contains(w.Body.String(), `"error": 1`)) {
				t.Fatalf("n=1 listed more than one client: %s", w.Body)
			}
		})
	}
}
