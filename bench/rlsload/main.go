// Command rlsload measures Envoy's rate limit service (ShouldRateLimit)
// through the gateway binary: it starts a gateway with an [rls] table and
// no route, sends a fixed number of calls from -workers goroutines over
// -conns gRPC connections, and reports calls per second, the p50 and p99
// latency of a call, and the gateway's CPU time per call (utime+stime
// from /proc/<pid>/stat, read before and after the calls) — and, with
// -redis-pid, its redis-server's.
//
// Each call carries -descriptors descriptors (remote_address with one of
// -keys values, or the same one with -hot, then path values), all under
// one generous limit (allowed) or, with -deny, under a limit of 1 a day
// (every call after the first per key is over the limit). A call is one
// decision: every descriptor of it is decided at once.
//
// -rate sends the calls at a fixed rate (calls/s, spread over the
// workers) instead of as fast as the workers can: Redis's CPU per call
// depends on how calls arrive (a busy server reads several per system
// call), so two servers' Redis CPU is compared at the same rate.
//
// -compare runs the side-by-side benchmark against envoyproxy/ratelimit
// (its binary, built from its source: go build ./src/service_cmd): a
// redis-server of its own for each (no persistence, free loopback ports,
// stopped by PID), the same YAML for both, and rounds interleaving the
// two servers (and -floor: an EVALSHA of a script that only returns, on a
// third redis-server, the least Redis can do for one call per decision),
// for one hot descriptor value and for -keys values, each at full speed
// and at -rate; it prints each run and a table of medians. -ref-stop adds
// the reference with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true, whose
// calls count as Tollgate's do (a call denied by one descriptor counts in
// none).
//
// Loopback only; Linux only (/proc).
//
//	go run ./bench/rlsload                              # 200,000 calls, 32 workers, 4 connections
//	go run ./bench/rlsload -calls 50000 -deny
//	go run ./bench/rlsload -redis 127.0.0.1:6379        # the Redis store
//	go run ./bench/rlsload -addr 127.0.0.1:8081 -pid N  # another server, e.g. envoyproxy/ratelimit
//	go run ./bench/rlsload -compare /tmp/ratelimit/ratelimit -rounds 3 -calls 30000 -rate 2000 -floor -ref-stop
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlpb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// userHZ is the unit of /proc/<pid>/stat's utime and stime.
const userHZ = 100

// load is one measurement's shape.
type load struct {
	calls, workers, conns, keys, descs int
	hot                                bool
	rate                               float64 // calls/s; 0: as fast as the workers go
}

// result is one measurement.
type result struct {
	calls, over        int
	wall               time.Duration
	p50, p99           time.Duration
	serverCPU, redisCP time.Duration // redisCP: 0 without a redis pid
}

func (r result) perCall(d time.Duration) float64 {
	return float64(d.Nanoseconds()) / 1e3 / float64(r.calls)
}

func (r result) String() string {
	s := fmt.Sprintf("calls %d  over %d  wall %.2fs  calls/s %.0f  p50 %.2fms  p99 %.2fms  server CPU µs/call %.1f",
		r.calls, r.over, r.wall.Seconds(), float64(r.calls)/r.wall.Seconds(),
		float64(r.p50.Microseconds())/1e3, float64(r.p99.Microseconds())/1e3, r.perCall(r.serverCPU))
	if r.redisCP > 0 {
		s += fmt.Sprintf("  redis-server CPU µs/call %.1f", r.perCall(r.redisCP))
	}
	return s
}

