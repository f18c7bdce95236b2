package probe

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModuleRoot is the directory of the main module's go.mod, as the go
// command finds it from the working directory.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the module (run from the repository)")
	}
	return filepath.Dir(mod), nil
}

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
