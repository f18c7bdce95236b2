package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// TestOverridesBounded: a PUT into a full table is 409 and stores
// nothing; replacing an override already there is allowed; an expired
// one makes room.
func TestOverridesBounded(t *testing.T) {
	store := memstore.New(memstore.Options{MaxKeys: 100})
	now := t0
	p := searchPolicy(t)
	srv := httptest.NewServer(Handler(Options{Store: store, Overrides: store, Policy: func() *policy.Policy { return p },
		Now: func() time.Time { return now }, MaxOverrides: 2}))
	t.Cleanup(srv.Close)
	put := func(key string, expires time.Time) int {
		body := fmt.Sprintf(`{"limit": "search", "key": %q, "rates": ["9/1m", "20/1h"], "expires": %q}`, key, expires.Format(time.RFC3339))
		req, _ := http.NewRequest("PUT", srv.URL+"/admin/overrides", strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i, tc := range []struct {
		key     string
		expires time.Time
		want    int
	}{
		{"ip:10.0.0.1", t0.Add(time.Minute), 200},
		{"ip:10.0.0.2", t0.Add(time.Hour), 200},
		{"ip:10.0.0.3", t0.Add(time.Hour), 409},
		{"ip:10.0.0.1", t0.Add(2 * time.Minute), 200}, // a replacement
	} {
		if got := put(tc.key, tc.expires); got != tc.want {
			t.Fatalf("step %d: PUT %s = %d, want %d", i, tc.key, got, tc.want)
		}
	}
	now = t0.Add(2 * time.Minute) // 10.0.0.1's override has expired
	if got := put("ip:10.0.0.3", t0.Add(time.Hour)); got != 200 {
		t.Fatalf("PUT once one expired = %d, want 200", got)
	}
	resp, err := http.Get(srv.URL + "/admin/overrides")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct {
		Overrides []OverrideView `json:"overrides"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || len(l.Overrides) != 2 {
		t.Fatalf("listing: %v %+v, want 2 overrides", err, l)
	}
}
