// Package redistest starts real redis-server and redis-sentinel processes for
// tests: a standalone server, a Sentinel group (1 master, 1 replica, 3
// sentinels) and a Cluster (3 masters, 3 replicas). Every process listens on
// a free loopback port, keeps its files in a temporary directory, persists
// nothing (--save "" --appendonly no) and is stopped by PID when the test
// (or the caller's cleanup) ends. Every wait is a poll bounded by a deadline.
//
// The harness speaks RESP itself (see Do) so that it depends on no Redis
// client library. When a binary is missing, the test fails with a message
// naming the Debian packages to install.
package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/childproc"
)

// StartTimeout bounds every wait of the harness: a process answering PING,
// a replica syncing, a cluster reaching cluster_state:ok, a failover.
const StartTimeout = 20 * time.Second

const installHint = "install Redis 7 with `apt-get install redis-server redis-sentinel redis-tools` " +
	"(redis-server, redis-sentinel and redis-cli must be in PATH)"

// binary returns the path of the named Redis binary or fails t.
func binary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("redistest: %s not found: %s", name, installHint)
	}
	return p
}

// Server is one redis-server or redis-sentinel process. Its methods are safe
// for concurrent use.
type Server struct {
	// Addr is the "127.0.0.1:port" the process listens on; it survives Restart.
	Addr string

	t    testing.TB
	bin  string
	args []string
	dir  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
}

// Standalone starts one redis-server for t and stops it when t ends.
func Standalone(t testing.TB) *Server {
	t.Helper()
	s := newServer(t, "redis-server", freePort(t, false), nil)
	s.start()
	t.Cleanup(s.Stop)
	return s
}

// newServer prepares (but does not start) a redis-server on port with extra
// arguments.
func newServer(t testing.TB, name string, port int, extra []string) *Server {
	t.Helper()
	bin := binary(t, name)
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	args := []string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"),
		"--daemonize", "no",
	}
	return &Server{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		t:    t, bin: bin, args: append(args, extra...), dir: dir,
	}
}

// start launches the process and waits until it answers PING.
func (s *Server) start() {
	s.t.Helper()
	cmd := childproc.Bind(exec.Command(s.bin, s.args...))
	cmd.Dir = s.dir
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redistest: start %s: %v", s.bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done, s.paused = cmd, done, false
	s.mu.Unlock()
	err := poll(StartTimeout, func() error {
		select {
		case <-done:
			return errStop{fmt.Errorf("exited early; log:\n%s", s.Log())}
		default:
		}
		_, err := Do(s.Addr, "PING")
		return err
	})
	if err != nil {
		s.Kill()
		s.t.Fatalf("redistest: %s on %s: %v", filepath.Base(s.bin), s.Addr, err)
	}
}

// PID returns the process id of the running process (0 when stopped).
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Log returns the process's log file so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	return string(b)
}

// signal sends sig to the running process and, for a terminating signal,
// waits (bounded) for it to exit.
func (s *Server) signal(sig syscall.Signal, wait bool) {
	s.mu.Lock()
	cmd, done, paused := s.cmd, s.done, s.paused
	if cmd == nil {
		s.mu.Unlock()
		return
	}
	if wait {
		s.cmd = nil
	}
	switch sig {
	case syscall.SIGSTOP:
		s.paused = true
	case syscall.SIGCONT:
		s.paused = false
	}
	s.mu.Unlock()
	cmd.Process.Signal(sig)
	if !wait {
		return
	}
	if paused && sig != syscall.SIGKILL {
		cmd.Process.Signal(syscall.SIGCONT)
	}
	select {
	case <-done:
	case <-time.After(StartTimeout):
		cmd.Process.Kill()
		<-done
	}
}

// Stop terminates the process gracefully (SIGTERM) and waits for it. It is
// a no-op when the process is not running.
func (s *Server) Stop() { s.signal(syscall.SIGTERM, true) }

// Kill kills the process (SIGKILL) and waits for it: a crash.
func (s *Server) Kill() { s.signal(syscall.SIGKILL, true) }

// Pause freezes the process with SIGSTOP: it keeps its sockets open but
// answers nothing, like a hung server.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP, false) }

// Resume continues a paused process (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT, false) }

// Restart kills the process if it runs and starts a fresh one on the same
// address. Nothing is persisted, so the new server is empty: no keys and an
// empty script cache.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	// The old socket may linger briefly; poll until the port binds.
	if err := poll(StartTimeout, func() error {
		l, err := net.Listen("tcp", s.Addr)
		if err != nil {
			return err
		}
		return l.Close()
	}); err != nil {
		s.t.Fatalf("redistest: restart %s: %v", s.Addr, err)
	}
	s.start()
}

// Do sends one command to s and returns the reply (see the package-level Do).
func (s *Server) Do(args ...string) (any, error) { return Do(s.Addr, args...) }

// Info returns the value of field in the server's INFO section, or "".
func (s *Server) Info(section, field string) string {
	v, err := Do(s.Addr, "INFO", section)
	if err != nil {
		return ""
	}
	return infoField(fmt.Sprint(v), field)
}

// infoField extracts "field:value" from an INFO reply.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

// freePort returns a loopback TCP port that is free right now. With bus set,
// port+10000 (the Cluster bus port) is free too.
func freePort(t testing.TB, bus bool) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("redistest: no free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !bus {
			return port
		}
		if port+10000 > 65535 {
			continue
		}
		l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		if err != nil {
			continue
		}
		l2.Close()
		return port
	}
	t.Fatalf("redistest: no free port pair found")
	return 0
}

// errStop ends a poll early.
type errStop struct{ error }

// poll calls f every 20ms until it returns nil, returns errStop, or the
// timeout passes; it returns f's last error.
func poll(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		var stop errStop
		if errors.As(err, &stop) {
			return stop.error
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Do opens a connection to addr, sends one command and returns its reply:
// string for simple and bulk strings, int64 for integers, []any for arrays,
// nil for a null, and an error for an error reply or a network failure. It
// is meant for test control, not for speed; every exchange is bounded by a
// 5 s deadline.
func Do(addr string, args ...string) (any, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	return readReply(bufio.NewReader(c))
}

// readReply parses one RESP2 reply.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("redistest: empty reply line")
	}
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return nil, errors.New(line[1:])
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("redistest: unexpected reply %q", line)
}

// StandaloneConfig starts one redis-server for t that first reads conf as
// its configuration file (for directives such as rename-command, which a
// running server cannot change), and stops it when t ends.
func StandaloneConfig(t testing.TB, conf string) *Server {
	t.Helper()
	s := newServer(t, "redis-server", freePort(t, false), nil)
	path := filepath.Join(s.dir, "redis.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	s.args = append([]string{path}, s.args...)
	s.start()
	t.Cleanup(s.Stop)
	return s
}

// Replica starts one redis-server replicating master for t, waits until its
// initial sync has finished, and stops it when t ends.
func Replica(t testing.TB, master *Server) *Server {
	t.Helper()
	host, port, _ := net.SplitHostPort(master.Addr)
	s := newServer(t, "redis-server", freePort(t, false), []string{"--replicaof", host, port})
	s.start()
	t.Cleanup(s.Stop)
	if err := poll(StartTimeout, func() error { return linkUp(s.Addr) }); err != nil {
		t.Fatalf("redistest: replica %s of %s: %v", s.Addr, master.Addr, err)
	}
	return s
}
