package accuracy

import (
	"testing"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// TestReferee is a step table at fake instants for 2 per 10 s: the exact
// log's verdicts are computed by hand from the admitted history.
func TestReferee(t *testing.T) {
	ref, err := NewReferee("two", []ratelimit.Rate{{Limit: 2, Window: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	s := func(d float64) int64 { return int64(d * 1e6) } // seconds to ticks
	steps := []struct {
		at               float64
		allowed, counted bool
		want             Verdict
	}{
		{0, true, true, Agree},          // history {}: exact allows
		{1, true, true, Agree},          // {0}
		{2, true, true, FalseAllow},     // {0, 1}: exact denies; counted all the same
		{3, false, false, Agree},        // {0, 1, 2}
		{10.5, false, false, Agree},     // (0.5, 10.5]: {1, 2}
		{11.5, false, false, FalseDeny}, // (1.5, 11.5]: {2}
		{11.6, true, false, Agree},      // allowed, not counted (a shadow's verdict): exact allows
		{11.7, true, true, Agree},       // still {2}: the uncounted request left no unit
		{11.8, true, true, FalseAllow},  // {2, 11.7}
	}
	log := ref.NewLog(0)
	for i, st := range steps {
		if got := ref.Judge(log, s(st.at), 1, st.allowed, st.counted); got != st.want {
			t.Errorf("step %d: Judge(t0+%gs, allowed %v, counted %v) = %d, want %d", i, st.at, st.allowed, st.counted, got, st.want)
		}
	}
}
