package window_test

import (
	"fmt"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/window"
)

// The pure math decides against caller-owned state at explicit instants:
// Check, then Take only if the whole request is allowed, then Report.
func Example() {
	l := &ratelimit.Limit{Name: "api", Algorithm: ratelimit.SlidingWindowLog,
		Rates: []ratelimit.Rate{{Limit: 2, Window: time.Second}}}
	if err := l.Finish(); err != nil {
		panic(err)
	}
	states := make([]window.LogState, l.Windows())
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	for _, ms := range []int64{0, 300, 600, 1000} {
		now := t0 + ms*1000
		var d ratelimit.Decision
		window.Check(l, states, now, 1, &d)
		if d.Allowed {
			window.Take(l, states, now, 1)
			d.Counted = true
		}
		window.Report(l, states, now, &d)
		fmt.Printf("t0+%dms allowed=%v remaining=%d retry=%v\n", ms, d.Allowed, d.Remaining, d.RetryAfter)
	}
	// Output:
	// t0+0ms allowed=true remaining=1 retry=0s
	// t0+300ms allowed=true remaining=0 retry=0s
	// t0+600ms allowed=false remaining=0 retry=400ms
	// t0+1000ms allowed=true remaining=0 retry=0s
}
