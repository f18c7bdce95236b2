// Command rlsload measures Envoy's rate limit service (ShouldRateLimit)
// through the gateway binary on the memory store: it starts a gateway
// with an [rls] table and no route, sends a fixed number of calls from
// -workers goroutines over -conns gRPC connections, and reports calls per
// second and the gateway's CPU time per call (utime+stime from
// /proc/<pid>/stat, read before and after the calls).
//
// Each call carries -descriptors descriptors (remote_address with one of
// -keys values, then path values), all under one generous limit (allowed)
// or, with -deny, under a limit of 1 a day (every call after the first
// per key is over the limit).
//
// Loopback only; Linux only (/proc).
//
//	go run ./bench/rlsload                              # 200,000 calls, 32 workers, 4 connections
//	go run ./bench/rlsload -calls 50000 -deny
//	go run ./bench/rlsload -redis 127.0.0.1:6379        # the Redis store
//	go run ./bench/rlsload -addr 127.0.0.1:8081 -pid N  # another server, e.g. envoyproxy/ratelimit
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

func main() {
	calls := flag.Int("calls", 200000, "calls to send (a fixed count: the load is bounded)")
	workers := flag.Int("workers", 32, "concurrent callers")
	conns := flag.Int("conns", 4, "gRPC connections")
	keys := flag.Int("keys", 10000, "distinct remote_address values")
	descs := flag.Int("descriptors", 2, "descriptors per call (1..8)")
	deny := flag.Bool("deny", false, "a limit of 1 a day: calls are over the limit")
	gateway := flag.String("gateway", "", "gateway binary (default: build ./cmd/gateway)")
	redis := flag.String("redis", "", "host:port of a Redis for the gateway's store (default: the memory store)")
	addr := flag.String("addr", "", "call this running service instead of starting a gateway (e.g. envoyproxy/ratelimit, loaded with the same YAML)")
	pid := flag.Int("pid", 0, "with -addr: the process whose CPU time is measured")
	printYAML := flag.Bool("print-yaml", false, "print the envoyproxy/ratelimit file the gateway loads (for the reference server) and exit")
	flag.Parse()
	if *printYAML {
		fmt.Print(yamlConfig(*deny))
		return
	}
	if *calls <= 0 || *workers <= 0 || *conns <= 0 || *keys <= 0 || *descs < 1 || *descs > 8 {
		fmt.Fprintln(os.Stderr, "rlsload: bad flags")
		os.Exit(2)
	}
	if *addr != "" {
		if *pid == 0 {
			fmt.Fprintln(os.Stderr, "rlsload: -addr needs -pid")
			os.Exit(2)
		}
		if err := measure(*addr, *pid, *calls, *workers, *conns, *keys, *descs); err != nil {
			fmt.Fprintln(os.Stderr, "rlsload:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*calls, *workers, *conns, *keys, *descs, *deny, *gateway, *redis); err != nil {
		fmt.Fprintln(os.Stderr, "rlsload:", err)
		os.Exit(1)
	}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
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

func run(calls, workers, nconns, keys, descs int, deny bool, bin, redis string) error {
	dir, err := os.MkdirTemp("", "rlsload")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if bin == "" {
		bin = filepath.Join(dir, "gateway")
		if out, err := exec.Command("go", "build", "-o", bin, "./cmd/gateway").CombinedOutput(); err != nil {
			return fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(yamlConfig(deny)), 0o600); err != nil {
		return err
	}
	var addrs [3]string
	for i := range addrs {
		if addrs[i], err = freeAddr(); err != nil {
			return err
		}
	}
	cfg := fmt.Sprintf("[server]\nlisten = %q\nadmin_listen = %q\n[rls]\nlisten = %q\nenvoy_config = [%q]\n",
		addrs[0], addrs[1], addrs[2], filepath.Join(dir, "*.yaml"))
	if redis != "" {
		cfg += fmt.Sprintf("[store]\nbackend = \"redis\"\ntimeout = \"1s\"\n[store.redis]\nurl = \"redis://%s/0\"\n", redis)
	}
	cfgPath := filepath.Join(dir, "gateway.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(bin, "--config", cfgPath)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	return measure(addrs[2], cmd.Process.Pid, calls, workers, nconns, keys, descs)
}

// measure loads the service at addr and reads process pid's CPU time.
func measure(addr string, pid, calls, workers, nconns, keys, descs int) error {
	var err error
	cs := make([]*grpc.ClientConn, nconns)
	for i := range cs {
		if cs[i], err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			return err
		}
		defer cs[i].Close()
	}
	if err := waitServing(cs[0]); err != nil {
		return err
	}
	reqs := make([]*rlpb.RateLimitRequest, keys)
	for k := range reqs {
		r := &rlpb.RateLimitRequest{Domain: "edge"}
		r.Descriptors = append(r.Descriptors, &commonpb.RateLimitDescriptor{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "10.0." + strconv.Itoa(k)}}})
		for d := 1; d < descs; d++ {
			r.Descriptors = append(r.Descriptors, &commonpb.RateLimitDescriptor{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: "path", Value: "/api/" + strconv.Itoa(k%100) + "/" + strconv.Itoa(d)}}})
		}
		reqs[k] = r
	}
	// Warm-up: every key once (connections, first counters).
	if _, _, err := load(cs, reqs, keys, workers); err != nil {
		return err
	}
	cpu0, err := cpuTime(pid)
	if err != nil {
		return err
	}
	start := time.Now()
	over, _, err := load(cs, reqs, calls, workers)
	if err != nil {
		return err
	}
	wall := time.Since(start)
	cpu1, err := cpuTime(pid)
	if err != nil {
		return err
	}
	cpu := cpu1 - cpu0
	fmt.Printf("calls %d  descriptors/call %d  workers %d  conns %d  keys %d  over_limit %d\n", calls, descs, workers, nconns, keys, over)
	fmt.Printf("wall %.2fs  calls/s %.0f  gateway CPU %.2fs  CPU µs/call %.1f  (%.2f cores)\n",
		wall.Seconds(), float64(calls)/wall.Seconds(), cpu.Seconds(), float64(cpu.Microseconds())/float64(calls), cpu.Seconds()/wall.Seconds())
	return nil
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

// load sends n calls from workers goroutines, round robin over the
// connections and requests; it returns the calls answered OVER_LIMIT.
func load(cs []*grpc.ClientConn, reqs []*rlpb.RateLimitRequest, n, workers int) (int64, int64, error) {
	var next, over atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := rlpb.NewRateLimitServiceClient(cs[w%len(cs)])
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				r, err := c.ShouldRateLimit(ctx, reqs[i%int64(len(reqs))])
				cancel()
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				if r.GetOverallCode() == rlpb.RateLimitResponse_OVER_LIMIT {
					over.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, 0, err
	}
	return over.Load(), 0, nil
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
