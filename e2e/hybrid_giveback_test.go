package e2e

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// windowCount is the count of the one fixed-window state key in rs (two
// little-endian doubles: window start, count), or fails t.
func windowCount(t *testing.T, rs *redistest.Server) int64 {
	t.Helper()
	keys, err := rs.Do("KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	var found []int64
	for _, k := range keys.([]any) {
		if strings.Contains(k.(string), "tollgate-probe") {
			continue // the readiness probe's key
		}
		v, err := rs.Do("GET", k.(string))
		if s, ok := v.(string); err == nil && ok && len(s) == 16 {
			found = append(found, int64(math.Float64frombits(binary.LittleEndian.Uint64([]byte(s[8:])))))
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one fixed-window state in Redis, found %v among %v", found, keys)
	}
	return found[0]
}

// TestHybridGiveBack: three gateway processes on one redis-server share a
// batched fixed window of 100 per 10 s (leases of up to 10, sync_interval
// 50ms). A steady, paced load of exactly 100 requests spread over them
// admits them all but a few: a lease that ends with units left gives them
// back when the gateway next leases, so they are not stranded; the last
// leases of each gateway go back when it shuts down, after which Redis
// counts exactly what the fleet admitted (no stranded units at the
// window's end). The fixed window's bound holds throughout. On both
// clocks: with store.clock = "store" (the default) Redis counts at its
// own instant, which its reply reports and the give-back names.
func TestHybridGiveBack(t *testing.T) {
	t.Parallel()
	for _, clock := range []string{"store", "local"} {
		t.Run(clock, func(t *testing.T) {
			t.Parallel()
			hybridGiveBack(t, clock)
		})
	}
}

func hybridGiveBack(t *testing.T, clock string) {
	rs := redistest.Standalone(t)
	const n, limit, gateways = 100, 100, 3
	body := "[[limits]]\nname = \"steady\"\nrates = [\"100/10s\"]\nalgorithm = \"fixed_window\"\nby = []\n" +
		"sync = \"batched\"\nsync_interval = \"50ms\"\nlease_size = 10\n\n" + routeTOML("fw", "/fw", "steady")
	data := redisData(rs.Addr, nil, "deny", "10s", body)
	data["StoreExtra"] = "clock = \"" + clock + "\""
	var gws []*gw
	for range gateways {
		gws = append(gws, startGateway(t, "redis.toml.tmpl", gwOpts{Data: data}))
	}
	avoidWindowEdge(10 * time.Second)
	c := &http.Client{Timeout: 5 * time.Second}
	rng := rand.New(rand.NewPCG(7, 8))
	ok, denied := 0, 0
	for i := range n {
		time.Sleep(time.Duration(rng.IntN(8)) * time.Millisecond)
		switch r := get(t, c, gws[i%gateways].url("/fw"), nil); r.Status {
		case 200:
			ok++
		case 429:
			denied++
		default:
			t.Fatalf("request %d: %s", i, r)
		}
	}
	before := windowCount(t, rs)
	var returned float64
	for _, g := range gws {
		for _, v := range scrape(t, g, "").family("tollgate_store_lease_units_returned_total") {
			returned += v
		}
	}
	for _, g := range gws {
		g.stop(t)
	}
	after := windowCount(t, rs)
	t.Logf("%d of %d admitted, %d denied; Redis counted %d (stranded %d) before shutdown, %d after (stranded %d); %v units given back while serving",
		ok, n, denied, before, before-int64(ok), after, after-int64(ok), returned)
	if ok > limit || ok+denied != n {
		t.Errorf("admitted %d, denied %d of %d (limit %d)", ok, denied, n, limit)
	}
	if after != int64(ok) {
		t.Errorf("after every gateway shut down Redis counts %d units; the fleet admitted %d", after, ok)
	}
	if returned == 0 {
		t.Errorf("no lease units given back while serving")
	}
	if before < int64(ok) {
		t.Errorf("Redis counted %d units while the fleet had admitted %d", before, ok)
	}
}
