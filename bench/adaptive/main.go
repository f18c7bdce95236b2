// Command adaptive measures an adaptive_concurrency limit through the
// gateway binary against the best static concurrency limit, in one run.
//
// Two in-process upstreams each serve -capacity requests at once for
// -service each and queue the rest (latency grows with load, as a thread
// pool's does). One gateway forwards /static to the first under a
// concurrency limit of max_in_flight = capacity (the best static limit,
// which an operator rarely knows) and /adaptive to the second under an
// adaptive_concurrency limit. 8×capacity closed-loop clients load each
// route (a client refused backs off -backoff). After -phase the capacity
// of both upstreams halves, after another it doubles back. Then a second
// run overloads the adaptive route with 10% critical, 45% normal and 45%
// sheddable clients under reserve = 0.2.
//
// It prints goodput and p99 per phase and route, the time the learned limit
// took to follow each change, the classes' success ratios, writes the
// learned limit sampled every 100ms as CSV (-csv) and plots it (-png).
//
// Every client stops at the end of its phase: the run is bounded in time
// (about 4×-phase), and so in requests.
//
//	go run ./bench/adaptive -csv docs/benchmarks/adaptive.csv -png docs/adaptive-limit.png
package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	capacity := flag.Int("capacity", 16, "requests each upstream serves at once")
	service := flag.Duration("service", 50*time.Millisecond, "the upstreams' service time")
	phase := flag.Duration("phase", 15*time.Second, "length of each phase")
	backoff := flag.Duration("backoff", time.Second, "a refused client's pause before its next request (the gateway's Retry-After)")
	bin := flag.String("bin", "", "gateway binary (default: built from ./cmd/gateway)")
	csvPath := flag.String("csv", "", "write the learned limit over time here")
	pngPath := flag.String("png", "", "plot the learned limit over time here")
	flag.Parse()
	if err := run(*capacity, *service, *phase, *backoff, *bin, *csvPath, *pngPath); err != nil {
		fmt.Fprintln(os.Stderr, "adaptive:", err)
		os.Exit(1)
	}
}

// queue is an upstream serving cap requests at once for service each.
type queue struct {
	service time.Duration
	mu      sync.Mutex
	cond    *sync.Cond
	cap     int
	busy    int
}

func newQueue(c int, service time.Duration) *queue {
	q := &queue{service: service, cap: c}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *queue) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q.mu.Lock()
	for q.busy >= q.cap {
		q.cond.Wait()
	}
	q.busy++
	q.mu.Unlock()
	time.Sleep(q.service)
	q.mu.Lock()
	q.busy--
	q.cond.Broadcast()
	q.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

func (q *queue) setCap(c int) {
	q.mu.Lock()
	q.cap = c
	q.cond.Broadcast()
	q.mu.Unlock()
}

func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// stats are one route's answers in one phase.
type stats struct {
	mu      sync.Mutex
	ok      []time.Duration // latencies of 200s
	refused int
	failed  int
}

func (s *stats) add(status int, lat time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch status {
	case 200:
		s.ok = append(s.ok, lat)
	case 429, 503:
		s.refused++
	default:
		s.failed++
	}
}

func (s *stats) p99() time.Duration {
	if len(s.ok) == 0 {
		return 0
	}
	c := slices.Clone(s.ok)
	slices.Sort(c)
	return c[len(c)*99/100]
}

// clients runs n closed-loop clients on url until end, each adding its
// answers to the stats that cur returns at the time of the answer.
func clients(n int, url string, end time.Time, backoff time.Duration, hdr func(i int) (string, *stats), cur func() int, st func(i, phase int) *stats) *sync.WaitGroup {
	var wg sync.WaitGroup
	tr := &http.Transport{MaxIdleConnsPerHost: n, MaxConnsPerHost: n}
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				req, _ := http.NewRequest("GET", url, nil)
				if hdr != nil {
					if p, _ := hdr(i); p != "" {
						req.Header.Set("X-Priority", p)
					}
				}
				t := time.Now()
				resp, err := c.Do(req)
				status := 0
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					status = resp.StatusCode
				}
				st(i, cur()).add(status, time.Since(t))
				if status != 200 {
					time.Sleep(backoff)
				}
			}
		}()
	}
	return &wg
}