func main() {
	var l load
	flag.IntVar(&l.calls, "calls", 200000, "calls to send (a fixed count: the load is bounded)")
	flag.IntVar(&l.workers, "workers", 32, "concurrent callers")
	flag.IntVar(&l.conns, "conns", 4, "gRPC connections")
	flag.IntVar(&l.keys, "keys", 10000, "distinct remote_address values")
	flag.IntVar(&l.descs, "descriptors", 2, "descriptors per call (1..8)")
	flag.BoolVar(&l.hot, "hot", false, "one remote_address value (and one path): every call on the same counters")
	flag.Float64Var(&l.rate, "rate", 0, "calls per second (0: as fast as the workers go; with -compare: the fixed-rate runs' rate)")
	deny := flag.Bool("deny", false, "a limit of 1 a day: calls are over the limit")
	gateway := flag.String("gateway", "", "gateway binary (default: build ./cmd/gateway)")
	redisAddr := flag.String("redis", "", "host:port of a Redis for the gateway's store (default: the memory store)")
	addr := flag.String("addr", "", "call this running service instead of starting a gateway (e.g. envoyproxy/ratelimit, loaded with the same YAML)")
	pid := flag.Int("pid", 0, "with -addr: the process whose CPU time is measured")
	redisPid := flag.Int("redis-pid", 0, "also measure this redis-server's CPU time")
	printYAML := flag.Bool("print-yaml", false, "print the envoyproxy/ratelimit file the gateway loads (for the reference server) and exit")
	compare := flag.String("compare", "", "envoyproxy/ratelimit binary: run the side-by-side benchmark (see the package comment)")
	rounds := flag.Int("rounds", 3, "with -compare: interleaved rounds")
	floor := flag.Bool("floor", false, "with -compare: also an EVALSHA of a script that only returns, one per call, on its own redis-server")
	stopIncrement := flag.Bool("ref-stop", false, "with -compare: also the reference with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true (a denied call counts in none, as Tollgate decides), on its own redis-server")
	flag.Parse()
	if *printYAML {
		fmt.Print(yamlConfig(*deny))
		return
	}
	if l.calls <= 0 || l.workers <= 0 || l.conns <= 0 || l.keys <= 0 || l.descs < 1 || l.descs > 8 || l.rate < 0 || *rounds <= 0 {
		fmt.Fprintln(os.Stderr, "rlsload: bad flags")
		os.Exit(2)
	}
	if l.hot {
		l.keys = 1
	}
	var err error
	switch {
	case *compare != "":
		err = runCompare(l, *rounds, *floor, *stopIncrement, *compare, *gateway)
	case *addr != "":
		if *pid == 0 {
			fmt.Fprintln(os.Stderr, "rlsload: -addr needs -pid")
			os.Exit(2)
		}
		var r result
		if r, err = measure(*addr, *pid, *redisPid, l, true); err == nil {
			printLoad(l)
			fmt.Println(r)
		}
	default:
		err = run(l, *deny, *gateway, *redisAddr, *redisPid)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlsload:", err)
		os.Exit(1)
	}
}

