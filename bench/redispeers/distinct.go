package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// runDistinctServer measures (instructions under callgrind, else Redis's
// own time per call from INFO commandstats) the Redis cost of the call
// that moves an estimated distinct key to a new sub-window (the slots that
// left the window cleared, the union recomputed): instructions and CPU
// time per such call, for keys filled as a hostile client would fill them.
func runDistinctServer(n int, callgrind bool) error {
	srv, err := startRedis(callgrind)
	if err != nil {
		return err
	}
	defer srv.stop()
	ctx := context.Background()
	c := newClient(srv.addr, 2)
	defer c.Close()
	st, err := redisstore.New(c, redisstore.Options{Prefix: "dm:", Timeout: time.Minute, DenyCacheSize: -1})
	if err != nil {
		return err
	}
	if err := st.Ready(ctx); err != nil {
		return err
	}
	cases := []struct {
		name    string
		buckets int64
		perSub  int // values counted in each sub-window before it moves
		reseen  bool
	}{
		{"L=10000 N=4, 2,500 new values per sub-window", 4, 2500, false},
		{"L=10000 N=16, 7,000 values re-seen every sub-window", 16, 7000, true},
		{"L=200 N=4, 60 new values per sub-window", 4, 60, false},
	}
	fmt.Println("| case | instructions per moving call | Redis µs per moving call |")
	fmt.Println("|---|---:|---:|")
	for ci, cs := range cases {
		if only != "" && !strings.Contains(cs.name, only) {
			continue
		}
		limit := int64(ratelimit.DistinctMaxLimit)
		if cs.perSub < 100 {
			limit = 200
		}
		l := ratelimit.Limit{Name: fmt.Sprintf("dm%d", ci), Algorithm: ratelimit.Distinct, Precision: time.Second,
			Rates: []ratelimit.Rate{{Limit: limit, Window: time.Duration(cs.buckets) * time.Second}}}
		if err := l.Finish(); err != nil {
			return err
		}
		out := make([]ratelimit.Decision, 1)
		r := rand.New(rand.NewPCG(uint64(ci), 7))
		pool := make([]uint64, cs.perSub)
		for k := range pool {
			pool[k] = r.Uint64()
		}
		t := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
		key := fmt.Sprintf("{d%d}k", ci)
		decide := func(v uint64) error {
			_, err := st.Decide(ctx, t, []ratelimit.Hit{{Limit: &l, Key: key, Cost: 1, Value: v}}, out)
			return err
		}
		fill := func() error {
			for k := range pool {
				if !cs.reseen {
					pool[k] = r.Uint64()
				}
				if err := decide(pool[k]); err != nil {
					return err
				}
			}
			return nil
		}
		// a full window first, so that every move clears a filled slot
		for range cs.buckets {
			if err := fill(); err != nil {
				return err
			}
			t = t.Add(time.Second)
		}
		var ins int64
		var usec int64
		for range n {
			if callgrind {
				if err := srv.zero(); err != nil {
					return err
				}
			}
			_, u0, err := commandCalls(ctx, c)
			if err != nil {
				return err
			}
			if err := decide(pool[0]); err != nil { // the moving call
				return err
			}
			_, u1, err := commandCalls(ctx, c)
			if err != nil {
				return err
			}
			if callgrind {
				x, err := srv.instructions()
				if err != nil {
					return err
				}
				ins += x
			}
			usec += u1["fcall"] - u0["fcall"]
			if err := fill(); err != nil {
				return err
			}
			t = t.Add(time.Second)
		}
		fmt.Printf("| %s | %d | %.0f |\n", cs.name, ins/int64(n), float64(usec)/float64(n))
	}
	if callgrind {
		fmt.Fprintln(os.Stderr, "(Redis's time under callgrind is ~50x native; read the instructions)")
	}
	return nil
}
