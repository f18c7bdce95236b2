package main

import (
	"bufio"
	"bytes"
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
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every Linux architecture Go supports.
const clockTicks = 100

// proc is one process the benchmark started.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
}

// procs is every process started, stopped in reverse order by PID.
type procs struct{ list []*proc }

// start runs name with args, its output going to a log file in dir.
func (ps *procs) start(dir, name string, env []string, bin string, args ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	f.Close()
	p := &proc{name: name, cmd: cmd, log: logPath}
	ps.list = append(ps.list, p)
	return p, nil
}

// stop ends p: SIGTERM, then SIGKILL after a grace period.
func (ps *procs) stop(p *proc) {
	for i, q := range ps.list {
		if q == p {
			ps.list = append(ps.list[:i], ps.list[i+1:]...)
			break
		}
	}
	stopProc(p)
}

func stopProc(p *proc) {
	if p.cmd.Process == nil || p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// stopAll stops every process still running, newest first.
func (ps *procs) stopAll() {
	for i := len(ps.list) - 1; i >= 0; i-- {
		stopProc(ps.list[i])
	}
	ps.list = nil
}

// tail returns the last lines of p's log, for error messages.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return strings.Join(lines, "\n")
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitHTTP polls addr with a GET of path until any HTTP status line
// comes back, p exits, or the deadline passes.
func waitHTTP(p *proc, addr, path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if exited(p) {
			return fmt.Errorf("%s exited:\n%s", p.name, p.tail())
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n", path)
			line, err := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if err == nil && strings.HasPrefix(line, "HTTP/1.") {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer on %s within %s:\n%s", p.name, addr, timeout, p.tail())
}

// waitRedis polls addr with PING until it answers +PONG.
func waitRedis(p *proc, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if exited(p) {
			return fmt.Errorf("%s exited:\n%s", p.name, p.tail())
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			_ = c.SetDeadline(time.Now().Add(time.Second))
			_, _ = c.Write([]byte("PING\r\n"))
			line, err := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if err == nil && strings.HasPrefix(line, "+PONG") {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer PING on %s within %s:\n%s", p.name, addr, timeout, p.tail())
}

func exited(p *proc) bool {
	var ws syscall.WaitStatus
	pid, err := syscall.Wait4(p.cmd.Process.Pid, &ws, syscall.WNOHANG, nil)
	return err != nil || pid == p.cmd.Process.Pid
}

// cpuTime is the user+system CPU time of pid and all its threads, from
// /proc/<pid>/stat (exited threads included; children not).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	fields, err := statFields(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	// fields[0] is field 3 (state): utime is field 14, stime field 15.
	ut, err1 := strconv.ParseInt(fields[11], 10, 64)
	st, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// statFields returns the fields of a /proc/<pid>/stat line after the
// command name, starting with the state (field 3).
func statFields(b []byte) ([]string, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, errors.New("no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return nil, errors.New("too few fields")
	}
	return f, nil
}

// children returns the PIDs whose parent is pid.
func children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f, err := statFields(b)
		if err != nil {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
			out = append(out, c)
		}
	}
	return out
}

// groupCPU is the CPU time of pid plus its direct children (nginx's
// master and workers).
func groupCPU(pid int) time.Duration {
	total, _ := cpuTime(pid)
	for _, c := range children(pid) {
		d, _ := cpuTime(c)
		total += d
	}
	return total
}
