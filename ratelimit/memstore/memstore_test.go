package memstore_test

import (
	"testing"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) ratelimit.Store {
		return memstore.New(memstore.Options{MaxKeys: 1000, Shards: 4})
	})
}

func TestModes(t *testing.T) {
	storetest.RunModes(t, func(*testing.T) ratelimit.Store {
		return memstore.New(memstore.Options{})
	})
}

func TestOverrideTable(t *testing.T) {
	storetest.RunOverrides(t, func(*testing.T) ratelimit.OverrideTable {
		return memstore.New(memstore.Options{MaxKeys: 1000, Shards: 4})
	})
}
