package replay

import (
	"testing"
	"time"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/policy/config"
)

// TestRunCountsByLoggedStatus: a limit that counts by response is replayed
// with each line's logged status as the upstream's answer: three
// successful logins are free, two failed ones fill 2/1h, and the third
// failed attempt and the login after it are denied. (With every replayed
// answer a 200, all seven were allowed.)
func TestRunCountsByLoggedStatus(t *testing.T) {
	c := config.Default()
	login := config.DefaultLimit()
	login.Name, login.Rates, login.Algorithm, login.By = "login-failures", []string{"2/1h"}, "fixed_window", []string{"ip"}
	login.Count, login.CountStatuses = "response", []string{"401"}
	c.Limits = []config.LimitConfig{login}
	web := config.DefaultRoute()
	web.Name, web.PathPrefix, web.Upstream, web.Limits = "web", "/web", "http://127.0.0.1:1", []string{"login-failures"}
	c.Routes = []config.RouteConfig{web}
	p := compile(t, c)
	var es []accesslog.Entry
	for i, status := range []int{200, 200, 200, 401, 401, 401, 200} {
		e := entry(time.Duration(i)*time.Second, "198.51.100.7", "", "web", "/web/login")
		e.Status = status
		es = append(es, e)
	}
	replayEachFormat(t, p, es, func(t *testing.T, rep *Report) {
		lr := limitReport(t, rep, "login-failures")
		if lr.Allowed != 5 || lr.Denied != 2 {
			t.Fatalf("allowed %d, denied %d; want 5 and 2", lr.Allowed, lr.Denied)
		}
	})
}
