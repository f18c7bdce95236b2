package policy_test

import (
	"fmt"
	"os"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
)

func Example() {
	c := config.Default()
	l := config.DefaultLimit()
	l.Name, l.Rates = "per-client", []string{"10/second", "600/minute"}
	c.Limits = []config.LimitConfig{l}
	c.Gateway.Limits = []string{"per-client"}
	r := config.DefaultRoute()
	r.Name, r.PathPrefix, r.Upstream = "search", "/v1/search", "http://127.0.0.1:9000"
	c.Routes = []config.RouteConfig{r}

	p, err := policy.Compile(c, os.Getenv, os.ReadFile)
	if err != nil {
		fmt.Println(err)
		return
	}
	rt, path, err := p.Match("gateway.example.com:8080", "GET", "//v1/./search/%69tems")
	fmt.Println(rt.Name, path, err, rt.Upstream, rt.Timeout)
	fmt.Println(rt.RateLimitPolicy)

	c.Routes[0].Limits = []string{"serch"}
	c.Limits[0].Rates[1] = "600/fortnight"
	_, err = policy.Compile(c, os.Getenv, os.ReadFile)
	fmt.Println(err)
	// Output:
	// search /v1/search/items <nil> http://127.0.0.1:9000 30s
	// "per-client.1s";q=10;w=1, "per-client.1m";q=600;w=60
	// limits[0].rates[1]: rate "600/fortnight": unknown window "fortnight" (use second, minute, hour, day or a duration like 10s, 1h30m)
	// routes[0].limits[0]: unknown limit "serch"
}
