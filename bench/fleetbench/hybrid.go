package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/hybrid"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// The hot key: half the offered rate, so the limit binds all along.
const (
	hotWindow   = time.Second
	hotInterval = 100 * time.Millisecond
)

func hotLimit(alg ratelimit.Algorithm, limit, lease int64) (*ratelimit.Limit, error) {
	l := &ratelimit.Limit{Name: "hot", Algorithm: alg, Rates: []ratelimit.Rate{{Limit: limit, Window: hotWindow}},
		Batch: &ratelimit.Batch{Interval: hotInterval, Lease: lease}}
	return l, l.Finish()
}

// runHybrid runs, per algorithm, gateways child processes deciding one hot
// key at rate requests/s in all, and reports Redis's script calls per
// request and the overshoot against the naive definition of the
// algorithm over the admitted instants.
func runHybrid(dur time.Duration, gateways, rate int) error {
	m := &redistest.Main{}
	defer m.Close()
	srv := redistest.Standalone(m)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	limit := int64(rate / 2)
	lease := max(1, limit/100)
	fmt.Printf("hybrid: %d gateway processes, one hot key, %d req/s offered in all for %s, limit %d/%s, lease_size %d, sync_interval %s\n",
		gateways, rate, dur, limit, hotWindow, lease, hotInterval)
	fmt.Println("| algorithm | requests | admitted | script calls | calls/request | Redis CPU µs/request | gateways' CPU µs/request | max overshoot (units) | bound N·(k−1) |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, alg := range []ratelimit.Algorithm{ratelimit.FixedWindow, ratelimit.SlidingWindowCounter} {
		calls0, rcpu0 := scriptCalls(srv), redisCPU(srv)
		start := time.Now().Add(500 * time.Millisecond)
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			adm      []int64
			requests int64
			gcpu     time.Duration
			errs     []error
		)
		for g := range gateways {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command(self, "-child", srv.Addr, "-d", dur.String(), "-rate", strconv.Itoa(rate/gateways),
					"-alg", alg.String(), "-limit", strconv.FormatInt(limit, 10), "-lease", strconv.FormatInt(lease, 10),
					"-start", strconv.FormatInt(start.UnixMicro(), 10), "-prefix", fmt.Sprintf("h%d:", alg))
				cmd.Stderr = os.Stderr
				outp, err := cmd.Output()
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, fmt.Errorf("gateway %d: %w", g, err))
					return
				}
				sc := bufio.NewScanner(strings.NewReader(string(outp)))
				for sc.Scan() {
					f := strings.Fields(sc.Text())
					switch {
					case len(f) == 3 && f[0] == "done":
						n, _ := strconv.ParseInt(f[1], 10, 64)
						c, _ := strconv.ParseInt(f[2], 10, 64)
						requests += n
						gcpu += time.Duration(c)
					case len(f) == 1:
						t, _ := strconv.ParseInt(f[0], 10, 64)
						adm = append(adm, t)
					}
				}
			}()
		}
		wg.Wait()
		if len(errs) > 0 {
			return errs[0]
		}
		calls, rcpu := scriptCalls(srv)-calls0, redisCPU(srv)-rcpu0
		sort.Slice(adm, func(a, b int) bool { return adm[a] < adm[b] })
		over := overshoot(alg, adm, int64(hotWindow/ratelimit.Tick), limit)
		fmt.Printf("| %s | %d | %d | %d | %.4f | %.2f | %.1f | %d | %d |\n", alg, requests, len(adm), calls,
			float64(calls)/float64(requests), float64(rcpu)/1e3/float64(requests), float64(gcpu)/1e3/float64(requests),
			over, int64(gateways)*(lease-1))
	}
	return nil
}

// overshoot is the most units by which an admission passed the
// algorithm's definition over the admitted instants (sorted, ticks):
// fixed window, the count of its window; sliding counter (precision =
// window), prev·(W−e)/W + cur before it.
func overshoot(alg ratelimit.Algorithm, adm []int64, w, limit int64) int64 {
	count := map[int64]int64{}
	var worst int64
	for _, t := range adm {
		i := t / w
		var before float64
		if alg == ratelimit.FixedWindow {
			before = float64(count[i])
		} else {
			e := t - i*w
			before = float64(count[i]) + float64(count[i-1])*float64(w-e)/float64(w)
		}
		if o := int64(math.Ceil(before + 1 - float64(limit))); o > worst {
			worst = o
		}
		count[i]++
	}
	return worst
}

// runChild is one gateway process: it decides the hot key at rate/s from
// 16 goroutines from the agreed start instant for dur, and prints the
// instant of every admission (µs), then "done requests cpu_ns".
func runChild(addr string, dur time.Duration, rate int) error {
	fs := flagsOfChild()
	alg, err := ratelimit.ParseAlgorithm(fs.alg)
	if err != nil {
		return err
	}
	l, err := hotLimit(alg, fs.limit, fs.lease)
	if err != nil {
		return err
	}
	c := newClient(addr)
	defer c.Close()
	rs, err := redisstore.New(c, redisstore.Options{NewLaneClient: redis.NewClient, Prefix: fs.prefix, Clock: ratelimit.ClockStore, Timeout: time.Second, Coalesce: true})
	if err != nil {
		return err
	}
	st := hybrid.Wrap(rs, hybrid.Options{})
	start := time.UnixMicro(fs.start)
	time.Sleep(time.Until(start))
	cpu0 := cpu()
	const workers = 16
	every := time.Duration(int64(time.Second) * workers / int64(rate))
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		adm []int64
		n   int64
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hit := []ratelimit.Hit{{Limit: l, Key: "{hot}hot", Cost: 1}}
			out := make([]ratelimit.Decision, 1)
			next := start.Add(every * time.Duration(w) / workers)
			var own []int64
			var k int64
			for next.Before(start.Add(dur)) {
				time.Sleep(time.Until(next))
				now := time.Now()
				if ok, err := st.Decide(context.Background(), now, hit, out); err == nil && ok {
					// The admission's instant: when the decision returned.
					own = append(own, time.Now().UnixMicro())
				}
				k++
				next = next.Add(every)
			}
			mu.Lock()
			adm = append(adm, own...)
			n += k
			mu.Unlock()
		}()
	}
	wg.Wait()
	w := bufio.NewWriter(os.Stdout)
	for _, t := range adm {
		fmt.Fprintln(w, t)
	}
	fmt.Fprintf(w, "done %d %d\n", n, int64(cpu()-cpu0))
	return w.Flush()
}
