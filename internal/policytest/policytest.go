// Package policytest compiles configurations for tests: the defaults,
// changed by the test, with no environment and no files.
package policytest

import (
	"errors"
	"testing"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
)

// Compile compiles config.Default() changed by mutate, failing t when the
// result does not compile. Environment variables read as empty and files
// cannot be read.
func Compile(t testing.TB, mutate func(c *config.Config)) *policy.Policy {
	t.Helper()
	c := config.Default()
	mutate(&c)
	p, err := policy.Compile(c, func(string) string { return "" }, func(string) ([]byte, error) {
		return nil, errors.New("no files in this test")
	})
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return p
}
