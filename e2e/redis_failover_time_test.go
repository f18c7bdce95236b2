package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// failoverBound is how soon after its master is killed the gateway must
// decide in Redis again. The test servers detect a dead master within a
// second (Sentinel down-after-milliseconds, cluster-node-timeout) and
// then elect; the gateway's part is to follow at once. A loaded machine
// slows the election, hence the margin over the few seconds it takes.
const failoverBound = 12 * time.Second

// decidesUntil sends one request per client every 50 ms until every one
// of them is decided in Redis (200 with RateLimit headers: on_error =
// "deny" answers 503 while the store fails), for at most bound. It
// returns how long that took, and fails t past bound. With fresh, each
// request is a new client (so that a small limit never denies); otherwise
// client i keeps its key, and so its Cluster slot.
func decidesUntil(t *testing.T, g *gw, clients int, fresh bool, bound time.Duration) time.Duration {
	t.Helper()
	c := newClient(t, "")
	start := time.Now()
	ok := make([]bool, clients)
	for n := 0; ; n++ {
		left := 0
		var last string
		for i := range ok {
			if ok[i] {
				continue
			}
			key := fmt.Sprintf("failover-%d", i)
			if fresh {
				key = fmt.Sprintf("failover-%d-%d", i, n)
			}
			h := map[string]string{"X-API-Key": key}
			r, err := tryDo(c, "GET", g.url("/x"), h, nil)
			switch {
			case err != nil:
				last = err.Error()
			case r.Status == 200 && r.Header.Get("RateLimit") != "":
				ok[i] = true
				continue
			default:
				last = fmt.Sprint(r.Status)
			}
			left++
		}
		if left == 0 {
			return time.Since(start)
		}
		if time.Since(start) > bound {
			t.Fatalf("%v after the master was killed, %d of %d clients still fail (last: %s)", time.Since(start).Round(time.Millisecond), left, clients, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedisSentinelMasterKilledDecidesInSeconds: the Sentinel group's
// master is killed (SIGKILL, no goodbye); the gateway decides in Redis
// again, on the promoted replica, within failoverBound of the kill, and
// keeps deciding there.
func TestRedisSentinelMasterKilledDecidesInSeconds(t *testing.T) {
	t.Parallel()
	g := redistest.Sentinel(t)
	addrs := `"` + strings.Join(g.SentinelAddrs(), `", "`) + `"`
	data := connData(fmt.Sprintf("sentinel = { master = %q, addrs = [%s] }", g.Name, addrs))
	gw := startGateway(t, "redis_conn.toml.tmpl", gwOpts{Data: data})
	decidesUntil(t, gw, 4, true, 5*time.Second)
	g.Master.Kill()
	took := decidesUntil(t, gw, 4, true, failoverBound)
	t.Logf("sentinel: decisions in Redis again %v after the master was killed", took.Round(time.Millisecond))
	master, err := g.MasterAddr()
	if err != nil || master != g.Replica.Addr {
		t.Fatalf("master after the failover: %s %v, want the replica %s", master, err, g.Replica.Addr)
	}
	if again := decidesUntil(t, gw, 16, true, 2*time.Second); again > time.Second {
		t.Errorf("after the failover, 16 clients took %v to be decided", again)
	}
}

// TestRedisClusterMasterKilledDecidesInSeconds: a Cluster master is killed
// (SIGKILL); clients of every slot, the dead master's included, are decided
// in Redis again within failoverBound of the kill.
func TestRedisClusterMasterKilledDecidesInSeconds(t *testing.T) {
	t.Parallel()
	cl := redistest.Cluster(t)
	body := limitTOML("per-client", "100000/minute", "fixed_window", "client") + routeTOML("r", "/x", "per-client")
	gw := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData("", cl.Addrs(), "deny", "500ms", body)})
	// 48 clients spread over the three masters' slots.
	decidesUntil(t, gw, 48, false, 5*time.Second)
	cl.Masters()[0].Kill()
	took := decidesUntil(t, gw, 48, false, failoverBound)
	t.Logf("cluster: every client decided in Redis again %v after a master was killed", took.Round(time.Millisecond))
}
