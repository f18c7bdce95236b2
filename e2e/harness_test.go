// Package e2e drives the real gateway binary as a black box: TestMain builds
// cmd/gateway once, and every test starts its own gateway process on free
// loopback ports with a TOML file rendered from testdata/*.toml.tmpl,
// in front of a real upstream HTTP server, and checks the README's contract
// over real HTTP (and raw TCP where the framing itself is under test).
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/tollgate/gateway/internal/childproc"
)

// gatewayBin is the binary TestMain built.
var gatewayBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "tollgate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	gatewayBin = filepath.Join(dir, "gateway")
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	args := []string{"build", "-o", gatewayBin}
	if raceEnabled {
		// A test run under -race checks the gateway for data races too:
		// (*gw).stop fails the test when the binary reports one.
		args = append(args, "-race")
	}
	args = append(args, "./cmd/gateway")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go %s failed (%v); the gateway does not build:\n%s\n",
			strings.Join(args, " "), err, out)
		return 1
	}
	// A child a test forgot to stop dies here; one left by a killed run
	// dies with the test binary (childproc.Bind).
	defer childproc.KillAll()
	return m.Run()
}

// moduleRoot is the directory holding go.mod, found from the working
// directory (go test runs in the package directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the e2e directory")
		}
		dir = parent
	}
}

// freePort returns a loopback address whose port was free a moment ago.
// Another process may take it before the gateway binds it; startGateway
// retries on "address already in use".
func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// freePorts returns n distinct free loopback addresses: all n listeners
// are open at once before any is closed, so two calls of freePort in a row
// cannot hand out the same port (the kernel may reuse a closed one at once,
// and a gateway whose listen and admin_listen are equal refuses to start).
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		lns = append(lns, ln)
		addrs[i] = ln.Addr().String()
	}
	return addrs
}

// listenAndAdmin returns two distinct free addresses for a gateway's
// listen and admin_listen.
func listenAndAdmin(t testing.TB) (string, string) {
	t.Helper()
	ps := freePorts(t, 2)
	return ps[0], ps[1]
}

// syncBuffer is a bytes.Buffer safe for the exec copier and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// gwOpts configures startGateway.
type gwOpts struct {
	// Data fills the template beside Listen, Admin (set by startGateway).
	Data map[string]any
	// Env is added to the gateway's environment (TOLLGATE_* from the test
	// process environment are removed first).
	Env []string
	// Args are added to the command line after --config.
	Args []string
	// ListenFromEnv names the environment variable that overrides the
	// public listen address; startGateway sets it to a free port, and
	// gw.Listen reports that address.
	ListenFromEnv string
	// FreshPorts names Data keys that startGateway sets to a free
	// loopback address on each attempt, beside Listen and Admin (a
	// listener of the gateway's own, such as [rls]): an address chosen
	// once would fail every retry after a port clash. gw.Port reads them.
	FreshPorts []string
}

// gw is one running gateway process.
type gw struct {
	t        testing.TB
	Listen   string // public listener, host:port
	Admin    string // admin listener, host:port
	Config   string // path of the rendered config file
	tmpl     string
	data     map[string]any
	cmd      *exec.Cmd
	stderr   *syncBuffer
	exited   chan struct{}
	exitErr  error
	stopOnce sync.Once
}

// startGateway renders testdata/<tmpl> with opts.Data plus free Listen and
// Admin addresses, starts the gateway on it and waits for /healthz. The
// process is stopped (SIGTERM, then SIGKILL) when the test ends; on failure
// its stderr goes to the test log.
func startGateway(t testing.TB, tmpl string, opts gwOpts) *gw {
	t.Helper()
	dir := t.TempDir()
	var last string
	for attempt := 0; attempt < 5; attempt++ {
		g := &gw{t: t, Config: filepath.Join(dir, "gateway.toml"), tmpl: tmpl,
			stderr: &syncBuffer{}, exited: make(chan struct{})}
		g.data = map[string]any{}
		for k, v := range opts.Data {
			g.data[k] = v
		}
		ports := freePorts(t, 3+len(opts.FreshPorts))
		g.Listen, g.Admin = ports[0], ports[1]
		g.data["Listen"], g.data["Admin"] = g.Listen, g.Admin
		for i, k := range opts.FreshPorts {
			g.data[k] = ports[3+i]
		}
		env := cleanEnv()
		if opts.ListenFromEnv != "" {
			g.Listen = ports[2]
			env = append(env, opts.ListenFromEnv+"="+g.Listen)
		}
		env = append(env, opts.Env...)
		g.render(t, g.data)
		g.cmd = childproc.Bind(exec.Command(gatewayBin, append([]string{"--config", g.Config}, opts.Args...)...))
		g.cmd.Env = env
		g.cmd.Stdout = g.stderr
		g.cmd.Stderr = g.stderr
		if err := g.cmd.Start(); err != nil {
			t.Fatalf("start gateway: %v", err)
		}
		go func() {
			g.exitErr = g.cmd.Wait()
			close(g.exited)
		}()
		err := g.waitHealthy(15 * time.Second)
		if err == nil {
			t.Cleanup(func() { g.stop(t) })
			return g
		}
		g.kill()
		last = fmt.Sprintf("attempt %d: %v\n--- gateway output ---\n%s", attempt+1, err, g.stderr.String())
		if !strings.Contains(g.stderr.String(), "address already in use") {
			break
		}
	}
	t.Fatalf("gateway did not become healthy:\n%s", last)
	return nil
}

