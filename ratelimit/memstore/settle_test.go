package memstore_test

import (
	"testing"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/memstore"
	"github.com/tollgate/gateway/ratelimit/storetest"
)

func TestSettle(t *testing.T) {
	storetest.RunSettle(t, func(*testing.T) ratelimit.Store { return memstore.New(memstore.Options{}) })
}
