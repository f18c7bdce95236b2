// Command healthcost measures what active health checks cost the gateway:
// it starts -targets HTTP listeners on loopback (one process, one port
// each, /healthz answering 200), runs a gateway whose one route balances
// over all of them with health_check.interval = -interval, and reads the
// gateway's CPU time (utime+stime from /proc/<pid>/stat) over -duration
// after one interval of warm-up. It runs the same route without a health
// check first, as the baseline of an idle gateway, and prints both with
// the probes served and the connections they opened (keep-alive: one per
// target, not one per probe).
//
// Loopback only; Linux only (/proc).
//
//	go run ./bench/healthcost                       # 1,000 targets, 5s interval, 30s
//	go run ./bench/healthcost -targets 200 -duration 10s
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// profile is the -profile file; "" takes none.
var profile string

// userHZ is the unit of /proc/<pid>/stat's utime and stime: fixed at 100
// by the kernel's ABI whatever the kernel's own tick rate.
const userHZ = 100

func main() {
	targets := flag.Int("targets", 1000, "upstream targets (at most 1024: a route's bound)")
	interval := flag.Duration("interval", 5*time.Second, "health_check.interval")
	duration := flag.Duration("duration", 30*time.Second, "measuring window")
	gateway := flag.String("gateway", "", "gateway binary (default: build ./cmd/gateway)")
	flag.StringVar(&profile, "profile", "", "write a CPU profile of the gateway's health-checked window to this file")
	flag.Parse()
	if *targets < 2 || *targets > 1024 || *interval < time.Second || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "healthcost: -targets 2..1024, -interval ≥ 1s, -duration > 0")
		os.Exit(2)
	}
	if err := run(*targets, *interval, *duration, *gateway); err != nil {
		fmt.Fprintln(os.Stderr, "healthcost:", err)
		os.Exit(1)
	}
}

func run(n int, interval, window time.Duration, bin string) error {
	dir, err := os.MkdirTemp("", "healthcost")
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
	var probes, conns atomic.Int64
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/healthz" {
				probes.Add(1)
			}
			w.Write([]byte("ok\n"))
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	}
	urls := make([]string, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("listener %d: %w", i, err)
		}
		urls[i] = fmt.Sprintf("%q", "http://"+ln.Addr().String())
		go srv.Serve(ln)
	}
	defer srv.Close()

	fmt.Printf("| health check | targets | interval | window | gateway CPU | share of a core | probes/s | connections opened |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|\n")
	for _, hc := range []bool{false, true} {
		check := ""
		if hc {
			check = fmt.Sprintf("health_check = { path = \"/healthz\", interval = %q, timeout = \"1s\" }\n", interval)
		}
		cpu, p, c, err := measure(bin, dir, strings.Join(urls, ", "), check, interval, window, &probes, &conns)
		if err != nil {
			return err
		}
		label := "none"
		if hc {
			label = "yes"
		}
		fmt.Printf("| %s | %d | %s | %s | %.3f s | %.2f %% | %.1f | %d |\n", label, n, interval, window,
			cpu.Seconds(), 100*cpu.Seconds()/window.Seconds(), float64(p)/window.Seconds(), c)
	}
	return nil
}

// measure runs the gateway on one config and returns its CPU time over
// window (after a warm-up of one interval plus two seconds), the probes
// served and the connections opened in the window.
func measure(bin, dir, upstreams, check string, interval, window time.Duration, probes, conns *atomic.Int64) (time.Duration, int64, int64, error) {
	listen, admin, err := freeAddr(), freeAddr(), error(nil)
	cfg := fmt.Sprintf("[server]\nlisten = %q\nadmin_listen = %q\n\n[[routes]]\nname = \"many\"\npath_prefix = \"/\"\nupstreams = [%s]\n%s",
		listen, admin, upstreams, check)
	path := filepath.Join(dir, "gateway.toml")
	if err = os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return 0, 0, 0, err
	}
	cmd := exec.Command(bin, "--config", path)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, 0, 0, err
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		if r, err := http.Get("http://" + admin + "/healthz"); err == nil {
			r.Body.Close()
			break
		}
		if ctx.Err() != nil {
			return 0, 0, 0, errors.New("the gateway did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(interval + 2*time.Second)
	t0, err := cpuTime(cmd.Process.Pid)
	if err != nil {
		return 0, 0, 0, err
	}
	p0, c0 := probes.Load(), conns.Load()
	if profile != "" && check != "" {
		// The profile's own cost is in the window's figures: compare with
		// a run without -profile.
		if err := fetchProfile(admin, window, profile); err != nil {
			return 0, 0, 0, err
		}
	} else {
		time.Sleep(window)
	}
	t1, err := cpuTime(cmd.Process.Pid)
	if err != nil {
		return 0, 0, 0, err
	}
	return t1 - t0, probes.Load() - p0, conns.Load() - c0, nil
}

// cpuTime returns the process's user plus system CPU time.
func cpuTime(pid int) (time.Duration, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15.
	rest := line[strings.LastIndexByte(line, ')')+2:]
	fs := strings.Fields(rest)
	u, err1 := strconv.ParseInt(fs[11], 10, 64)
	s, err2 := strconv.ParseInt(fs[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(u+s) * time.Second / userHZ, nil
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// fetchProfile writes a CPU profile of the gateway over window to path.
func fetchProfile(admin string, window time.Duration, path string) error {
	r, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", admin, int(window.Seconds())))
	if err != nil {
		return err
	}
	defer r.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.ReadFrom(r.Body)
	return err
}
