package redisstore

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/ratelimit"
)

// TestLimitArgVariants: a limit and its variants share an ID but not
// their parameters; requests alternating between them get each one's own
// packing, without packing it again on every call.
func TestLimitArgVariants(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer c.Close()
	s, err := New(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := &ratelimit.Limit{Name: "l", Algorithm: ratelimit.GCRA, Rates: []ratelimit.Rate{{Limit: 5, Window: time.Second}}}
	if err := base.Finish(); err != nil {
		t.Fatal(err)
	}
	var vs []*ratelimit.Limit
	for i := range maxVariants {
		v, err := base.WithRates([]ratelimit.Rate{{Limit: int64(10 + i), Window: time.Second}})
		if err != nil || v.ID != base.ID {
			t.Fatalf("variant %d: %v, ID %q (base %q)", i, err, v.ID, base.ID)
		}
		vs = append(vs, v)
	}
	fresh := func(l *ratelimit.Limit) string {
		other, _ := New(c, Options{})
		return *other.limitArg(l)
	}
	all := append([]*ratelimit.Limit{base}, vs[:maxVariants-1]...)
	for round := range 2 {
		for i, l := range all {
			if got, want := *s.limitArg(l), fresh(l); got != want {
				t.Fatalf("round %d, definition %d: packed %x, want %x", round, i, got, want)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() {
		for _, l := range all {
			s.limitArg(l)
		}
	}); n != 0 {
		t.Errorf("alternating %d definitions of one ID: %v allocations per round, want 0", len(all), n)
	}
	// One more than the cache holds per ID still packs correctly.
	if got, want := *s.limitArg(vs[maxVariants-1]), fresh(vs[maxVariants-1]); got != want {
		t.Errorf("the %dth definition: packed %x, want %x", maxVariants+1, got, want)
	}
}
