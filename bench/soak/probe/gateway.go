package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Gateway is a gateway process started by StartGateway. Done and Err may
// be read by any number of goroutines, before and after Stop.
type Gateway struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // Wait's result; set before done is closed
}

// StartGateway starts bin with --config config, the environment without
// TOLLGATE_* variables (so that the file alone configures it) and its
// output written to out (nil discards it), then polls admin's /healthz
// until it answers 200, for at most 15 s. On an error the process is
// stopped (and its output complete in out) before StartGateway returns.
func StartGateway(ctx context.Context, bin, config, admin string, out io.Writer) (*Gateway, error) {
	if out == nil {
		out = io.Discard
	}
	cmd := exec.Command(bin, "--config", config)
	cmd.Env = CleanEnv()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &Gateway{cmd: cmd, done: make(chan struct{})}
	go func() {
		g.err = cmd.Wait()
		close(g.done)
	}()
	if err := g.waitHealthy(ctx, admin); err != nil {
		g.Stop()
		return nil, err
	}
	return g, nil
}

// waitHealthy polls admin's /healthz every 50 ms for up to 15 s.
func (g *Gateway) waitHealthy(ctx context.Context, admin string) error {
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-g.done:
			return fmt.Errorf("gateway exited before it was healthy: %v", g.err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/healthz", nil)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("gateway not healthy within 15s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PID is the gateway's process id.
func (g *Gateway) PID() int { return g.cmd.Process.Pid }

// Signal sends sig to the gateway (SIGHUP reloads its configuration).
func (g *Gateway) Signal(sig os.Signal) error { return g.cmd.Process.Signal(sig) }

// Done is closed once the process has ended, however it ended.
func (g *Gateway) Done() <-chan struct{} { return g.done }

// Err is the process's exit status once Done is closed (nil before).
func (g *Gateway) Err() error {
	select {
	case <-g.done:
		return g.err
	default:
		return nil
	}
}

// Stop ends the gateway by its PID: SIGTERM, then SIGKILL after 10 s. It
// returns once the process has ended, and at once if it already had.
func (g *Gateway) Stop() {
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-g.done:
	case <-time.After(10 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
}

// CleanEnv is this process's environment without TOLLGATE_* variables.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TOLLGATE_") {
			env = append(env, kv)
		}
	}
	return env
}