// Port returns the address startGateway chose for the Data key k, one of
// gwOpts.FreshPorts.
func (g *gw) Port(k string) string { return g.data[k].(string) }

// cleanEnv is the test's environment without TOLLGATE_* variables.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOLLGATE_") {
			env = append(env, kv)
		}
	}
	return env
}

// render writes the gateway's config from its template and data.
func (g *gw) render(t testing.TB, data map[string]any) {
	t.Helper()
	writeFileAtomic(t, g.Config, renderTemplate(t, g.tmpl, data))
}

// renderTemplate renders testdata/<name> with data; a missing key is an
// error.
func renderTemplate(t testing.TB, name string, data map[string]any) []byte {
	t.Helper()
	tp, err := template.New(name).Option("missingkey=error").ParseFiles(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("template %s: %v", name, err)
	}
	var b bytes.Buffer
	if err := tp.Execute(&b, data); err != nil {
		t.Fatalf("template %s: %v", name, err)
	}
	return b.Bytes()
}

// writeFileAtomic replaces path with data by rename, the way editors and
// ConfigMap updates do, so a reload never reads half a file.
func writeFileAtomic(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// rewrite renders the config again with data merged over the current data.
func (g *gw) rewrite(t testing.TB, data map[string]any) {
	t.Helper()
	merged := map[string]any{}
	for k, v := range g.data {
		merged[k] = v
	}
	for k, v := range data {
		merged[k] = v
	}
	g.data = merged
	g.render(t, merged)
}

// waitHealthy polls the admin /healthz until it answers 200 "ok", the
// process exits, or the deadline passes.
func (g *gw) waitHealthy(d time.Duration) error {
	deadline := time.Now().Add(d)
	c := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-g.exited:
			return fmt.Errorf("gateway exited before it was healthy: %v", g.exitErr)
		default:
		}
		resp, err := c.Get("http://" + g.Admin + "/healthz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.TrimSpace(string(body)) == "ok" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no healthy /healthz on %s within %v (last error %v)", g.Admin, d, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// signal sends sig to the gateway process.
func (g *gw) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := g.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// wait waits up to d for the process to exit and returns its exit code
// (-1 if it was killed by a signal) or an error when it did not exit.
func (g *gw) wait(d time.Duration) (int, error) {
	select {
	case <-g.exited:
		if g.exitErr == nil {
			return 0, nil
		}
		var ee *exec.ExitError
		if errors.As(g.exitErr, &ee) {
			return ee.ExitCode(), nil
		}
		return -1, g.exitErr
	case <-time.After(d):
		return -1, fmt.Errorf("gateway still running after %v", d)
	}
}

func (g *gw) kill() {
	_ = g.cmd.Process.Kill()
	<-g.exited
}

// stop ends the process by PID (SIGTERM, SIGKILL after 10 s), reports a
// data race the binary logged, and logs its output when the test failed.
func (g *gw) stop(t testing.TB) {
	g.stopOnce.Do(func() {
		select {
		case <-g.exited:
		default:
			_ = g.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-g.exited:
			case <-time.After(10 * time.Second):
				t.Errorf("gateway ignored SIGTERM for 10s; killing it")
				g.kill()
			}
		}
		out := g.stderr.String()
		if strings.Contains(out, "WARNING: DATA RACE") {
			t.Errorf("the gateway binary reported a data race")
		}
		if t.Failed() {
			t.Logf("--- gateway output (%s) ---\n%s", g.Config, out)
		}
	})
}

// output is everything the process wrote so far.
func (g *gw) output() string { return g.stderr.String() }

// outputWith waits up to 5 s for the gateway's output to hold every one
// of subs (its stderr reaches the buffer through a pipe, possibly after
// the gateway answered), and returns it.
func (g *gw) outputWith(subs ...string) string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		out := g.output()
		all := true
		for _, s := range subs {
			all = all && strings.Contains(out, s)
		}
		if all || time.Now().After(deadline) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// url is a URL on the public listener.
func (g *gw) url(path string) string { return "http://" + g.Listen + path }

// adminURL is a URL on the admin listener.
func (g *gw) adminURL(path string) string { return "http://" + g.Admin + path }
