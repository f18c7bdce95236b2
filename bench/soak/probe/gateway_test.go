package probe

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeGatewayEnv makes the test binary act as a gateway: "serve ADDR"
// answers /healthz on ADDR until SIGTERM (exiting 3 at once if it sees a
// TOLLGATE_* variable), "exit" exits 7 at once.
const fakeGatewayEnv = "PROBE_FAKE_GATEWAY"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeGatewayEnv); mode != "" {
		fakeGateway(mode)
		return
	}
	os.Exit(m.Run())
}

func fakeGateway(mode string) {
	if len(os.Args) != 3 || os.Args[1] != "--config" {
		os.Exit(2)
	}
	addr, ok := strings.CutPrefix(mode, "serve ")
	if !ok {
		os.Exit(7)
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TOLLGATE_") {
			os.Exit(3)
		}
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	srv := &http.Server{Addr: addr, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	})}
	go func() { _ = srv.ListenAndServe() }()
	<-term
	os.Exit(0)
}

// startFake starts the test binary as a gateway in mode ("serve" is
// given the admin address).
func startFake(t *testing.T, mode string) (*Gateway, string, error) {
	t.Helper()
	admin, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	if mode == "serve" {
		mode += " " + admin
	}
	t.Setenv(fakeGatewayEnv, mode)
	t.Setenv("TOLLGATE_STORE_BACKEND", "redis") // must not reach the gateway
	cfg := filepath.Join(t.TempDir(), "gateway.toml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := StartGateway(ctx, os.Args[0], cfg, admin, nil)
	return g, admin, err
}

// stopWithin fails t unless g.Stop returns within d (a hang, not a speed).
func stopWithin(t *testing.T, g *Gateway, d time.Duration) {
	t.Helper()
	stopped := make(chan struct{})
	go func() { g.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(d):
		t.Fatalf("Stop did not return within %v", d)
	}
}

// TestStartGatewayStop: a healthy gateway runs, without the TOLLGATE_*
// environment, until Stop ends it by SIGTERM; Done is closed then, and a
// second Stop returns at once.
func TestStartGatewayStop(t *testing.T) {
	g, admin, err := startFake(t, "serve")
	if err != nil {
		t.Fatalf("StartGateway: %v", err)
	}
	if resp, err := http.Get("http://" + admin + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz after StartGateway: %v %v", resp, err)
	}
	select {
	case <-g.Done():
		t.Fatalf("Done closed while the gateway runs (exit: %v)", g.Err())
	default:
	}
	if g.Err() != nil {
		t.Errorf("Err = %v while running, want nil", g.Err())
	}
	stopWithin(t, g, 5*time.Second)
	select {
	case <-g.Done():
	default:
		t.Fatal("Done still open after Stop")
	}
	if err := g.Err(); err != nil {
		t.Errorf("exit after SIGTERM: %v, want status 0", err)
	}
	stopWithin(t, g, time.Second)
}

// TestStartGatewayExits: a gateway that ends before it is healthy is an
// error of StartGateway, not a 15 s wait.
func TestStartGatewayExits(t *testing.T) {
	started := time.Now()
	if _, _, err := startFake(t, "exit"); err == nil || !strings.Contains(err.Error(), "exited before it was healthy") {
		t.Fatalf("StartGateway = %v, want the exit reported", err)
	}
	if took := time.Since(started); took > 10*time.Second {
		t.Errorf("StartGateway took %v to see the exit", took)
	}
}

// TestGatewayExitsMidRun: a gateway that dies while it runs closes Done
// with its exit status for every reader, and Stop afterwards returns at
// once (it once waited for a status already taken by the run's loop).
func TestGatewayExitsMidRun(t *testing.T) {
	g, _, err := startFake(t, "serve")
	if err != nil {
		t.Fatalf("StartGateway: %v", err)
	}
	if err := syscall.Kill(g.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-g.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("Done not closed after SIGKILL")
		}
	}
	var exit *exec.ExitError
	if err := g.Err(); !errors.As(err, &exit) {
		t.Errorf("Err = %v, want the killed process's exit status", err)
	}
	stopWithin(t, g, 5*time.Second)
}
