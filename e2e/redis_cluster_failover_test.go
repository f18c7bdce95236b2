package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// failoverFollowBound is how soon after the Cluster reports cluster_state:ok
// again the gateway must decide in Redis for every client: about 2 s (the
// slot map is refreshed every second and on connection errors), plus a
// margin for a loaded machine. Before, it took go-redis's 60 s reload.
const failoverFollowBound = 4 * time.Second

// TestRedisClusterMasterKilled: on a 3-master/3-replica Cluster of its own
// (replicas in sync before anything is killed), a master is killed with
// SIGKILL; once the Cluster has promoted its replica and reports
// cluster_state:ok, the gateway makes real decisions (200 with RateLimit
// headers, on_error = "deny" would answer 503) for clients of every slot,
// those of the failed master included, within failoverFollowBound.
func TestRedisClusterMasterKilled(t *testing.T) {
	t.Parallel()
	cl := redistest.Cluster(t)
	body := limitTOML("per-client", "100000/minute", "fixed_window", "client") + routeTOML("r", "/k", "per-client")
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData("", cl.Addrs(), "deny", "500ms", body)})
	c := newClient(t, "")
	// 48 clients spread over the three masters' slots.
	clients := make([]map[string]string, 48)
	for i := range clients {
		clients[i] = map[string]string{"X-API-Key": fmt.Sprintf("failover-client-%d", i)}
	}
	round := func() (failed []string) {
		for i, h := range clients {
			r, err := tryDo(c, "GET", g.url("/k"), h, nil)
			switch {
			case err != nil:
				failed = append(failed, fmt.Sprintf("client %d: %v", i, err))
			case r.Status != 200 || r.Header.Get("RateLimit") == "":
				failed = append(failed, fmt.Sprintf("client %d: %d", i, r.Status))
			}
		}
		return failed
	}
	if failed := round(); len(failed) > 0 {
		t.Fatalf("before the failover: %s", strings.Join(failed, "; "))
	}
	victim := cl.Masters()[0]
	victim.Kill()
	// Wait for the Cluster itself: a replica promoted, every surviving
	// node reporting cluster_state:ok.
	deadline := time.Now().Add(redistest.StartTimeout)
	for {
		ok := len(cl.Masters()) == 3
		for _, n := range cl.Nodes {
			if n.PID() == 0 || !ok {
				continue
			}
			v, err := n.Do("CLUSTER", "INFO")
			ok = err == nil && strings.Contains(fmt.Sprint(v), "cluster_state:ok")
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Cluster did not recover from losing master %s within %v", victim.Addr, redistest.StartTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	recovered := time.Now()
	for {
		failed := round()
		if len(failed) == 0 {
			t.Logf("every client decided in Redis %v after cluster_state:ok", time.Since(recovered).Round(time.Millisecond))
			return
		}
		if time.Since(recovered) > failoverFollowBound {
			t.Fatalf("%v after the Cluster recovered, %d of %d clients still fail: %s", time.Since(recovered).Round(time.Millisecond),
				len(failed), len(clients), strings.Join(failed, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
