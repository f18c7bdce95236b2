package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// target is one server under test: a gateway process in one mode, a
// floor process (bench/floor) in one mode, or one server block of the
// nginx peer.
type target struct {
	peer   string // "tollgate", "floor" or "nginx"
	m      mode
	url    string
	script string // wrk Lua script rotating keys, "" for the hot key
	// cpu returns the CPU time used so far by the target's processes.
	cpu func() time.Duration
}

func (t *target) name() string { return t.peer + " " + t.m.name }

// round is one measured wrk run against one target.
type round struct {
	wrk                       wrkResult
	proxyCPU, upCPU, redisCPU time.Duration
}

// targetResult collects a target's rounds and its callgrind figure.
type targetResult struct {
	t      *target
	rounds []round
	// instructions per request under callgrind (user space), 0 if not measured.
	instr      float64
	redisInstr float64 // redis-server instructions per decision (Redis modes)
	cgRequests int64
	cgNon2xx   int64
	cgErr      string
}

// results is everything the report prints.
type results struct {
	started, finished time.Time
	targets           []*targetResult
	callgrind         bool
}

// env is the running benchmark: its temp dir, processes and shared parts.
type env struct {
	o       *options
	tmp     string
	ps      *procs
	gateway string // built binary
	floor   string // built bench/floor binary
	base    string // gateway built from -base-root, "" without
	upAddr  string
	// upAddrs are every address the upstream listens on (upAddr first):
	// the targets of the balancing modes.
	upAddrs  []string
	upProc   *proc
	redis    *proc
	redisAdr string
}

