package replay

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
)

// batchedPolicy has two shared batched limits of 100 per 10 s with
// leases of 10, a fixed window on route "fw" and a sliding counter on
// route "swc".
func batchedPolicy(t *testing.T) *policy.Policy {
	t.Helper()
	c := config.Default()
	var ls []config.LimitConfig
	for _, alg := range []string{"fixed_window", "sliding_window_counter"} {
		l := config.DefaultLimit()
		l.Name, l.Rates, l.Algorithm, l.By, l.Sync, l.LeaseSize = alg, []string{"100/10s"}, alg, []string{}, "batched", 10
		ls = append(ls, l)
	}
	c.Limits = ls
	fw, swc := config.DefaultRoute(), config.DefaultRoute()
	fw.Name, fw.PathPrefix, fw.Upstream, fw.Limits = "fw", "/fw", "http://127.0.0.1:1", []string{"fixed_window"}
	swc.Name, swc.PathPrefix, swc.Upstream, swc.Limits = "swc", "/swc", "http://127.0.0.1:1", []string{"sliding_window_counter"}
	c.Routes = []config.RouteConfig{fw, swc}
	return compile(t, c)
}

// TestRunBatchedFleet: 60 s of 30 requests a second on each route,
// replayed across 4 gateways: the fixed window never admits past its
// limit (no false allow: the documented bound is 0), the sliding counter
// stays within its bound, and the report names the fleet and the bound.
func TestRunBatchedFleet(t *testing.T) {
	var es []accesslog.Entry
	for i := range 1800 {
		at := time.Duration(i) * time.Second / 30
		es = append(es, entry(at, "198.51.100.1", "", "fw", "/fw"), entry(at, "198.51.100.2", "", "swc", "/swc"))
	}
	log := writeLog(t, accesslog.JSONL, es)
	rep, err := Run(context.Background(), batchedPolicy(t), strings.NewReader(string(log)), Options{Gateways: 4})
	if err != nil {
		t.Fatal(err)
	}
	fw := limitReport(t, rep, "fixed_window")
	if !fw.Batched || fw.Gateways != 4 || fw.BatchBound != 0 || fw.BatchFalseAllows != 0 || fw.Requests != 1800 {
		t.Errorf("fixed_window: %+v; want batched over 4 gateways, bound 0, no false allow", *fw)
	}
	// 300 offered per window of 100: exactly 600 in 60 s; leases may
	// strand a few units.
	if fw.Allowed > 600 || fw.Allowed < 500 {
		t.Errorf("fixed_window admitted %d, want at most 600 and at least 500", fw.Allowed)
	}
	swc := limitReport(t, rep, "sliding_window_counter")
	if !swc.Batched || swc.BatchBound != 4*9 {
		t.Errorf("sliding_window_counter: %+v; want batched, bound 36", *swc)
	}
	var out strings.Builder
	if err := rep.Write(&out); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"4 gateways: 0 false allows", "bound +36 units", "bound +0 units"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, out.String())
		}
	}
	t.Log("\n" + out.String())
}
