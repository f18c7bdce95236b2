package headers_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate/gateway/headers"
	"github.com/tollgate/gateway/ratelimit"
)

func Example() {
	perClient := &ratelimit.Limit{Name: "per-client", Algorithm: ratelimit.SlidingWindowCounter,
		Rates: []ratelimit.Rate{{Limit: 10, Window: time.Second}, {Limit: 600, Window: time.Minute}}}
	if err := perClient.Finish(); err != nil {
		panic(err)
	}
	policy := headers.PolicyValue([]*ratelimit.Limit{perClient}) // once per route

	hits := []ratelimit.Hit{{Limit: perClient, Key: "k", Cost: 1}}
	ds := []ratelimit.Decision{{Allowed: true, Counted: true, Window: 1, Limit: 600, Remaining: 42, Reset: 16500 * time.Millisecond}}
	var answers headers.Writer // one per handler
	h := http.Header{}
	answers.Set(h, headers.Styles{headers.IETF, headers.Legacy}, policy, hits, ds, time.Unix(0, 0))
	for _, k := range []string{"RateLimit-Policy", "RateLimit", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"} {
		fmt.Printf("%s: %s\n", k, h.Get(k))
	}
	fmt.Println(headers.RetryAfterSeconds(6100 * time.Millisecond))
	// Output:
	// RateLimit-Policy: "per-client.1s";q=10;w=1, "per-client.1m";q=600;w=60
	// RateLimit: "per-client.1m";r=42;t=17
	// RateLimit-Limit: 600
	// RateLimit-Remaining: 42
	// RateLimit-Reset: 17
	// 7
}
