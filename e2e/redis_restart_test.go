package e2e

import (
	"sync"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// TestRedisRestartAndScriptFlushUnderLoad: under
// continuous load,
//   - SCRIPT FLUSH every 100 ms costs nothing: the store falls back from
//     EVALSHA to EVAL, a gateway with on_error = "deny" answers no 5xx at
//     all, and a shared 50/hour limit hit 200 times admits exactly 50;
//   - Redis killed and restarted empty (no keys, empty script cache) under
//     a gateway with on_error = "local": no 5xx while it is down or after;
//     and once it is back, the "deny" gateway decides in Redis again and
//     answers no 5xx under load.
func TestRedisRestartAndScriptFlushUnderLoad(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	body := limitTOML("per-key", "1000/hour", "sliding_window_log", "client") +
		limitTOML("exact", "50/hour", "sliding_window_log") +
		routeTOML("load", "/load", "per-key") + routeTOML("exact", "/exact", "exact")
	// The deny gateway must answer no 5xx at all, so its budget is far
	// above any decision's latency on a loaded machine (500 ms once was
	// not): a 503 then means a failed decision, never a slow one.
	deny := redisData(rs.Addr, nil, "deny", "5s", body)
	deny["Prefix"] = "tg-deny:"
	local := redisData(rs.Addr, nil, "local", "500ms", body)
	local["Prefix"] = "tg-local:"
	gd := startGateway(t, "redis.toml.tmpl", gwOpts{Data: deny})
	gl := startGateway(t, "redis.toml.tmpl", gwOpts{Data: local})

	t.Run("script-flush", func(t *testing.T) {
		avoidWindowEdge(time.Hour)
		stop := make(chan struct{})
		// A failing check must not leave the flusher running into later
		// tests: the cleanup stops it too.
		var stopOnce sync.Once
		halt := func() { stopOnce.Do(func() { close(stop) }) }
		t.Cleanup(halt)
		bg := load(t, gd.url("/load"), 4, 200, stop)
		flushed := make(chan int, 1)
		go func() {
			n := 0
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					flushed <- n
					return
				case <-tick.C:
					if _, err := rs.Do("SCRIPT", "FLUSH"); err == nil {
						n++
					}
				}
			}
		}()
		// 200 requests on the shared limit, 4 at a time, while flushing.
		exact := statuses{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			c := newClient(t, "")
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					r, err := tryDo(c, "GET", gd.url("/exact"), nil, nil)
					mu.Lock()
					if err != nil {
						exact[-1]++
					} else {
						exact[r.Status]++
					}
					mu.Unlock()
					time.Sleep(5 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		time.Sleep(500 * time.Millisecond) // a few more flushes under load
		halt()
		bg.wait()
		n := <-flushed
		t.Logf("%d SCRIPT FLUSHes; load %s; /exact %s", n, bg, exact)
		if n < 5 {
			t.Errorf("only %d SCRIPT FLUSHes ran", n)
		}
		if bg.fiveXX() > 0 {
			t.Errorf("load under SCRIPT FLUSH: %s, want no 5xx or errors", bg)
		}
		if exact[200] != 50 || exact[429] != 150 {
			t.Errorf("/exact under SCRIPT FLUSH: %s, want exactly 50×200 and 150×429", exact)
		}
	})

	t.Run("restart-empty", func(t *testing.T) {
		stop := make(chan struct{})
		bg := load(t, gl.url("/load"), 4, 200, stop)
		time.Sleep(300 * time.Millisecond)
		rs.Restart() // killed, started again empty on the same port
		if n := countKeys(t, rs, ""); n != 0 {
			t.Fatalf("restarted Redis holds %d keys, want an empty server", n)
		}
		time.Sleep(time.Second)
		close(stop)
		bg.wait()
		t.Logf("on_error=local through the restart: %s", bg)
		if bg.fiveXX() > 0 {
			t.Errorf("on_error=local through a Redis restart: %s, want no 5xx or errors", bg)
		}
		if countKeys(t, rs, "tg-local:") == 0 {
			t.Errorf("no counter reached the restarted Redis")
		}
		// The deny gateway recovers (bounded) and then serves load with
		// no 5xx at all.
		waitRedisDecides(t, rs, &faultGateway{onError: "deny", prefix: "tg-deny:", g: gd, path: "/load"}, "127.0.30.1")
		stop = make(chan struct{})
		bg = load(t, gd.url("/load"), 4, 200, stop)
		time.Sleep(time.Second)
		close(stop)
		bg.wait()
		t.Logf("on_error=deny after the restart: %s", bg)
		if bg.fiveXX() > 0 {
			t.Errorf("on_error=deny after Redis came back: %s, want no 5xx or errors", bg)
		}
	})
}
