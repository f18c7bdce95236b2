package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// goBuild builds the package pkg (such as "./cmd/gateway") of the module
// at root into the binary out.
func goBuild(ctx context.Context, root, pkg, out string) error {
	fmt.Fprintf(os.Stderr, "peerbench: building %s of %s\n", pkg, root)
	build := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	build.Dir = root
	if msg, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s in %s: %w\n%s", pkg, root, err, msg)
	}
	return nil
}
