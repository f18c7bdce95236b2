// Command fleetbench measures the Redis store at fleet scale, against one
// redis-server it starts on a free loopback port (and stops by PID):
//
//	go run . -coalesce   decisions/s, p50/p99, CPU per decision at 1, 64 and 512 clients, coalescing off and on
//	go run . -hybrid     a hot key over 4 gateway processes, batched: Redis calls per request, overshoot
//
// Client and server share the machine: every row reports the CPU time of
// both processes per decision (getrusage for this process, INFO cpu for
// Redis) and the script calls Redis ran (INFO commandstats), so rows
// compare within one run even when the machine is loaded.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/gateway/internal/redistest"
	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/redisstore"
)

func main() {
	coalesce := flag.Bool("coalesce", false, "measure coalescing at 1, 64 and 512 concurrent clients")
	hybridRun := flag.Bool("hybrid", false, "measure batched counting of a hot key over gateway processes")
	dur := flag.Duration("d", 3*time.Second, "duration of each row")
	clients := flag.String("clients", "1,64,512", "with -coalesce: concurrent clients per row")
	gateways := flag.Int("gateways", 4, "with -hybrid: gateway processes")
	rate := flag.Int("rate", 20000, "with -hybrid: requests per second over all gateways")
	flag.IntVar(&rounds, "rounds", 3, "with -coalesce: rounds; the configurations of a client count alternate within a round and each column is the median over rounds")
	flag.StringVar(&laneList, "lanes", "2", "with -coalesce: lanes (Options.CoalesceLanes) of the coalescing rows, comma separated")
	child := flag.String("child", "", "internal: run as one gateway process of -hybrid against this Redis address")
	flag.Parse()
	var err error
	switch {
	case *child != "":
		err = runChild(*child, *dur, *rate)
	case *coalesce:
		err = runCoalesce(*dur, *clients)
	case *hybridRun:
		err = runHybrid(*dur, *gateways, *rate)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		os.Exit(1)
	}
}

// newClient mirrors the gateway's client: deadlines bound the socket,
// nothing is retried, 10 connections per core.
func newClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true,
		PoolSize: 10 * runtimeProcs(), DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
}

// cpu returns this process's user+system CPU time.
func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU returns the server's user+system CPU time (INFO cpu).
func redisCPU(srv *redistest.Server) time.Duration {
	var total float64
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, _ := strconv.ParseFloat(srv.Info("cpu", f), 64)
		total += v
	}
	return time.Duration(total * float64(time.Second))
}

// scriptCalls is the number of script calls Redis ran.
func scriptCalls(srv *redistest.Server) int64 {
	var n int64
	for _, cmd := range []string{"evalsha", "eval", "fcall", "fcall_ro", "evalsha_ro"} {
		v := srv.Info("commandstats", "cmdstat_"+cmd)
		if v == "" {
			continue
		}
		c, _ := strconv.ParseInt(strings.TrimPrefix(strings.Split(v, ",")[0], "calls="), 10, 64)
		n += c
	}
	return n
}

// laneList are the coalescing rows' lane counts; rounds the rounds of
// each row.
var (
	laneList string
	rounds   int
)

// row is one measured configuration.
type row struct {
	rate, p50, p99, gcpu, rcpu, calls, batch float64
	fails                                    int64
}

func runCoalesce(dur time.Duration, clientList string) error {
	m := &redistest.Main{}
	defer m.Close()
	srv := redistest.Standalone(m)
	l := &ratelimit.Limit{Name: "bench", Algorithm: ratelimit.SlidingWindowCounter, Rates: []ratelimit.Rate{{Limit: 1 << 40, Window: time.Minute}}}
	if err := l.Finish(); err != nil {
		return err
	}
	fmt.Printf("coalescing: one process, one local redis-server, sliding_window_counter, one key per client, %s per row\n", dur)
	fmt.Println("| clients | coalesce | decisions/s | p50 µs | p99 µs | gateway CPU µs/decision | Redis CPU µs/decision | script calls/decision | calls per batch |")
	fmt.Println("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, f := range strings.Split(clientList, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return err
		}
		configs := []int{0}
		for _, lf := range strings.Split(laneList, ",") {
			lanes, err := strconv.Atoi(lf)
			if err != nil || lanes < 1 {
				return fmt.Errorf("-lanes: %q", lf)
			}
			configs = append(configs, lanes)
		}
		got := make([][]row, len(configs))
		for r := range rounds {
			for j := range configs {
				// Alternate the order between rounds, so that a load
				// change on the machine does not favour one column.
				k := j
				if r%2 == 1 {
					k = len(configs) - 1 - j
				}
				rw, err := coalesceRow(srv, l, n, configs[k], dur)
				if err != nil {
					return err
				}
				got[k] = append(got[k], rw)
			}
		}
		for k, lanes := range configs {
			onOff := "off"
			if lanes > 0 {
				onOff = fmt.Sprintf("on, %d lanes", lanes)
			}
			m := median(got[k])
			batch := "-"
			if m.batch > 0 {
				batch = fmt.Sprintf("%.1f", m.batch)
			}
			fmt.Printf("| %d | %s | %.0f | %.0f | %.0f | %.1f | %.1f | %.3f | %s |\n", n, onOff, m.rate,
				m.p50, m.p99, m.gcpu, m.rcpu, m.calls, batch)
			if m.fails > 0 {
				fmt.Printf("(%d failed decisions in the row above)\n", m.fails)
			}
		}
	}
	return nil
}