// learned reads the learned limit of a limit from /admin/limits.
func learned(admin, limit string) (float64, int64, error) {
	resp, err := http.Get("http://" + admin + "/admin/limits?limit=" + limit)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var v struct {
		Limiters []struct {
			Learned  float64 `json:"learned_limit"`
			InFlight int64   `json:"in_flight"`
		} `json:"limiters"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || len(v.Limiters) != 1 {
		return 0, 0, fmt.Errorf("/admin/limits?limit=%s: %v", limit, err)
	}
	return v.Limiters[0].Learned, v.Limiters[0].InFlight, nil
}

type sample struct {
	t        time.Duration
	learned  float64
	inflight int64
	capacity int
}

func startGateway(bin, dir, cfg, admin string) (func(), error) {
	path := filepath.Join(dir, "gateway.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config", path)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	for {
		if r, err := http.Get("http://" + admin + "/healthz"); err == nil {
			r.Body.Close()
			return stop, nil
		}
		if ctx.Err() != nil {
			stop()
			return nil, errors.New("the gateway did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func run(c int, service, phase, backoff time.Duration, bin, csvPath, pngPath string) error {
	dir, err := os.MkdirTemp("", "adaptive")
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
	qs, qa, qp := newQueue(c, service), newQueue(c, service), newQueue(c, service)
	us, stopS, err := serve(qs)
	if err != nil {
		return err
	}
	defer stopS()
	ua, stopA, err := serve(qa)
	if err != nil {
		return err
	}
	defer stopA()
	up, stopP, err := serve(qp)
	if err != nil {
		return err
	}
	defer stopP()
	listen, admin := freeAddr(), freeAddr()
	cfg := fmt.Sprintf(`[server]
listen = %q
admin_listen = %q

[[limits]]
name = "static"
algorithm = "concurrency"
max_in_flight = %d
by = []

[[limits]]
name = "adaptive"
algorithm = "adaptive_concurrency"
by = []
min_in_flight = 2

[[limits]]
name = "prio"
algorithm = "adaptive_concurrency"
by = []
min_in_flight = 2
reserve = 0.2
priority_header = "X-Priority"
priority_trusted_from = ["127.0.0.0/8"]

[[routes]]
name = "static"
path_prefix = "/static"
upstream = %q
limits = ["static"]

[[routes]]
name = "adaptive"
path_prefix = "/adaptive"
upstream = %q
limits = ["adaptive"]

[[routes]]
name = "prio"
path_prefix = "/prio"
upstream = %q
limits = ["prio"]
`, listen, admin, c, us, ua, up)
	stop, err := startGateway(bin, dir, cfg, admin)
	if err != nil {
		return err
	}
	defer stop()

	// Run 1: static beside adaptive, capacity C, C/2, C, after a warm-up
	// at C that is not recorded (phase -1).
	caps := []int{c, c / 2, c}
	var ph atomic.Int32
	ph.Store(-1)
	var st [2][3]stats // route (static, adaptive) × phase
	var warmup stats
	n := 8 * c
	startLoad := time.Now()
	start := startLoad.Add(phase / 3)
	end := start.Add(3 * phase)
	cur := func() int { return int(ph.Load()) }
	rec := func(r int) func(_, p int) *stats {
		return func(_, p int) *stats {
			if p < 0 {
				return &warmup
			}
			return &st[r][p]
		}
	}
	w1 := clients(n, "http://"+listen+"/static", end, backoff, nil, cur, rec(0))
	w2 := clients(n, "http://"+listen+"/adaptive", end, backoff, nil, cur, rec(1))
	time.Sleep(time.Until(start))
	var samples []sample
	changed := [3]time.Duration{0, phase, 2 * phase}
	for time.Now().Before(end) {
		el := time.Since(start)
		p := min(int(el/phase), 2)
		if p != cur() {
			qs.setCap(caps[p])
			qa.setCap(caps[p])
			ph.Store(int32(p))
		}
		l, inf, err := learned(admin, "adaptive")
		if err != nil {
			return err
		}
		samples = append(samples, sample{t: el, learned: l, inflight: inf, capacity: caps[p]})
		time.Sleep(100 * time.Millisecond)
	}
	w1.Wait()
	w2.Wait()

	fmt.Printf("capacity %d, service %v, %d clients per route, phases of %v after %v of warm-up, backoff %v\n", c, service, n, phase, phase/3, backoff)
	names := []string{"static (max_in_flight = C)", "adaptive_concurrency"}
	for p := range 3 {
		// A phase's figures include its start: following the change.
		secs := phase.Seconds()
		fmt.Printf("phase %d (capacity %d, ideal %.0f/s):\n", p+1, caps[p], float64(caps[p])/service.Seconds())
		for r := range 2 {
			s := &st[r][p]
			fmt.Printf("  %-27s goodput %6.1f/s  p99 %7.1fms  refused %6d  failed %d\n", names[r],
				float64(len(s.ok))/secs, ms(s.p99()), s.refused, s.failed)
		}
		r0, r1 := &st[0][p], &st[1][p]
		fmt.Printf("  ratio adaptive/static: goodput %.2f, p99 %.2f; p99/service %.2f\n",
			float64(len(r1.ok))/float64(max(len(r0.ok), 1)), ms(r1.p99())/ms(r0.p99()), ms(r1.p99())/ms(service))
	}
	// Following: the first sample after a change within the band of the
	// new capacity (down: ≤ 1.5·C/2; up: ≥ 0.9·C).
	downT, upT := time.Duration(-1), time.Duration(-1)
	for _, s := range samples {
		if downT < 0 && s.t >= changed[1] && s.learned <= 1.5*float64(caps[1]) {
			downT = s.t - changed[1]
		}
		if upT < 0 && s.t >= changed[2] && s.learned >= 0.9*float64(caps[2]) {
			upT = s.t - changed[2]
		}
	}
	fmt.Printf("learned limit followed the halving (≤ 1.5×%d) after %v, the doubling (≥ 0.9×%d) after %v\n", caps[1], downT.Round(100*time.Millisecond), caps[2], upT.Round(100*time.Millisecond))

	// Run 2: priorities in an overload.
	var ps [3]stats // critical, normal, sheddable
	cls := func(i int) (string, *stats) {
		switch {
		case i%10 == 0:
			return "critical", &ps[0]
		case i%2 == 0:
			return "normal", &ps[1]
		}
		return "sheddable", &ps[2]
	}
	warm := time.Now().Add(phase / 3)
	var discard stats
	end2 := time.Now().Add(phase + phase/3)
	w3 := clients(n, "http://"+listen+"/prio", end2, backoff, cls, func() int { return 0 }, func(i, _ int) *stats {
		if time.Now().Before(warm) {
			return &discard
		}
		_, s := cls(i)
		return s
	})
	w3.Wait()
	fmt.Printf("priorities, %d clients (10%% critical, 45%% normal, 45%% sheddable), reserve 0.2, over %v:\n", n, phase)
	for i, name := range []string{"critical", "normal", "sheddable"} {
		s := &ps[i]
		all := len(s.ok) + s.refused + s.failed
		fmt.Printf("  %-9s %6d requests, %.4f served, p99 %7.1fms (%.2f× service)\n", name, all,
			float64(len(s.ok))/float64(max(all, 1)), ms(s.p99()), ms(s.p99())/ms(service))
	}

	if csvPath != "" {
		f, err := os.Create(csvPath)
		if err != nil {
			return err
		}
		w := csv.NewWriter(f)
		_ = w.Write([]string{"seconds", "learned_limit", "in_flight", "capacity"})
		for _, s := range samples {
			_ = w.Write([]string{strconv.FormatFloat(s.t.Seconds(), 'f', 2, 64), strconv.FormatFloat(s.learned, 'f', 2, 64),
				strconv.FormatInt(s.inflight, 10), strconv.Itoa(s.capacity)})
		}
		w.Flush()
		if err := errors.Join(w.Error(), f.Close()); err != nil {
			return err
		}
	}
	if pngPath != "" {
		return plot(pngPath, samples, 3*phase)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
