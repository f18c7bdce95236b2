package e2e

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// TestRedisClientsGivingUpKeepBreakerClosed: Redis stalls for a second
// (CLIENT PAUSE) and 80 clients give up on their requests meanwhile. Their
// cancellations are not store failures: patient clients sent right after
// still get real decisions from Redis once it answers (200 with RateLimit
// headers), not on_error = "deny"'s 503 from an opened breaker.
func TestRedisClientsGivingUpKeepBreakerClosed(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	body := limitTOML("many", "100000/minute", "fixed_window", "client") + routeTOML("r", "/c", "many")
	// A store budget longer than the stall, so that only the clients give up.
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData(rs.Addr, nil, "deny", "3s", body)})
	warm := newClient(t, "")
	if r := get(t, warm, g.url("/c"), nil); r.Status != 200 || r.Header.Get("RateLimit") == "" {
		t.Fatalf("before the stall: %s, want 200 with RateLimit", r)
	}
	if _, err := rs.Do("CLIENT", "PAUSE", "1000", "ALL"); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	impatient := &http.Client{Timeout: 150 * time.Millisecond}
	var wg sync.WaitGroup
	for i := 0; i < 80; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", g.url("/c"), nil)
			req.Header.Set("X-API-Key", fmt.Sprintf("impatient-%d", i))
			if resp, err := impatient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	// Let the gateway see the 80 disconnects before the patient clients.
	time.Sleep(100 * time.Millisecond)
	if time.Since(paused) > 900*time.Millisecond {
		t.Skipf("the impatient clients took %v, past the stall on this loaded machine", time.Since(paused))
	}
	patient := &http.Client{Timeout: 10 * time.Second}
	res := make([]*response, 5)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := tryDo(patient, "GET", g.url("/c"), map[string]string{"X-API-Key": fmt.Sprintf("patient-%d", i)}, nil)
			if err != nil {
				t.Errorf("patient client %d: %v", i, err)
				return
			}
			res[i] = r
		}()
	}
	wg.Wait()
	for i, r := range res {
		if r != nil && (r.Status != 200 || r.Header.Get("RateLimit") == "") {
			t.Errorf("patient client %d: %s, want 200 decided by Redis (RateLimit header)", i, r)
		}
	}
}