// median returns each column's median over rs.
func median(rs []row) row {
	col := func(f func(row) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	var fails int64
	for _, r := range rs {
		fails += r.fails
	}
	return row{rate: col(func(r row) float64 { return r.rate }), p50: col(func(r row) float64 { return r.p50 }),
		p99: col(func(r row) float64 { return r.p99 }), gcpu: col(func(r row) float64 { return r.gcpu }),
		rcpu: col(func(r row) float64 { return r.rcpu }), calls: col(func(r row) float64 { return r.calls }),
		batch: col(func(r row) float64 { return r.batch }), fails: fails}
}

// coalesceRow measures one configuration; lanes 0 means coalescing off.
func coalesceRow(srv *redistest.Server, l *ratelimit.Limit, clients, lanes int, dur time.Duration) (row, error) {
	co := lanes > 0
	c := newClient(srv.Addr)
	defer c.Close()
	st, err := redisstore.New(c, redisstore.Options{NewLaneClient: redis.NewClient, Prefix: fmt.Sprintf("co%d%v:", clients, co), Timeout: 2 * time.Second,
		DenyCacheSize: -1, Coalesce: co, CoalesceLanes: lanes})
	if err != nil {
		return row{}, err
	}
	defer st.Close()
	// Warm up: connections and the script.
	warm(st, l, clients)
	var (
		stop  atomic.Bool
		wg    sync.WaitGroup
		mu    sync.Mutex
		lat   []time.Duration
		fails atomic.Int64
	)
	cpu0, rcpu0, calls0 := cpu(), redisCPU(srv), scriptCalls(srv)
	stats0 := st.Stats()
	start := time.Now()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hit := []ratelimit.Hit{{Limit: l, Key: "{c" + strconv.Itoa(i) + "}", Cost: 1}}
			out := make([]ratelimit.Decision, 1)
			own := make([]time.Duration, 0, 4096)
			for !stop.Load() {
				t := time.Now()
				if _, err := st.Decide(context.Background(), t, hit, out); err != nil {
					fails.Add(1)
				}
				own = append(own, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, own...)
			mu.Unlock()
		}()
	}
	time.Sleep(dur)
	stop.Store(true)
	wg.Wait()
	el := time.Since(start)
	gcpu, rcpu, calls := cpu()-cpu0, redisCPU(srv)-rcpu0, scriptCalls(srv)-calls0
	s := st.Stats()
	n := len(lat)
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(n-1))]) / 1e3 }
	per := func(d time.Duration) float64 { return float64(d) / 1e3 / float64(n) }
	var batch float64
	if b := s.Batches - stats0.Batches; b > 0 {
		batch = float64(s.Batched-stats0.Batched) / float64(b)
	}
	return row{rate: float64(n) / el.Seconds(), p50: pct(0.5), p99: pct(0.99), gcpu: per(gcpu), rcpu: per(rcpu),
		calls: float64(calls) / float64(n), batch: batch, fails: fails.Load()}, nil
}

func warm(st *redisstore.Store, l *ratelimit.Limit, clients int) {
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]ratelimit.Decision, 1)
			for range 20 {
				st.Decide(context.Background(), time.Now(), []ratelimit.Hit{{Limit: l, Key: "{c" + strconv.Itoa(i) + "}", Cost: 1}}, out)
			}
		}()
	}
	wg.Wait()
}
