package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// hHold names a request the gate upstream holds until the test lets it go.
const hHold = "X-Hold"

// gate is an upstream that holds every request carrying hHold until the
// test releases that name (or the request is cancelled), so a test knows
// exactly which requests are in flight.
type gate struct {
	*httptest.Server
	mu      sync.Mutex
	open    map[string]chan struct{}
	arrived chan string // the hHold of every held request, when it arrives
}

func newGate(t testing.TB) *gate {
	g := &gate{open: map[string]chan struct{}{}, arrived: make(chan string, 1024)}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := r.Header.Get(hHold); name != "" {
			ch := g.ch(name)
			g.arrived <- name
			select {
			case <-ch:
			case <-r.Context().Done():
				return
			}
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(func() {
		g.mu.Lock()
		for _, ch := range g.open {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
		g.mu.Unlock()
		g.Close()
	})
	return g
}

func (g *gate) ch(name string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	ch := g.open[name]
	if ch == nil {
		ch = make(chan struct{})
		g.open[name] = ch
	}
	return ch
}

// let ends the held request name (its response completes).
func (g *gate) let(name string) { close(g.ch(name)) }

// held is a request sent through the gateway and held at the gate.
type held struct {
	name string
	done chan *response // its response, once the gate lets it go (nil on error)
}

// hold sends GET url with hHold: name (and hdr) and returns at once.
func hold(t testing.TB, url, name string, hdr map[string]string) *held {
	h := &held{name: name, done: make(chan *response, 1)}
	all := map[string]string{hHold: name}
	for k, v := range hdr {
		all[k] = v
	}
	c := &http.Client{Timeout: 60 * time.Second}
	go func() {
		r, err := tryDo(c, "GET", url, all, nil)
		if err != nil {
			t.Logf("held request %s: %v", name, err)
			r = nil
		}
		h.done <- r
	}()
	return h
}

// holdAdmitted sends a held request and waits until it reaches the gate
// (it was admitted and is in flight).
func holdAdmitted(t testing.TB, gt *gate, url, name string, hdr map[string]string) *held {
	t.Helper()
	h := hold(t, url, name, hdr)
	select {
	case got := <-gt.arrived:
		if got != name {
			t.Fatalf("held request %s: the gate saw %s arrive instead", name, got)
		}
	case r := <-h.done:
		t.Fatalf("held request %s was not admitted: %v", name, r)
	case <-time.After(15 * time.Second):
		t.Fatalf("held request %s did not reach the upstream within 15s", name)
	}
	return h
}

// finish lets a held request end and waits for its 200.
func finish(t testing.TB, gt *gate, h *held) {
	t.Helper()
	gt.let(h.name)
	select {
	case r := <-h.done:
		if r == nil || r.Status != 200 {
			t.Fatalf("held request %s ended with %v, want 200", h.name, r)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("held request %s did not end within 15s of its release", h.name)
	}
}

// admitted sends n held requests at once and reports how many were
// admitted (reached the gate, all held at once) and how many got 429; once
// every request is one or the other, the admitted ones are let go and
// their responses awaited.
func admitted(t testing.TB, gt *gate, url, prefix string, n int, hdr map[string]string) (ok, limited int) {
	t.Helper()
	hs := map[string]*held{}
	for i := range n {
		h := hold(t, url, fmt.Sprintf("%s-%d", prefix, i), hdr)
		hs[h.name] = h
	}
	var in []*held
	deadline := time.After(20 * time.Second)
	for len(hs) > 0 {
		select {
		case name := <-gt.arrived:
			if h := hs[name]; h != nil {
				in = append(in, h)
				delete(hs, name)
			}
			continue
		case <-deadline:
			t.Fatalf("%s: %d of %d requests neither arrived nor were answered within 20s", prefix, len(hs), n)
		case <-time.After(5 * time.Millisecond):
		}
		for name, h := range hs {
			select {
			case r := <-h.done:
				switch {
				case r == nil:
					t.Fatalf("%s: request %s failed", prefix, name)
				case r.Status == 429:
					limited++
				default:
					t.Fatalf("%s: request %s answered %s, want it held (admitted) or 429", prefix, name, r)
				}
				delete(hs, name)
			default:
			}
		}
	}
	for _, h := range in {
		finish(t, gt, h)
	}
	return len(in), limited
}

// concData is conc.toml.tmpl's data: Redis at addr ("" for the memory
// store), on_error, the store timeout, the slots' lease and the memory
// store's bound, and the limits and routes as TOML text.
func concData(addr, onError, timeout, lease string, maxKeys int, body string) map[string]any {
	return map[string]any{"Redis": addr, "OnError": onError, "Timeout": timeout, "LeaseTTL": lease,
		"MaxKeys": maxKeys, "Body": body}
}

// concBody is one concurrency limit c (max_in_flight n, keyed by by, in
// mode) on a route "/" to upstream.
func concBody(upstream string, n int, mode, by string) string {
	return fmt.Sprintf(`[[limits]]
name = "c"
algorithm = "concurrency"
max_in_flight = %d
mode = %q
by = [%s]

[[routes]]
name = "all"
path_prefix = "/"
upstream = %q
limits = ["c"]
`, n, mode, by, upstream)
}

// waitUsed polls the admin API until limit c's usage for key is want, and
// fails after d.
func waitUsed(t testing.TB, g *gw, key string, want int64, d time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		r := adminDo(t, g, "GET", "/admin/limits?limit=c&key="+key, "")
		var u usage
		if r.Status == 200 {
			if err := json.Unmarshal(r.Body, &u); err != nil {
				t.Fatalf("GET /admin/limits: %v: %s", err, r.Body)
			}
			if len(u.Windows) == 1 && u.Windows[0].Used == want {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: usage of c is %s %+v after %v, want used %d", what, r, u.Windows, d, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestConcurrencyFallbackSlotReleasedLocally (issue: slots taken on the
// local fallback were released on Redis): max_in_flight = 2, by = [],
// on_error = "local". A is admitted on Redis; Redis stalls; B is admitted
// on this node's counters; Redis answers again; B ends. B's slot goes back
// to the local counters, not to Redis: Redis still counts A (a burst
// admits exactly one more, not two), and the local counters are empty
// again (a second stall admits two).
func TestConcurrencyFallbackSlotReleasedLocally(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	gt := newGate(t)
	g := startGateway(t, "conc.toml.tmpl", gwOpts{Data: concData(rs.Addr, "local", "200ms", "30s", 1000,
		concBody(gt.URL, 2, "enforce", ""))})

	a := holdAdmitted(t, gt, g.url("/a"), "A", nil)
	waitUsed(t, g, "", 1, 10*time.Second, "A on Redis")

	rs.Pause()
	b := holdAdmitted(t, gt, g.url("/b"), "B", nil) // decided locally
	rs.Resume()
	waitUsed(t, g, "", 1, 10*time.Second, "Redis back, A and B in flight")
	finish(t, gt, b)
	// B's release has had time to land wherever it goes.
	time.Sleep(500 * time.Millisecond)
	waitUsed(t, g, "", 1, 10*time.Second, "B ended, A in flight")
	if ok, limited := admitted(t, gt, g.url("/burst"), "burst", 4, nil); ok != 1 || limited != 3 {
		t.Errorf("burst with A in flight on Redis: %d admitted, %d limited; want 1 and 3", ok, limited)
	}
	finish(t, gt, a)
	waitUsed(t, g, "", 0, 10*time.Second, "A ended")

	// The local counters hold nothing: during a second stall both local
	// slots are free.
	rs.Pause()
	ok, limited := admitted(t, gt, g.url("/stall"), "stall", 3, nil)
	rs.Resume()
	if ok != 2 || limited != 1 {
		t.Errorf("second stall, nothing in flight: %d admitted locally, %d limited; want 2 and 1 (a local slot kept by B?)", ok, limited)
	}
}

// TestShadowConcurrencyReleasesOnlyCounted (issue: shadow concurrency
// limits released units they never counted): max_in_flight = 1 in shadow
// mode, two overlapping requests: the second is forwarded (shadow) but not
// counted, so when it ends the first one's unit is still counted, on both
// stores.
func TestShadowConcurrencyReleasesOnlyCounted(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			addr := ""
			if backend == "redis" {
				addr = redistest.Standalone(t).Addr
			}
			gt := newGate(t)
			g := startGateway(t, "conc.toml.tmpl", gwOpts{Data: concData(addr, "deny", "2s", "30s", 1000,
				concBody(gt.URL, 1, "shadow", ""))})
			first := holdAdmitted(t, gt, g.url("/1"), "first", nil)
			second := holdAdmitted(t, gt, g.url("/2"), "second", nil) // shadow: forwarded, not counted
			waitUsed(t, g, "", 1, 10*time.Second, "two in flight")
			finish(t, gt, second)
			time.Sleep(300 * time.Millisecond) // the release, if any, lands
			waitUsed(t, g, "", 1, 10*time.Second, "the uncounted request ended, the first in flight")
			finish(t, gt, first)
			waitUsed(t, g, "", 0, 10*time.Second, "both ended")
		})
	}
}

// TestRedisCrashedGatewaySlotsComeBack (issue: a kill -9-ed gateway's
// slots never came back while traffic continued, since every acquire
// refreshed the key's TTL): two gateways on one Redis, max_in_flight = 3,
// lease_ttl = 2s. Gateway 1 holds two slots and is killed; gateway 2 keeps
// taking and giving back the third. Within a lease (plus a margin and the
// renewal period) of the crash, gateway 2 holds all three at once. And a
// request that runs for several leases keeps its slot: its gateway renews
// the lease.
func TestRedisCrashedGatewaySlotsComeBack(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	gt := newGate(t)
	data := concData(rs.Addr, "deny", "2s", "2s", 1000, concBody(gt.URL, 3, "enforce", ""))
	g1 := startGateway(t, "conc.toml.tmpl", gwOpts{Data: data})
	g2 := startGateway(t, "conc.toml.tmpl", gwOpts{Data: data})

	holdAdmitted(t, gt, g1.url("/1"), "g1-a", nil)
	holdAdmitted(t, gt, g1.url("/1"), "g1-b", nil)
	waitUsed(t, g2, "", 2, 10*time.Second, "gateway 1 holds two")
	g1.kill()
	crash := time.Now()

	// Traffic through gateway 2 never stops; it may take the third slot
	// each time (and the crashed gateway's two are never renewed).
	c := newClient(t, "")
	for {
		r := get(t, c, g2.url("/traffic"), nil)
		if r.Status != 200 {
			t.Fatalf("traffic through gateway 2: %s, want 200 (one slot is free)", r)
		}
		u := limitUsage(t, g2, "", "c", "")
		if u.Windows[0].Used == 0 {
			break
		}
		if time.Since(crash) > 10*time.Second {
			t.Fatalf("10s after the crash (lease 2s) Redis still counts %d slots of the crashed gateway", u.Windows[0].Used)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the crashed gateway's slots came back %v after the crash (lease 2s)", time.Since(crash).Round(100*time.Millisecond))
	if ok, limited := admitted(t, gt, g2.url("/burst"), "burst", 5, nil); ok != 3 || limited != 2 {
		t.Errorf("burst after the crash: %d admitted, %d limited; want 3 and 2", ok, limited)
	}

	// A long request keeps its slot through several leases.
	long := holdAdmitted(t, gt, g2.url("/long"), "long", nil)
	time.Sleep(5 * time.Second) // 2.5 leases
	waitUsed(t, g2, "", 1, time.Second, "a request running for 2.5 leases")
	if ok, limited := admitted(t, gt, g2.url("/beside"), "beside", 4, nil); ok != 2 || limited != 2 {
		t.Errorf("burst beside the long request: %d admitted, %d limited; want 2 and 2", ok, limited)
	}
	finish(t, gt, long)
	waitUsed(t, g2, "", 0, 10*time.Second, "the long request ended")
}

// TestRedisBlipReleasesSlots (issue: a Redis blip held every concurrency
// slot for the whole lease): max_in_flight = 2, lease 30s. Two requests
// in flight; Redis stalls for 2s while both end (their releases fail);
// within a few seconds of Redis answering again both slots are free.
func TestRedisBlipReleasesSlots(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	gt := newGate(t)
	g := startGateway(t, "conc.toml.tmpl", gwOpts{Data: concData(rs.Addr, "deny", "200ms", "30s", 1000,
		concBody(gt.URL, 2, "enforce", ""))})
	a := holdAdmitted(t, gt, g.url("/a"), "A", nil)
	b := holdAdmitted(t, gt, g.url("/b"), "B", nil)
	waitUsed(t, g, "", 2, 10*time.Second, "two in flight")

	rs.Pause()
	finish(t, gt, a)
	finish(t, gt, b)
	time.Sleep(2 * time.Second)
	rs.Resume()
	back := time.Now()
	// A few seconds at most (the retry runs every 250 ms); 10 s leaves room
	// for a loaded machine, a third of the 30 s lease that held them before.
	waitUsed(t, g, "", 0, 10*time.Second, "10s after Redis answered again")
	t.Logf("slots free %v after Redis answered again", time.Since(back).Round(10*time.Millisecond))
	if ok, limited := admitted(t, gt, g.url("/after"), "after", 3, nil); ok != 2 || limited != 1 {
		t.Errorf("after the blip: %d admitted, %d limited; want 2 and 1", ok, limited)
	}
}

// TestMemoryHeldSlotNotEvicted (an LRU eviction could drop a held
// concurrency slot): the memory store bounded to 4 states, max_in_flight =
// 1 per client. A client holds its slot while 300 other clients pass
// through a rate limit (every one a new state, each evicting an older
// one); the client's second request is still limited.
func TestMemoryHeldSlotNotEvicted(t *testing.T) {
	t.Parallel()
	gt := newGate(t)
	body := concBody(gt.URL, 1, "enforce", `"client"`) + `
[[limits]]
name = "churn"
rates = ["5/minute"]
by = ["client"]

[[routes]]
name = "churn"
path_prefix = "/churn"
respond = { status = 200, body = "ok" }
limits = ["churn"]
`
	g := startGateway(t, "conc.toml.tmpl", gwOpts{Data: concData("", "local", "50ms", "30s", 4, body)})
	holder := map[string]string{"X-API-Key": "holder"}
	h := holdAdmitted(t, gt, g.url("/slow"), "held", holder)
	c := newClient(t, "")
	for i := range 300 {
		if r := get(t, c, g.url("/churn"), map[string]string{"X-API-Key": fmt.Sprint("churn-", i)}); r.Status != 200 {
			t.Fatalf("churn request %d: %s", i, r)
		}
	}
	if r := get(t, c, g.url("/second"), holder); r.Status != 429 {
		t.Errorf("the holder's second request while its first is in flight: %s, want 429 (its slot was evicted)", r)
	}
	finish(t, gt, h)
	pollStatus(t, c, g.url("/after"), holder, 200, 5*time.Second)
}

// reloadBody rewrites g's config with body and reloads it through the
// admin API.
func reloadBody(t testing.TB, g *gw, body string) {
	t.Helper()
	g.rewrite(t, map[string]any{"Body": body})
	if r := adminDo(t, g, "POST", "/admin/reload", ""); r.Status != 200 {
		t.Fatalf("POST /admin/reload: %s", r)
	}
}

// TestConcurrencyReloadAndResetMidFlight (hostile-inputs "Concurrency
// slots"): on both stores, a request in flight gives its slot back to the
// counter it was taken from, whatever happened since. max_in_flight = 1:
// A holds the enforced slot; a reload switches the limit to shadow (a new
// identity: its own counter) and B is counted there; A ends (its unit
// goes back to the enforced counter, not to the shadow one, which still
// shows B); a reload back to enforce finds the enforced counter free
// (exactly 1 of a burst of 3 admitted). Then C holds the slot and an admin
// reset clears the counter: a burst admits 1 more (the reset's promise),
// and C's release afterwards gives back nothing twice: the counter never
// goes below what is in flight.
func TestConcurrencyReloadAndResetMidFlight(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			addr := ""
			if backend == "redis" {
				addr = redistest.Standalone(t).Addr
			}
			gt := newGate(t)
			enforce, shadow := concBody(gt.URL, 1, "enforce", ""), concBody(gt.URL, 1, "shadow", "")
			g := startGateway(t, "conc.toml.tmpl", gwOpts{Data: concData(addr, "deny", "2s", "30s", 1000, enforce)})

			a := holdAdmitted(t, gt, g.url("/a"), "A", nil)
			reloadBody(t, g, shadow)
			waitUsed(t, g, "", 0, 5*time.Second, "the shadow limit's own counter")
			b := holdAdmitted(t, gt, g.url("/b"), "B", nil)
			waitUsed(t, g, "", 1, 5*time.Second, "B counted by the shadow limit")
			finish(t, gt, a)
			time.Sleep(300 * time.Millisecond)
			waitUsed(t, g, "", 1, 5*time.Second, "A ended: the shadow counter still shows B")
			reloadBody(t, g, enforce)
			waitUsed(t, g, "", 0, 5*time.Second, "back to enforce: A's unit was given back there")
			if ok, limited := admitted(t, gt, g.url("/burst"), "burst", 3, nil); ok != 1 || limited != 2 {
				t.Errorf("burst after the reloads: %d admitted, %d limited; want 1 and 2", ok, limited)
			}
			finish(t, gt, b) // counted by the shadow limit: gives back there

			c := holdAdmitted(t, gt, g.url("/c"), "C", nil)
			if r := adminDo(t, g, "DELETE", "/admin/limits?limit=c&key=", ""); r.Status != 200 {
				t.Fatalf("DELETE /admin/limits: %s", r)
			}
			waitUsed(t, g, "", 0, 5*time.Second, "reset with C in flight")
			d := holdAdmitted(t, gt, g.url("/d"), "D", nil) // the reset freed C's slot
			finish(t, gt, c)
			time.Sleep(300 * time.Millisecond)
			waitUsed(t, g, "", 1, 5*time.Second, "C (reset away) ended, D in flight")
			if ok, limited := admitted(t, gt, g.url("/burst2"), "burst2", 2, nil); ok != 0 || limited != 2 {
				t.Errorf("burst with D in flight: %d admitted, %d limited; want 0 and 2", ok, limited)
			}
			finish(t, gt, d)
			waitUsed(t, g, "", 0, 5*time.Second, "all ended")
		})
	}
}