func printLoad(l load) {
	fmt.Printf("calls %d  descriptors/call %d  workers %d  conns %d  keys %d  rate %.0f/s\n", l.calls, l.descs, l.workers, l.conns, l.keys, l.rate)
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// yamlConfig returns the envoyproxy/ratelimit file both servers load.
func yamlConfig(deny bool) string {
	limit, unit := "1000000000", "second"
	if deny {
		limit, unit = "1", "day"
	}
	return "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: " + unit + ", requests_per_unit: " + limit + "}\n" +
		"  - key: path\n    value: /api/*\n    rate_limit: {unit: " + unit + ", requests_per_unit: " + limit + "}\n"
}

// buildGateway builds ./cmd/gateway into dir unless bin names one.
func buildGateway(dir, bin string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	bin = filepath.Join(dir, "gateway")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/gateway").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}

// startGateway starts the gateway binary with an [rls] listener loading
// the YAML in dir, on the memory store or the Redis at redisAddr; it
// returns the process and the gRPC address.
func startGateway(bin, dir, redisAddr string) (*exec.Cmd, string, error) {
	var addrs [3]string
	for i := range addrs {
		var err error
		if addrs[i], err = freeAddr(); err != nil {
			return nil, "", err
		}
	}
	cfg := fmt.Sprintf("[server]\nlisten = %q\nadmin_listen = %q\n[rls]\nlisten = %q\nenvoy_config = [%q]\n",
		addrs[0], addrs[1], addrs[2], filepath.Join(dir, "*.yaml"))
	if redisAddr != "" {
		cfg += fmt.Sprintf("[store]\nbackend = \"redis\"\ntimeout = \"1s\"\n[store.redis]\nurl = \"redis://%s/0\"\n", redisAddr)
	}
	cfgPath := filepath.Join(dir, "gateway.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin, "--config", cfgPath)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	return cmd, addrs[2], nil
}

// stop ends a process this program started, by its PID.
func stop(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
}

func run(l load, deny bool, bin, redisAddr string, redisPid int) error {
	dir, err := os.MkdirTemp("", "rlsload")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin, err = buildGateway(dir, bin); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(yamlConfig(deny)), 0o600); err != nil {
		return err
	}
	cmd, addr, err := startGateway(bin, dir, redisAddr)
	if err != nil {
		return err
	}
	defer stop(cmd)
	r, err := measure(addr, cmd.Process.Pid, redisPid, l, true)
	if err != nil {
		return err
	}
	printLoad(l)
	fmt.Println(r)
	return nil
}

// requests are the calls' requests, one per remote_address value.
func requests(l load) []*rlpb.RateLimitRequest {
	reqs := make([]*rlpb.RateLimitRequest, l.keys)
	for k := range reqs {
		r := &rlpb.RateLimitRequest{Domain: "edge"}
		r.Descriptors = append(r.Descriptors, &commonpb.RateLimitDescriptor{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0." + strconv.Itoa(k)}}})
		for d := 1; d < l.descs; d++ {
			r.Descriptors = append(r.Descriptors, &commonpb.RateLimitDescriptor{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "path", Value: "/api/" + strconv.Itoa(k%100) + "/" + strconv.Itoa(d)}}})
		}
		reqs[k] = r
	}
	return reqs
}

// measure loads the service at addr and reads process pid's CPU time
// (and redisPid's when not 0). warm sends every request once first.
func measure(addr string, pid, redisPid int, l load, warm bool) (result, error) {
	var err error
	cs := make([]*grpc.ClientConn, l.conns)
	for i := range cs {
		if cs[i], err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			return result{}, err
		}
		defer cs[i].Close()
	}
	if err := waitServing(cs[0]); err != nil {
		return result{}, err
	}
	reqs := requests(l)
	send := func(ctx context.Context, w, i int) (bool, error) {
		c := rlpb.NewRateLimitServiceClient(cs[w%len(cs)])
		r, err := c.ShouldRateLimit(ctx, reqs[i%len(reqs)])
		return r.GetOverallCode() == rlpb.RateLimitResponse_OVER_LIMIT, err
	}
	if warm {
		// Warm-up: every key once (connections, first counters).
		if _, err := drive(send, load{calls: max(l.keys, 2000), workers: l.workers}, -1); err != nil {
			return result{}, err
		}
	}
	return drive(send, l, pid, redisPid)
}

// drive makes l.calls calls of send from l.workers goroutines, at l.rate
// when it is not 0, and measures them; pids are the processes whose CPU
// is read (the first the server's, the second Redis's; -1: none).
func drive(send func(ctx context.Context, worker, i int) (bool, error), l load, pids ...int) (result, error) {
	cpu := func() ([2]time.Duration, error) {
		var t [2]time.Duration
		for i, p := range pids {
			if p <= 0 {
				continue
			}
			var err error
			if t[i], err = cpuTime(p); err != nil {
				return t, err
			}
		}
		return t, nil
	}
	cpu0, err := cpu()
	if err != nil {
		return result{}, err
	}
	var next, over atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	lat := make([][]time.Duration, l.workers)
	start := time.Now()
	for w := range l.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ls := make([]time.Duration, 0, l.calls/l.workers+1)
			defer func() { lat[w] = ls }()
			for {
				i := next.Add(1) - 1
				if i >= int64(l.calls) {
					return
				}
				if l.rate > 0 {
					// Call i is due at start + i/rate: each worker takes
					// the next due call and waits for its instant.
					if d := time.Until(start.Add(time.Duration(float64(i) / l.rate * float64(time.Second)))); d > 0 {
						time.Sleep(d)
					}
				}
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				o, err := send(ctx, w, int(i))
				cancel()
				ls = append(ls, time.Since(t0))
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				if o {
					over.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	if err, _ := firstErr.Load().(error); err != nil {
		return result{}, err
	}
	cpu1, err := cpu()
	if err != nil {
		return result{}, err
	}
	var all []time.Duration
	for _, ls := range lat {
		all = append(all, ls...)
	}
	slices.Sort(all)
	q := func(f float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(f*float64(len(all))))]
	}
	return result{calls: l.calls, over: int(over.Load()), wall: wall, p50: q(0.50), p99: q(0.99),
		serverCPU: cpu1[0] - cpu0[0], redisCP: cpu1[1] - cpu0[1]}, nil
}

func waitServing(cc *grpc.ClientConn) error {
	hc := healthpb.NewHealthClient(cc)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("the rate limit service did not become SERVING")
}

// cpuTime is a process's user plus system CPU time.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / userHZ, nil
}
