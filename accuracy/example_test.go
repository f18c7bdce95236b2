package accuracy_test

import (
	"fmt"
	"time"

	"github.com/tollgate/gateway/accuracy"
	"github.com/tollgate/gateway/ratelimit"
)

// A fixed window of 2 per 10 ticks admits 4 requests across a boundary;
// the exact log, fed that history, would have denied the last two.
func ExampleEvaluate() {
	l := &ratelimit.Limit{Name: "demo", Algorithm: ratelimit.FixedWindow,
		Rates: []ratelimit.Rate{{Limit: 2, Window: 10 * time.Microsecond}}}
	if err := l.Finish(); err != nil {
		fmt.Println(err)
		return
	}
	tr := &accuracy.Trace{Name: "boundary", Keys: 1, Arrivals: []accuracy.Arrival{
		{At: 8, Cost: 1}, {At: 9, Cost: 1}, {At: 10, Cost: 1}, {At: 11, Cost: 1}}}
	r, err := accuracy.Evaluate(tr, l)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Allowed, r.FalseAllows, r.FalseDenies, r.WorstExcess)
	// Output: 4 2 0 2
}
