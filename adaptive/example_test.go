package adaptive_test

import (
	"fmt"
	"time"

	"github.com/tollgate/gateway/adaptive"
)

// A limiter pinned at 10 with a fifth kept for critical requests: normal
// requests fill 8 slots, sheddable ones 6, critical ones all 10.
func Example() {
	now := time.Unix(0, 0)
	l := adaptive.New(adaptive.Config{MinLimit: 10, MaxLimit: 10, Reserve: 0.2}, now)
	admitted := map[adaptive.Priority]int{}
	for _, p := range []adaptive.Priority{adaptive.Sheddable, adaptive.Normal, adaptive.Critical} {
		for l.TryAcquire(p) == adaptive.Admit {
			admitted[p]++
		}
	}
	fmt.Println("sheddable", admitted[adaptive.Sheddable], "normal", admitted[adaptive.Normal], "critical", admitted[adaptive.Critical])
	l.Release(now.Add(50*time.Millisecond), 50*time.Millisecond, adaptive.Success)
	fmt.Println("in flight", l.Stats().InFlight)
	// Output:
	// sheddable 6 normal 2 critical 2
	// in flight 9
}
