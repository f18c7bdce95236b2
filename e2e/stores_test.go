package e2e

import (
	"testing"

	"github.com/tollgate/gateway/internal/redistest"
)

// stores runs f as a parallel subtest on each store: "memory", and
// "redis" with the address of a fresh standalone Redis.
func stores(t *testing.T, f func(t *testing.T, redis string)) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		f(t, "")
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		f(t, redistest.Standalone(t).Addr)
	})
}
