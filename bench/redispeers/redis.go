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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// keepDumps keeps callgrind dumps (and the server's directory) for
// callgrind_annotate.
var keepDumps bool

// server is one redis-server process this program started (optionally
// under valgrind's callgrind), stopped by PID.
type server struct {
	addr      string
	dir       string
	cmd       *exec.Cmd
	done      chan struct{}
	callgrind string // callgrind output file, "" when not under callgrind
}

// startRedis starts redis-server on a free loopback port in a temp dir and
// waits until it answers PING.
func startRedis(callgrind bool) (*server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server not found: install it (apt-get install redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "redispeers-")
	if err != nil {
		return nil, err
	}
	args := []string{bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--daemonize", "no"}
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, done: make(chan struct{})}
	if callgrind {
		if _, err := exec.LookPath("callgrind_control"); err != nil {
			os.RemoveAll(dir)
			return nil, errors.New("valgrind not found: install it (apt-get install valgrind)")
		}
		s.callgrind = filepath.Join(dir, "callgrind.out")
		args = append([]string{"valgrind", "--tool=callgrind", "--callgrind-out-file=" + s.callgrind}, args...)
	}
	s.cmd = exec.Command(args[0], args[1:]...)
	s.cmd.Dir = dir
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(60 * time.Second)
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer c.Close()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redis-server exited early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server on %s: %v", s.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pid is the process id of the redis-server (or valgrind) process.
func (s *server) pid() int { return s.cmd.Process.Pid }

// stop sends SIGTERM to the process by PID, SIGKILL after 30 s, and
// removes its directory.
func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	if !keepDumps {
		os.RemoveAll(s.dir)
	}
}

// cpu returns the process's user+system CPU time from /proc/<pid>/stat.
func (s *server) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.pid()))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name: state is field 3,
	// utime field 14, stime field 15.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / hz, nil
}

// zero resets callgrind's counters.
func (s *server) zero() error {
	out, err := exec.Command("callgrind_control", "-z", strconv.Itoa(s.pid())).CombinedOutput()
	if err != nil {
		return fmt.Errorf("callgrind_control -z: %w: %s", err, out)
	}
	return nil
}

// instructions dumps callgrind's counters and returns the instructions
// counted since the last zero.
func (s *server) instructions() (int64, error) {
	out, err := exec.Command("callgrind_control", "-d", strconv.Itoa(s.pid())).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("callgrind_control -d: %w: %s", err, out)
	}
	// Dumps are numbered callgrind.out.1, .2, ...: read the newest.
	matches, _ := filepath.Glob(s.callgrind + ".*")
	best, bestN := "", -1
	for _, m := range matches {
		if n, err := strconv.Atoi(m[strings.LastIndexByte(m, '.')+1:]); err == nil && n > bestN {
			best, bestN = m, n
		}
	}
	if best == "" {
		return 0, errors.New("no callgrind dump found")
	}
	for range 100 {
		if v, ok := summary(best); ok {
			if keepDumps {
				fmt.Fprintln(os.Stderr, "callgrind dump kept:", best)
			} else {
				os.Remove(best)
			}
			return v, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, fmt.Errorf("%s: no summary line", best)
}

func summary(path string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "summary:"); ok {
			n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// commandCalls returns INFO commandstats as command → calls and
// command → total µs.
func commandCalls(ctx context.Context, c *redis.Client) (map[string]int64, map[string]int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, nil, err
	}
	calls, usec := map[string]int64{}, map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls[name] = n
			case "usec":
				usec[name] = n
			}
		}
	}
	return calls, usec, nil
}
