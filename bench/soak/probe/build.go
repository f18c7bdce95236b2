package probe

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
)

// BuildGateway builds ./cmd/gateway of the module at root into dir and
// returns the binary's path. name labels the progress line written to log.
func BuildGateway(ctx context.Context, root, dir, name string, log io.Writer) (string, error) {
	bin := filepath.Join(dir, "gateway")
	fmt.Fprintf(log, "%s: building ./cmd/gateway\n", name)
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/gateway")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/gateway: %w\n%s", err, out)
	}
	return bin, nil
}

// FreeAddr returns a loopback address that was free a moment ago (the
// listener that found it is closed again), for a process to listen on.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
