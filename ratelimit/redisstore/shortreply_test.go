package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

// replyForms records the form of every decide reply a client reads: "int"
// for an integer, "str<n>" for a string of n bytes.
type replyForms struct {
	mu    sync.Mutex
	forms []string
}

func (r *replyForms) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *replyForms) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.record(cmd)
		return err
	}
}

func (r *replyForms) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			r.record(c)
		}
		return err
	}
}

func (r *replyForms) record(cmd redis.Cmder) {
	c, ok := cmd.(*redis.Cmd)
	if !ok || (cmd.Name() != "fcall" && cmd.Name() != "evalsha") || c.Err() != nil {
		return
	}
	f := fmt.Sprintf("%T", c.Val())
	switch v := c.Val().(type) {
	case int64:
		f = "int"
	case string:
		f = "str" + strconv.Itoa(len(v))
	}
	r.mu.Lock()
	r.forms = append(r.forms, f)
	r.mu.Unlock()
}

func (r *replyForms) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.forms
	r.forms = nil
	return f
}

// TestOneHitShortReply: a one-hit call that counts is answered with the
// window's state only (lua/common.lua "Reply") — fixed_window's count as
// an integer, gcra's TAT and token_bucket's tokens and instant as the
// bytes written with the local clock, the store's instant first under
// ClockStore — and every other one (a denial) with the full packed
// reply; the decisions
// read from either are the memory store's.
func TestOneHitShortReply(t *testing.T) {
	fw := finished(t, ratelimit.Limit{Name: "fw", Algorithm: ratelimit.FixedWindow, Rates: []ratelimit.Rate{rate(2, time.Hour)}})
	gc := finished(t, ratelimit.Limit{Name: "gcra", Algorithm: ratelimit.GCRA, Rates: []ratelimit.Rate{rate(2, time.Hour)}})
	tb := finished(t, ratelimit.Limit{Name: "tb", Algorithm: ratelimit.TokenBucket, Rates: []ratelimit.Rate{rate(2, time.Hour)}})
	for _, tc := range []struct {
		clock  redisstore.Clock
		script bool
		// counted and denied: the reply forms of fw, gcra and tb, three
		// calls each: two counted, one denied.
		want map[string][]string
	}{
		{redisstore.ClockLocal, false, map[string][]string{
			"fw": {"int", "int", "str72"}, "gcra": {"str8", "str8", "str72"}, "tb": {"str16", "str16", "str72"}}},
		{redisstore.ClockLocal, true, map[string][]string{
			"fw": {"int", "int", "str72"}, "gcra": {"str8", "str8", "str72"}, "tb": {"str16", "str16", "str72"}}},
		{redisstore.ClockStore, false, map[string][]string{
			"fw": {"str16", "str16", "str72"}, "gcra": {"str16", "str16", "str72"}, "tb": {"str24", "str24", "str72"}}},
	} {
		t.Run(fmt.Sprintf("clock=%d/script=%v", tc.clock, tc.script), func(t *testing.T) {
			ctx := context.Background()
			c := newClient(t, standard.Addr)
			forms := &replyForms{}
			c.AddHook(forms)
			rs := newStore(t, c, redisstore.Options{DenyCacheSize: -1, NoFunctions: tc.script, Clock: tc.clock})
			if err := rs.Ready(ctx); err != nil {
				t.Fatal(err)
			}
			ms := memstore.New(memstore.Options{})
			now := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
			got, want := make([]ratelimit.Decision, 1), make([]ratelimit.Decision, 1)
			for _, l := range []*ratelimit.Limit{fw, gc, tb} {
				forms.take()
				for i := range 3 {
					hits := []ratelimit.Hit{{Limit: l, Key: "k", Cost: 1}}
					now = now.Add(time.Millisecond)
					ga, err := rs.Decide(ctx, now, hits, got)
					if err != nil {
						t.Fatal(err)
					}
					at := now
					if tc.clock == redisstore.ClockStore {
						// the store decided at its own instant
						at = time.UnixMicro(got[0].At)
					}
					wa, err := ms.Decide(ctx, at, hits, want)
					if err != nil {
						t.Fatal(err)
					}
					want[0].At = got[0].At
					if ga != wa || got[0] != want[0] {
						t.Fatalf("%s call %d: got %v %+v, memstore %v %+v", l.Name, i, ga, got[0], wa, want[0])
					}
				}
				if f := fmt.Sprint(forms.take()); f != fmt.Sprint(tc.want[l.Name]) {
					t.Errorf("%s: reply forms %s, want %v", l.Name, f, tc.want[l.Name])
				}
			}
		})
	}
}

// TestOneHitStoreClockParity is TestOneHitParity on Redis's clock (the
// gateway's default): every one-hit decision, read from the short reply
// or the full one, is the memory store's at the instant the store decided
// at (Decision.At), field by field.
func TestOneHitStoreClockParity(t *testing.T) {
	ctx := context.Background()
	rs := newStore(t, newClient(t, standard.Addr), redisstore.Options{DenyCacheSize: -1, Clock: redisstore.ClockStore})
	if err := rs.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	ms := memstore.New(memstore.Options{})
	limits := oneWindowLimits(t)
	rng := rand.New(rand.NewPCG(5, 6))
	got, want := make([]ratelimit.Decision, 1), make([]ratelimit.Decision, 1)
	deadline := time.Now().Add(3 * time.Second) // bounds the run on a slow machine
	for step := 0; step < 2000 && time.Now().Before(deadline); step++ {
		l := limits[rng.IntN(len(limits))]
		cost := int64(1)
		if rng.IntN(4) == 0 {
			cost = 1 + rng.Int64N(2*l.Params(0).Capacity)
		}
		hits := []ratelimit.Hit{{Limit: l, Key: "k" + strconv.Itoa(rng.IntN(2)), Cost: cost}}
		ga, err := rs.Decide(ctx, time.Now(), hits, got)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if got[0].At == 0 {
			t.Fatalf("step %d: no store instant in %+v", step, got[0])
		}
		wa, err := ms.Decide(ctx, time.UnixMicro(got[0].At), hits, want)
		if err != nil {
			t.Fatal(err)
		}
		want[0].At = got[0].At
		if ga != wa || got[0] != want[0] {
			t.Fatalf("step %d: %s cost %d on %s: got %v %+v, memstore %v %+v", step, l.Name, cost, hits[0].Key, ga, got[0], wa, want[0])
		}
	}
}
