package replay

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/policy"
)

// TestRunCountsByLoggedStatus: a limit that counts by response is replayed
// with each line's logged status as the upstream's answer: three
// successful logins are free, two failed ones fill 2/1h, and the third
// failed attempt and the login after it are denied. (With every replayed
// answer a 200, all seven were allowed.)
func TestRunCountsByLoggedStatus(t *testing.T) {
	c := policy.Default()
	login := policy.DefaultLimit()
	login.Name, login.Rates, login.Algorithm, login.By = "login-failures", []string{"2/1h"}, "fixed_window", []string{"ip"}
	login.Count, login.CountStatuses = "response", []string{"401"}
	c.Limits = []policy.LimitConfig{login}
	web := policy.DefaultRoute()
	web.Name, web.PathPrefix, web.Upstream, web.Limits = "web", "/web", "http://127.0.0.1:1", []string{"login-failures"}
	c.Routes = []policy.RouteConfig{web}
	p, err := policy.Compile(c, func(string) string { return "" }, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	var es []accesslog.Entry
	for i, status := range []int{200, 200, 200, 401, 401, 401, 200} {
		e := entry(time.Duration(i)*time.Second, "198.51.100.7", "", "web", "/web/login")
		e.Status = status
		es = append(es, e)
	}
	for _, f := range []accesslog.Format{accesslog.Combined, accesslog.JSONL} {
		t.Run(f.String(), func(t *testing.T) {
			rep, err := Run(context.Background(), p, bytes.NewReader(writeLog(t, f, es)), Options{Format: f})
			if err != nil {
				t.Fatal(err)
			}
			lr := limitReport(t, rep, "login-failures")
			if lr.Allowed != 5 || lr.Denied != 2 {
				t.Fatalf("allowed %d, denied %d; want 5 and 2", lr.Allowed, lr.Denied)
			}
		})
	}
}