func bench(ctx context.Context, o *options, modes []mode, tmp string, ps *procs) (*results, error) {
	e := &env{o: o, tmp: tmp, ps: ps}
	res := &results{started: time.Now(), callgrind: o.callgrind == "on"}

	e.gateway = filepath.Join(tmp, "gateway")
	if err := goBuild(ctx, o.root, "./cmd/gateway", e.gateway); err != nil {
		return nil, err
	}
	if o.baseRoot != "" {
		e.base = filepath.Join(tmp, "gateway-base")
		if err := goBuild(ctx, o.baseRoot, "./cmd/gateway", e.base); err != nil {
			return nil, err
		}
	}
	e.floor = filepath.Join(tmp, "floor")
	if err := goBuild(ctx, o.root, "./bench/floor", e.floor); err != nil {
		return nil, err
	}
	if err := e.startUpstream(); err != nil {
		return nil, err
	}
	for _, m := range modes {
		if m.redis {
			if err := e.startRedis(); err != nil {
				return nil, err
			}
			break
		}
	}

	var targets []*target
	var nginxServers []nginxServer
	nginxTargets := map[int]mode{}
	script := ""
	for _, m := range modes {
		if m.manyKeys && script == "" {
			var err error
			if script, err = keysScript(tmp, o.load.keys); err != nil {
				return nil, err
			}
		}
	}
	for _, m := range modes {
		t, err := e.startGateway(m, e.redisAdr, "50ms", false)
		if err != nil {
			return nil, err
		}
		if m.manyKeys {
			t.script = script
		}
		targets = append(targets, t)
		if e.base != "" {
			b, err := e.startGatewayBin(e.base, "base", m, e.redisAdr, "50ms", false)
			if err != nil {
				return nil, err
			}
			if m.manyKeys {
				b.script = script
			}
			targets = append(targets, b)
		}
		if !m.redis {
			f, err := e.startFloor(m, false)
			if err != nil {
				return nil, err
			}
			targets = append(targets, f)
			if m.targets > 0 {
				continue // nginx's balancing is not set up here
			}
			port, err := freePort()
			if err != nil {
				return nil, err
			}
			nginxServers = append(nginxServers, nginxServer{port: port, limit: m.limit})
			nginxTargets[port] = m
		}
	}
	if len(nginxServers) > 0 {
		ng, err := e.startNginx("nginx", nginxServers, o.nginxWorkers, false)
		if err != nil {
			return nil, err
		}
		pid := ng.cmd.Process.Pid
		// Interleave: each nginx mode right after the same mode of the
		// gateway and the floor.
		var mixed []*target
		for _, t := range targets {
			mixed = append(mixed, t)
			if t.peer != "floor" {
				continue
			}
			for _, s := range nginxServers {
				if m := nginxTargets[s.port]; m.name == t.m.name {
					mixed = append(mixed, &target{peer: "nginx", m: m, script: t.script,
						url: fmt.Sprintf("http://127.0.0.1:%d/", s.port), cpu: func() time.Duration { return groupCPU(pid) }})
				}
			}
		}
		targets = mixed
	}

	for _, t := range targets {
		res.targets = append(res.targets, &targetResult{t: t})
	}
	fmt.Fprintf(os.Stderr, "peerbench: %d targets; warm-up %s each, then %d rounds of %s\n",
		len(targets), o.warmup, o.rounds, o.duration)
	for _, t := range targets {
		if _, _, err := runWrk(ctx, o.load.wrkArgs(t.url, t.script, o.warmup)); err != nil {
			return nil, fmt.Errorf("%s warm-up: %w", t.name(), err)
		}
	}
	for r := 0; r < o.rounds; r++ {
		order := make([]*targetResult, len(res.targets))
		copy(order, res.targets)
		if r%2 == 1 {
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		for _, tr := range order {
			rd, err := e.measure(ctx, tr.t)
			if err != nil {
				return nil, err
			}
			tr.rounds = append(tr.rounds, rd)
			fmt.Fprintf(os.Stderr, "peerbench: round %d %-30s %8.0f req/s  p50 %-9s p99 %-9s cpu %6.1f µs/req\n",
				r+1, tr.t.name(), rd.wrk.rps, rd.wrk.p50, rd.wrk.p99, perReq(rd.proxyCPU, rd.wrk.requests))
		}
	}
	if res.callgrind {
		if err := e.callgrindAll(ctx, res, nginxServers); err != nil {
			return nil, err
		}
	}
	res.finished = time.Now()
	return res, nil
}

// measure runs one wrk round against t and the CPU deltas around it.
func (e *env) measure(ctx context.Context, t *target) (round, error) {
	upPID := e.upProc.cmd.Process.Pid
	redisCPU := func() time.Duration { return 0 }
	if t.m.redis {
		pid := e.redis.cmd.Process.Pid
		redisCPU = func() time.Duration { d, _ := cpuTime(pid); return d }
	}
	p0, r0 := t.cpu(), redisCPU()
	u0, _ := cpuTime(upPID)
	w, _, err := runWrk(ctx, e.o.load.wrkArgs(t.url, t.script, e.o.duration))
	if err != nil {
		return round{}, fmt.Errorf("%s: %w", t.name(), err)
	}
	p1, r1 := t.cpu(), redisCPU()
	u1, _ := cpuTime(upPID)
	return round{wrk: w, proxyCPU: p1 - p0, upCPU: u1 - u0, redisCPU: r1 - r0}, nil
}

func (e *env) startUpstream() error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	e.upAddr = fmt.Sprintf("127.0.0.1:%d", port)
	e.upAddrs = []string{e.upAddr}
	for len(e.upAddrs) < maxTargets {
		p, err := freePort()
		if err != nil {
			return err
		}
		e.upAddrs = append(e.upAddrs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	e.upProc, err = e.ps.start(e.tmp, "upstream", nil, self, "upstream", "-listen", strings.Join(e.upAddrs, ","))
	if err != nil {
		return err
	}
	for _, a := range e.upAddrs {
		if err := waitHTTP(e.upProc, a, "/", 10*time.Second); err != nil {
			return err
		}
	}
	return nil
}

func (e *env) startRedis() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	e.redisAdr = fmt.Sprintf("127.0.0.1:%d", port)
	bin, err := lookPath("redis-server")
	if err != nil {
		return err
	}
	e.redis, err = e.ps.start(e.tmp, "redis", nil, bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", e.tmp, "--daemonize", "no", "--protected-mode", "no")
	if err != nil {
		return err
	}
	return waitRedis(e.redis, e.redisAdr, 10*time.Second)
}

// startGateway starts a gateway in mode m; under callgrind when cg is set.
func (e *env) startGateway(m mode, redisAddr, storeTimeout string, cg bool) (*target, error) {
	return e.startGatewayBin(e.gateway, "tollgate", m, redisAddr, storeTimeout, cg)
}

// startGatewayBin starts the gateway binary bin as peer ("tollgate", or
// "base" for the -base-root build) in mode m.
func (e *env) startGatewayBin(bin, peer string, m mode, redisAddr, storeTimeout string, cg bool) (*target, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	admin, err := freePort()
	if err != nil {
		return nil, err
	}
	name := "gateway-" + m.name
	if peer != "tollgate" {
		name = peer + "-" + name
	}
	if cg {
		name = "cg-" + name
	} else if redisAddr != e.redisAdr {
		name = "cgredis-" + name
	}
	listen, adminAddr := fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("127.0.0.1:%d", admin)
	conf := gatewayTOML(m, listen, adminAddr, strings.Join(e.upAddrs, ","), redisAddr, storeTimeout)
	if e.o.gcMinHeap >= 0 && peer == "tollgate" {
		// Only the gateway under test: an older checkout (peer "base")
		// may not know the key.
		conf = strings.Replace(conf, "[server]\n", fmt.Sprintf("[server]\ngc_min_heap = %d\n", e.o.gcMinHeap), 1)
	}
	confPath := filepath.Join(e.tmp, name+".toml")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	args := []string{"--config", confPath, "--log-level", "warn"}
	var envv []string
	wait := 15 * time.Second
	if cg {
		envv = []string{callgrindGODEBUG}
		args = append([]string{"--tool=callgrind", "--callgrind-out-file=" + filepath.Join(e.tmp, name+".cg"), bin}, args...)
		bin, wait = "valgrind", 90*time.Second
	}
	p, err := e.ps.start(e.tmp, name, envv, bin, args...)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(p, adminAddr, "/healthz", wait); err != nil {
		return nil, err
	}
	pid := p.cmd.Process.Pid
	return &target{peer: peer, m: m, url: "http://" + listen + "/",
		cpu: func() time.Duration { d, _ := cpuTime(pid); return d }}, nil
}

// callgrindGODEBUG is the environment of a Go process under callgrind:
// no asynchronous preemption signals, and no RDTSCP in the runtime's cycle
// counter (valgrind 3.19 does not decode it and kills the process with
// SIGILL on CPUs that have it).
const callgrindGODEBUG = "GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off"

// startFloor starts bench/floor in mode m (the limit of gatewayTOML as
// a fixed window per API key); under callgrind when cg is set.
func (e *env) startFloor(m mode, cg bool) (*target, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	name := "floor-" + m.name
	if cg {
		name = "cg-" + name
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	bin, args := e.floor, []string{"-listen", listen, "-upstream", "http://" + e.upAddr}
	if m.targets > 0 {
		args = []string{"-listen", listen, "-balance", m.balance,
			"-upstream", "http://" + strings.Join(e.upAddrs[:m.targets], ",http://")}
	}
	switch m.limit {
	case "allow":
		args = append(args, "-rate", strconv.Itoa(floorAllowRate), "-per", "1s")
	case "deny":
		args = append(args, "-rate", "1", "-per", "1h")
	}
	var envv []string
	wait := 10 * time.Second
	if cg {
		envv = []string{callgrindGODEBUG}
		args = append([]string{"--tool=callgrind", "--callgrind-out-file=" + filepath.Join(e.tmp, name+".cg"), bin}, args...)
		bin, wait = "valgrind", 60*time.Second
	}
	p, err := e.ps.start(e.tmp, name, envv, bin, args...)
	if err != nil {
		return nil, err
	}
	// The probe sends no API key: it counts against the loopback
	// address, not against the hot key.
	if err := waitHTTP(p, listen, "/", wait); err != nil {
		return nil, err
	}
	pid := p.cmd.Process.Pid
	return &target{peer: "floor", m: m, url: "http://" + listen + "/",
		cpu: func() time.Duration { d, _ := cpuTime(pid); return d }}, nil
}

// startNginx starts nginx with one server block per entry of servers;
// single-process (master_process off) when cg is set, under callgrind.
func (e *env) startNginx(name string, servers []nginxServer, workers int, cg bool) (*proc, error) {
	dir := filepath.Join(e.tmp, name)
	for _, sub := range []string{"", "client_body", "proxy", "fastcgi", "uwsgi", "scgi", "logs"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o777); err != nil {
			return nil, err
		}
	}
	// Workers may run as another user when started by root: let them in.
	_ = os.Chmod(e.tmp, 0o755)
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxConf(dir, workers, e.upAddr, servers, cg)), 0o644); err != nil {
		return nil, err
	}
	bin, err := lookPath("nginx")
	if err != nil {
		return nil, err
	}
	args := []string{"-p", dir, "-c", conf, "-e", filepath.Join(dir, "nginx-error.log")}
	wait := 10 * time.Second
	if cg {
		args = append([]string{"--tool=callgrind", "--callgrind-out-file=" + filepath.Join(e.tmp, name+".cg"), bin}, args...)
		bin, wait = "valgrind", 60*time.Second
	}
	p, err := e.ps.start(e.tmp, name, nil, bin, args...)
	if err != nil {
		return nil, err
	}
	for _, s := range servers {
		if err := waitHTTP(p, fmt.Sprintf("127.0.0.1:%d", s.port), "/", wait); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// callgrindAll measures instructions per request of every target: a fresh
// instance under callgrind, warmed up, counters zeroed, one wrk run,
// counters dumped.
func (e *env) callgrindAll(ctx context.Context, res *results, nginxServers []nginxServer) error {
	fmt.Fprintln(os.Stderr, "peerbench: callgrind phase (instructions per request)")
	var ng *proc
	ngPorts := map[string]int{}
	if len(nginxServers) > 0 {
		var servers []nginxServer
		for _, tr := range res.targets {
			if tr.t.peer != "nginx" {
				continue
			}
			port, err := freePort()
			if err != nil {
				return err
			}
			servers = append(servers, nginxServer{port: port, limit: tr.t.m.limit})
			ngPorts[tr.t.m.name] = port
		}
		var err error
		if ng, err = e.startNginx("cg-nginx", servers, 1, true); err != nil {
			return err
		}
		defer e.ps.stop(ng)
	}
	for _, tr := range res.targets {
		var p *proc
		url := ""
		switch tr.t.peer {
		case "nginx":
			p, url = ng, fmt.Sprintf("http://127.0.0.1:%d/", ngPorts[tr.t.m.name])
		case "base":
			t, err := e.startGatewayBin(e.base, "base", tr.t.m, e.redisAdr, "5s", true)
			if err != nil {
				return err
			}
			url = t.url
			p = e.ps.list[len(e.ps.list)-1]
		case "floor":
			t, err := e.startFloor(tr.t.m, true)
			if err != nil {
				return err
			}
			url = t.url
			p = e.ps.list[len(e.ps.list)-1]
		default:
			// A generous store budget: under valgrind the gateway runs
			// ~50x slower and a 50ms deadline would measure on_error.
			t, err := e.startGateway(tr.t.m, e.redisAdr, "5s", true)
			if err != nil {
				return err
			}
			url = t.url
			p = e.ps.list[len(e.ps.list)-1]
		}
		err := e.callgrindOne(ctx, tr, p, url)
		if tr.t.peer != "nginx" {
			e.ps.stop(p)
		}
		if err != nil {
			tr.cgErr = err.Error()
			fmt.Fprintf(os.Stderr, "peerbench: callgrind %s: %v\n", tr.t.name(), err)
			continue
		}
		fmt.Fprintf(os.Stderr, "peerbench: callgrind %-30s %8.0f instructions/request (%d requests)\n",
			tr.t.name(), tr.instr, tr.cgRequests)
	}
	if e.redis == nil {
		return nil
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	bin, err := lookPath("redis-server")
	if err != nil {
		return err
	}
	redis, err := e.ps.start(e.tmp, "cg-redis", nil, "valgrind", "--tool=callgrind",
		"--callgrind-out-file="+filepath.Join(e.tmp, "cg-redis.cg"), bin, "--port", strconv.Itoa(port),
		"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", e.tmp, "--daemonize", "no")
	if err != nil {
		return err
	}
	defer e.ps.stop(redis)
	if err := waitRedis(redis, addr, 60*time.Second); err != nil {
		return err
	}
	for _, tr := range res.targets {
		if !tr.t.m.redis {
			continue
		}
		if err := e.callgrindRedis(ctx, tr, redis, addr); err != nil {
			tr.cgErr = err.Error()
			fmt.Fprintf(os.Stderr, "peerbench: callgrind redis for %s: %v\n", tr.t.name(), err)
			continue
		}
		fmt.Fprintf(os.Stderr, "peerbench: callgrind redis-server for %-19s %8.0f instructions/decision\n",
			tr.t.name(), tr.redisInstr)
	}
	return nil
}

func (e *env) callgrindOne(ctx context.Context, tr *targetResult, p *proc, url string) error {
	total, w, err := e.callgrindCount(ctx, tr.t, p, url)
	if err != nil {
		return err
	}
	tr.instr = float64(total) / float64(w.requests)
	tr.cgRequests, tr.cgNon2xx = w.requests, w.non2xx
	return nil
}

// callgrindRedis counts redis-server's instructions per decision: a
// native gateway (5s store budget) in t's mode in front of a redis-server
// under callgrind.
func (e *env) callgrindRedis(ctx context.Context, tr *targetResult, redis *proc, redisAddr string) error {
	bin := e.gateway
	if tr.t.peer == "base" {
		bin = e.base
	}
	t, err := e.startGatewayBin(bin, tr.t.peer, tr.t.m, redisAddr, "5s", false)
	if err != nil {
		return err
	}
	gw := e.ps.list[len(e.ps.list)-1]
	defer e.ps.stop(gw)
	total, w, err := e.callgrindCount(ctx, tr.t, redis, t.url)
	if err != nil {
		return err
	}
	tr.redisInstr = float64(total) / float64(w.requests)
	return nil
}

// callgrindCount warms p up through url, zeroes its callgrind counters,
// runs one wrk and returns the instructions p executed meanwhile.
func (e *env) callgrindCount(ctx context.Context, t *target, p *proc, url string) (int64, wrkResult, error) {
	pid := strconv.Itoa(p.cmd.Process.Pid)
	if _, _, err := runWrk(ctx, e.o.load.wrkArgs(url, t.script, 2*time.Second)); err != nil {
		return 0, wrkResult{}, err
	}
	if out, err := exec.CommandContext(ctx, "callgrind_control", "-z", pid).CombinedOutput(); err != nil {
		return 0, wrkResult{}, fmt.Errorf("callgrind_control -z: %w: %s", err, out)
	}
	w, _, err := runWrk(ctx, e.o.load.wrkArgs(url, t.script, e.o.cgDuration))
	if err != nil {
		return 0, w, err
	}
	before, _ := filepath.Glob(filepath.Join(e.tmp, p.name+".cg.*"))
	if out, err := exec.CommandContext(ctx, "callgrind_control", "-d", pid).CombinedOutput(); err != nil {
		return 0, w, fmt.Errorf("callgrind_control -d: %w: %s", err, out)
	}
	var dump string
	deadline := time.Now().Add(20 * time.Second)
	for dump == "" && time.Now().Before(deadline) {
		after, _ := filepath.Glob(filepath.Join(e.tmp, p.name+".cg.*"))
		for _, f := range after {
			if !contains(before, f) {
				dump = f
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if dump == "" {
		return 0, w, fmt.Errorf("no callgrind dump appeared for %s", p.name)
	}
	total, err := callgrindSummary(dump)
	if err != nil {
		return 0, w, err
	}
	if w.requests == 0 {
		return 0, w, fmt.Errorf("wrk completed no requests")
	}
	return total, w, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// callgrindSummary reads the Ir total of a callgrind dump. The file may
// still be being written: retry until its summary line is there.
func callgrindSummary(path string) (int64, error) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "summary:"); ok {
					f := strings.Fields(v)
					if len(f) > 0 {
						return strconv.ParseInt(f[0], 10, 64)
					}
				}
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s: no summary line", path)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func perReq(d time.Duration, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(n)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
