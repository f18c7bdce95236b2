package proxy_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

// TestGRPCLimitedHostile: which requests are answered as gRPC calls when
// limited, and what a limited call gets. A made-up Content-Type changes
// only the shape of the denial, never whether the request is counted or
// forwarded.
func TestGRPCLimitedHostile(t *testing.T) {
	p := compile(t, func(c *config.Config) {
		one := limit("one", "fixed_window", "1/hour")
		big := limit("big", "fixed_window", "10/hour")
		big.CostHeader = "X-Cost"
		big.By = []string{}
		c.Limits = []config.LimitConfig{one, big}
		r := config.DefaultRoute()
		r.Name, r.PathPrefix, r.Respond, r.Limits = "svc", "/", &config.RespondConfig{Body: "ok"}, []string{"one"}
		r2 := config.DefaultRoute()
		r2.Name, r2.PathPrefix, r2.Respond, r2.Limits = "costly", "/costly", &config.RespondConfig{Body: "ok"}, []string{"big"}
		c.Routes = []config.RouteConfig{r2, r}
	})
	srv := serveMemory(t, p)
	if r := get(t, srv.URL+"/pkg.Svc/M", "X-API-Key", "first"); r.StatusCode != 200 {
		t.Fatalf("first call: %d", r.StatusCode)
	}
	for _, tc := range []struct {
		name, contentType string
		grpc              bool
	}{
		{"gRPC", "application/grpc", true},
		{"gRPC with a codec", "application/grpc+proto", true},
		{"gRPC with a parameter", "application/grpc;charset=utf-8", true},
		{"gRPC-Web", "application/grpc-web+proto", true},
		{"look-alike", "application/grpcx", false},
		{"upper case (gRPC sends lower case only)", "APPLICATION/GRPC", false},
		{"JSON", "application/json", false},
		{"none", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := []string{"X-API-Key", "first"}
			if tc.contentType != "" {
				hdr = append(hdr, "Content-Type", tc.contentType)
			}
			r := get(t, srv.URL+"/pkg.Svc/M", hdr...)
			if r.Header.Get("Retry-After") == "" || r.Header.Get("RateLimit") == "" {
				t.Errorf("limited: no Retry-After or RateLimit (%v)", r.Header)
			}
			if !tc.grpc {
				if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Grpc-Status") != "" {
					t.Errorf("%q: %d grpc-status %q, want a plain 429", tc.contentType, r.StatusCode, r.Header.Get("Grpc-Status"))
				}
				return
			}
			if r.StatusCode != 200 || r.Header.Get("Grpc-Status") != "8" || r.Header.Get("Content-Type") != "application/grpc" {
				t.Fatalf("%q: %d grpc-status %q content-type %q, want 200, 8, application/grpc", tc.contentType,
					r.StatusCode, r.Header.Get("Grpc-Status"), r.Header.Get("Content-Type"))
			}
			if ms := r.Header.Get("Grpc-Retry-Pushback-Ms"); ms == "" || ms == "0" || ms[0] == '-' {
				t.Errorf("grpc-retry-pushback-ms = %q, want the wait in ms", ms)
			}
			if m := r.Header.Get("Grpc-Message"); !strings.HasPrefix(m, `rate limit "one" exceeded; retry in `) {
				t.Errorf("grpc-message = %q", m)
			}
		})
	}
	// A cost no wait can fit: pushback -1 (do not retry).
	r := get(t, srv.URL+"/costly", "Content-Type", "application/grpc", "X-Cost", "11")
	if r.Header.Get("Grpc-Status") != "8" || r.Header.Get("Grpc-Retry-Pushback-Ms") != "-1" {
		t.Errorf("cost above capacity: grpc-status %q pushback %q, want 8 and -1", r.Header.Get("Grpc-Status"), r.Header.Get("Grpc-Retry-Pushback-Ms"))
	}
	if m := r.Header.Get("Grpc-Message"); m != `cost 11 exceeds capacity 10 of limit "big"` {
		t.Errorf("grpc-message = %q", m)
	}
}
