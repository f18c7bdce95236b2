package admin

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/topk"
)

// TestDashboardRoutes: the page is served without the token (it holds no
// data and asks for it) under a policy that forbids anything but its own
// inline code and fetches to this listener; the data it polls needs the
// token, reports each limit's totals and history, and ignores a top= or
// span= it does not know instead of failing the poll.
func TestDashboardRoutes(t *testing.T) {
	p := searchPolicy(t)
	tr := topk.New(4, func(kind, value string) string { return kind + ":" + value })
	l := tr.Limit("search")
	for i := range 5 {
		tr.Record(l, t0, "ip", "1.2.3.4", i >= 3, false, false, int64(200*(i+1)))
	}
	h := Handler(Options{Policy: func() *policy.Policy { return p }, Top: tr, Token: "tok",
		Now: func() time.Time { return t0 }, Status: func(context.Context) any { return map[string]string{"config_version": "v1"} }})
	get := func(target, token string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", target, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	page := get("/admin/ui", "")
	if page.Code != 200 || !strings.Contains(page.Body.String(), "<title>Tollgate</title>") ||
		!strings.Contains(page.Header().Get("Content-Security-Policy"), "connect-src 'self'") {
		t.Fatalf("page: %d %v", page.Code, page.Header())
	}
	if strings.Contains(page.Body.String(), "http://") || strings.Contains(page.Body.String(), "https://") {
		t.Errorf("the page refers to an external resource")
	}
	if w := get("/admin/ui/data", ""); w.Code != 401 {
		t.Fatalf("data without the token: %d", w.Code)
	}
	for _, q := range []string{"", "?top=search", "?top=nope", "?top=search&span=1y"} {
		w := get("/admin/ui/data"+q, "tok")
		if w.Code != 200 {
			t.Fatalf("data%s: %d %s", q, w.Code, w.Body)
		}
		var d struct {
			Status map[string]string
			Limits []struct {
				Name            string
				Allowed, Denied uint64
				Rates           [][3]uint64
				Utilisation     float64
			}
			Top *struct{ Span string }
		}
		if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
			t.Fatal(err)
		}
		if len(d.Limits) != 1 || d.Limits[0].Name != "search" || d.Limits[0].Allowed != 3 || d.Limits[0].Denied != 2 || d.Status["config_version"] != "v1" {
			t.Fatalf("data%s: %s", q, w.Body)
		}
		// Used 20%, 40%, ..., 100%: the mean is 60%.
		if u := d.Limits[0].Utilisation; u < 0.599 || u > 0.601 {
			t.Errorf("utilisation %v, want 0.6", u)
		}
		if r := d.Limits[0].Rates; len(r) != 18 || r[17] != [3]uint64{3, 2, 0} {
			t.Errorf("rates %v, want 18 buckets ending with [3 2 0]", r)
		}
		if wantTop := strings.HasPrefix(q, "?top=search"); (d.Top != nil) != wantTop || (wantTop && d.Top.Span != "1m") {
			t.Errorf("data%s: top %+v", q, d.Top)
		}
	}
}
