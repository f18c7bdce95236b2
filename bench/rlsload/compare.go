package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// redisServer is a redis-server this program started: no persistence, a
// free loopback port, stopped by its PID.
type redisServer struct {
	cmd  *exec.Cmd
	addr string
}

func startRedis() (*redisServer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("redis-server", "--port", port(addr), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return &redisServer{cmd: cmd, addr: addr}, nil
		}
		if time.Now().After(deadline) {
			stop(cmd)
			return nil, fmt.Errorf("redis-server on %s did not start: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startReference starts envoyproxy/ratelimit on the Redis at redisAddr
// with the YAML of the gateway (its runtime directory under dir): its
// defaults otherwise (no local cache, STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT
// false: cheaper for it, every descriptor counted), statsd off.
//
// stop sets STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true: a call over the
// limit of one descriptor counts in none, as Tollgate decides (the
// reference then reads every key with a pipeline of GETs before its
// pipeline of INCRBY and EXPIRE: two round trips, not atomic). Its log
// goes to a file in its runtime directory.
func startReference(bin, dir, redisAddr string, stopIncrement bool) (*exec.Cmd, string, error) {
	cfgDir := filepath.Join(dir, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "edge.yaml"), []byte(yamlConfig(false)), 0o600); err != nil {
		return nil, "", err
	}
	var addrs [3]string
	for i := range addrs {
		var err error
		if addrs[i], err = freeAddr(); err != nil {
			return nil, "", err
		}
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "USE_STATSD=false", "LOG_LEVEL=warn", "BACKEND_TYPE=redis", "REDIS_SOCKET_TYPE=tcp",
		"REDIS_URL="+redisAddr, "RUNTIME_ROOT="+filepath.Join(dir, "runtime"), "RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_WATCH_ROOT=false", "HOST=127.0.0.1", "PORT="+port(addrs[0]), "DEBUG_HOST=127.0.0.1",
		"DEBUG_PORT="+port(addrs[1]), "GRPC_HOST=127.0.0.1", "GRPC_PORT="+port(addrs[2]))
	if stopIncrement {
		cmd.Env = append(cmd.Env, "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true")
	}
	logf, err := os.CreateTemp(filepath.Join(dir, "runtime"), "reference-*.log")
	if err != nil {
		return nil, "", err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	return cmd, addrs[2], nil
}

// floorScript only returns: an EVALSHA of it is the least a Redis does
// for a decision made by one script call.
const floorScript = "return 1"

// respConn is a plain RESP connection (the floor needs two commands; the
// gateway's Redis client is built by the gateway alone).
type respConn struct {
	c net.Conn
	r *bufio.Reader
}

// do sends one command and reads its one-line reply (an integer, a
// status or an error; a bulk string's length line then its line).
func (rc *respConn) do(args ...string) (string, error) {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	if _, err := rc.c.Write(b); err != nil {
		return "", err
	}
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "-"):
		return "", errors.New(line[1:])
	case strings.HasPrefix(line, "$"):
		if line, err = rc.r.ReadString('\n'); err != nil {
			return "", err
		}
		return strings.TrimRight(line, "\r\n"), nil
	}
	return line[1:], nil
}

// measureFloor drives EVALSHA of floorScript with two keys, one per call,
// as l says, over 10 connections (the reference's Redis pool size), each
// used by one call at a time.
func measureFloor(rs *redisServer, l load) (result, error) {
	pool := make(chan *respConn, 10)
	for range cap(pool) {
		c, err := net.Dial("tcp", rs.addr)
		if err != nil {
			return result{}, err
		}
		defer c.Close()
		pool <- &respConn{c: c, r: bufio.NewReader(c)}
	}
	c := <-pool
	sha, err := c.do("SCRIPT", "LOAD", floorScript)
	pool <- c
	if err != nil {
		return result{}, err
	}
	keys := make([][2]string, l.keys)
	for k := range keys {
		keys[k] = [2]string{"remote_address_10.0." + strconv.Itoa(k), "path_/api/" + strconv.Itoa(k%100) + "/1"}
	}
	send := func(_ context.Context, _, i int) (bool, error) {
		c := <-pool
		defer func() { pool <- c }()
		k := keys[i%len(keys)]
		_, err := c.do("EVALSHA", sha, "2", k[0], k[1])
		return false, err
	}
	return drive(send, l, -1, rs.cmd.Process.Pid)
}

// target is one server of the comparison.
type target struct {
	name string
	run  func(l load) (result, error)
}

func runCompare(l load, rounds int, floor, stopIncrement bool, refBin, gwBin string) error {
	dir, err := os.MkdirTemp("", "rlscompare")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if gwBin, err = buildGateway(dir, gwBin); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(yamlConfig(false)), 0o600); err != nil {
		return err
	}
	var servers []*redisServer
	defer func() {
		for _, s := range servers {
			stop(s.cmd)
		}
	}()
	newRedis := func() (*redisServer, error) {
		s, err := startRedis()
		if err == nil {
			servers = append(servers, s)
		}
		return s, err
	}
	rt, err := newRedis()
	if err != nil {
		return err
	}
	rr, err := newRedis()
	if err != nil {
		return err
	}
	gw, gwAddr, err := startGateway(gwBin, dir, rt.addr)
	if err != nil {
		return err
	}
	defer stop(gw)
	ref, refAddr, err := startReference(refBin, dir, rr.addr, false)
	if err != nil {
		return err
	}
	defer stop(ref)
	targets := []target{
		{"Tollgate", func(l load) (result, error) { return measure(gwAddr, gw.Process.Pid, rt.cmd.Process.Pid, l, false) }},
		{"envoyproxy/ratelimit", func(l load) (result, error) {
			return measure(refAddr, ref.Process.Pid, rr.cmd.Process.Pid, l, false)
		}},
	}
	if stopIncrement {
		rs, err := newRedis()
		if err != nil {
			return err
		}
		refs, refsAddr, err := startReference(refBin, dir, rs.addr, true)
		if err != nil {
			return err
		}
		defer stop(refs)
		targets = append(targets, target{"ratelimit, STOP_CACHE…", func(l load) (result, error) {
			return measure(refsAddr, refs.Process.Pid, rs.cmd.Process.Pid, l, false)
		}})
	}
	if floor {
		rf, err := newRedis()
		if err != nil {
			return err
		}
		targets = append(targets, target{"EVALSHA floor", func(l load) (result, error) { return measureFloor(rf, l) }})
	}
	// Warm-up: every key once on each (connections, first counters).
	for _, t := range targets {
		w := l
		w.calls, w.rate = max(l.keys, 5000), 0
		if _, err := t.run(w); err != nil {
			return fmt.Errorf("%s: warm-up: %w", t.name, err)
		}
	}
	type shape struct {
		name string
		l    load
	}
	var shapes []shape
	for _, hot := range []bool{true, false} {
		s := l
		s.hot, s.keys = hot, l.keys
		name := strconv.Itoa(l.keys) + " keys"
		if hot {
			s.keys, name = 1, "hot"
		}
		full := s
		full.rate = 0
		shapes = append(shapes, shape{name + ", full speed", full})
		if l.rate > 0 {
			shapes = append(shapes, shape{name + fmt.Sprintf(", %.0f calls/s", l.rate), s})
		}
	}
	res := map[[2]string][]result{}
	load1, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("start %s  load %s", time.Now().UTC().Format(time.RFC3339), load1)
	for r := range rounds {
		for _, sh := range shapes {
			order := slices.Clone(targets)
			if r%2 == 1 {
				slices.Reverse(order)
			}
			for _, t := range order {
				if t.name == "EVALSHA floor" && sh.l.rate == 0 {
					continue // the floor at the same rate only
				}
				m, err := t.run(sh.l)
				if err != nil {
					return fmt.Errorf("%s, %s: %w", t.name, sh.name, err)
				}
				fmt.Printf("round %d  %-22s %-26s %v\n", r+1, t.name, sh.name, m)
				res[[2]string{t.name, sh.name}] = append(res[[2]string{t.name, sh.name}], m)
			}
		}
	}
	load2, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("end %s  load %s\n", time.Now().UTC().Format(time.RFC3339), load2)
	fmt.Printf("%d rounds, %d calls per run, %d descriptors per call, %d workers, %d connections; medians (min–max)\n\n",
		rounds, l.calls, l.descs, l.workers, l.conns)
	fmt.Println("| load | server | calls/s | p99 ms | server CPU µs/call | redis-server CPU µs/call |")
	fmt.Println("|---|---|---:|---:|---:|---:|")
	for _, sh := range shapes {
		for _, t := range targets {
			ms := res[[2]string{t.name, sh.name}]
			if len(ms) == 0 {
				continue
			}
			cps := stat(ms, func(m result) float64 { return float64(m.calls) / m.wall.Seconds() })
			p99 := stat(ms, func(m result) float64 { return float64(m.p99.Microseconds()) / 1e3 })
			sc := stat(ms, func(m result) float64 { return m.perCall(m.serverCPU) })
			rc := stat(ms, func(m result) float64 { return m.perCall(m.redisCP) })
			server := "—"
			if t.name != "EVALSHA floor" {
				server = sc.fmt("%.1f")
			}
			fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", sh.name, t.name, cps.fmt("%.0f"), p99.fmt("%.2f"), server, rc.fmt("%.1f"))
		}
	}
	return nil
}

// spread is a median with its range.
type spread struct{ med, lo, hi float64 }

func stat(ms []result, f func(result) float64) spread {
	v := make([]float64, len(ms))
	for i, m := range ms {
		v[i] = f(m)
	}
	slices.Sort(v)
	return spread{v[len(v)/2], v[0], v[len(v)-1]}
}

func (s spread) fmt(f string) string {
	if s.lo == s.hi {
		return fmt.Sprintf(f, s.med)
	}
	return strings.Join([]string{fmt.Sprintf(f, s.med), " (", fmt.Sprintf(f, s.lo), "–", fmt.Sprintf(f, s.hi), ")"}, "")
}
