package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// reloadData is reload.toml.tmpl's data with its defaults, overridden by kv
// pairs.
func reloadData(kv ...any) map[string]any {
	d := map[string]any{"Shutdown": "10s", "RateA": "3/minute", "AlgA": "sliding_window_log",
		"Upstream": "", "Body": "v1", "WithB": false, "Extra": ""}
	for i := 0; i+1 < len(kv); i += 2 {
		d[kv[i].(string)] = kv[i+1]
	}
	return d
}

// reloadAndWait rewrites the config, sends SIGHUP and waits until /readyz
// reports a reload newer than the previous one; it returns that result.
func reloadAndWait(t *testing.T, g *gw, data map[string]any) *readyzBody {
	t.Helper()
	before := readyz(t, g).LastReload
	g.rewrite(t, data)
	g.signal(t, syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		rd := readyz(t, g)
		if rd.LastReload != nil && (before == nil || rd.LastReload.At.After(before.At)) {
			return rd
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz last_reload did not change within 10s of SIGHUP: %+v", rd.LastReload)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// expect sends a GET and checks its status (and body, when body != "").
func expect(t *testing.T, c *http.Client, url string, status int, body string) {
	t.Helper()
	r := get(t, c, url, nil)
	if r.Status != status || (body != "" && string(r.Body) != body) {
		t.Fatalf("GET %s: got %s, want %d %q", url, r, status, body)
	}
}

// TestReload: SIGHUP adds a new route; an unchanged
// limit keeps its count; an invalid file is rejected and the old config
// keeps serving; a limit whose count changed keeps its usage.
func TestReload(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "reload.toml.tmpl", gwOpts{Data: reloadData()})
	c := newClient(t, "")
	expect(t, c, g.url("/a"), 200, "v1")
	expect(t, c, g.url("/a"), 200, "v1")
	get(t, c, g.url("/b"), nil).problem(t, 404)

	rd := reloadAndWait(t, g, reloadData("WithB", true, "Body", "v2"))
	if !rd.LastReload.OK || !rd.Ready {
		t.Fatalf("valid reload reported %+v", rd)
	}
	expect(t, c, g.url("/b"), 200, "b")
	expect(t, c, g.url("/a"), 200, "v2") // third of 3: the count survived
	check429Body(t, get(t, c, g.url("/a"), nil), "a-limit")

	for _, bad := range []map[string]any{
		reloadData("WithB", false, "Body", "v3", "AlgA", "leaky_bucket"),
		reloadData("WithB", false, "Body", "v3", "Extra", "[server\nlisten = "),
		reloadData("WithB", false, "Body", "v3", "Extra", "[[routes]]\nname = \"a\"\nrespond = { status = 200 }\n"),
	} {
		rd = reloadAndWait(t, g, bad)
		if rd.LastReload.OK || rd.LastReload.Error == "" {
			t.Errorf("invalid reload reported %+v", rd.LastReload)
		}
		// The old configuration keeps serving, counters and all.
		expect(t, c, g.url("/b"), 200, "b")
		check429Body(t, get(t, c, g.url("/a"), nil), "a-limit")
	}
	if out := g.output(); !strings.Contains(out, "leaky_bucket") {
		t.Errorf("the rejected reload was not logged with its problem")
	}

	// A raised limit keeps the usage: 3 of 5 used, 2 left (not a fresh 5).
	rd = reloadAndWait(t, g, reloadData("WithB", true, "Body", "v4", "RateA", "5/minute"))
	if !rd.LastReload.OK {
		t.Fatalf("valid reload after rejected ones reported %+v", rd.LastReload)
	}
	for i := 0; i < 2; i++ {
		expect(t, c, g.url("/a"), 200, "v4")
	}
	check429Body(t, get(t, c, g.url("/a"), nil), "a-limit")
	expectPolicy := `"a-limit";q=5;w=60`
	if got := get(t, c, g.url("/a"), nil).Header.Get("RateLimit-Policy"); got != expectPolicy {
		t.Errorf("RateLimit-Policy after the reload = %q, want %q", got, expectPolicy)
	}
}

// TestSIGTERMDrains: on SIGTERM the gateway reports not
// ready, lets in-flight requests finish, and exits 0.
func TestSIGTERMDrains(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	g := startGateway(t, "reload.toml.tmpl", gwOpts{Data: reloadData("Upstream", up.URL, "RateA", "100/minute")})
	c := newClient(t, "")
	const inflight = 5
	results := make(chan string, inflight)
	for i := 0; i < inflight; i++ {
		go func() {
			r, err := tryDo(c, "GET", g.url(fmt.Sprintf("/a/slow-%d", i)), map[string]string{hSleep: "2s"}, nil)
			switch {
			case err != nil:
				results <- err.Error()
			case r.Status != 200 || r.Header.Get("X-Upstream") != "echo":
				results <- r.String()
			default:
				results <- "ok"
			}
		}()
	}
	for i := 0; i < inflight; i++ {
		up.waitArrived(t, 10*time.Second)
	}
	g.signal(t, syscall.SIGTERM)

	sawDraining := false
	deadline := time.Now().Add(1500 * time.Millisecond)
	for !sawDraining && time.Now().Before(deadline) {
		r, err := tryDo(&http.Client{Timeout: time.Second}, "GET", g.adminURL("/readyz"), nil, nil)
		if err == nil {
			var b readyzBody
			if json.Unmarshal(r.Body, &b) == nil && b.Draining && !b.Ready && r.Status == 503 {
				sawDraining = true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !sawDraining {
		t.Errorf("/readyz never reported 503 draining while requests were draining")
	}
	for i := 0; i < inflight; i++ {
		select {
		case res := <-results:
			if res != "ok" {
				t.Errorf("in-flight request lost on SIGTERM: %s", res)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("in-flight request did not finish within 15s of SIGTERM")
		}
	}
	code, err := g.wait(15 * time.Second)
	if err != nil || code != 0 {
		t.Errorf("after SIGTERM: exit code %d, %v; want 0", code, err)
	}
	if _, err := tryDo(&http.Client{Timeout: time.Second}, "GET", g.url("/a"), nil, nil); err == nil {
		t.Errorf("the public listener still answers after exit")
	}
}

// TestSIGINTExits: SIGINT stops the gateway like SIGTERM, exit 0.
func TestSIGINTExits(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "reload.toml.tmpl", gwOpts{Data: reloadData()})
	g.signal(t, syscall.SIGINT)
	if code, err := g.wait(15 * time.Second); err != nil || code != 0 {
		t.Errorf("after SIGINT: exit code %d, %v; want 0", code, err)
	}
}

// TestReloadStorm: SIGHUP every 100 ms under concurrent
// load: no request fails, and the final state equals the final file.
func TestReloadStorm(t *testing.T) {
	t.Parallel()
	g := startGateway(t, "reload.toml.tmpl", gwOpts{Data: reloadData("RateA", "1000000/minute")})
	c := newClient(t, "")
	load := startLoadLoop(c, 4, func(int) (string, func(*response) bool) {
		return g.url("/a"), func(r *response) bool { return r.Status == 200 && strings.HasPrefix(string(r.Body), "v") }
	})
	for i := 0; i < 25; i++ {
		g.rewrite(t, reloadData("RateA", "1000000/minute", "Body", fmt.Sprintf("v%d", i), "WithB", i%2 == 0))
		g.signal(t, syscall.SIGHUP)
		time.Sleep(100 * time.Millisecond)
	}
	g.rewrite(t, reloadData("RateA", "1000000/minute", "Body", "vfinal", "WithB", true))
	g.signal(t, syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for string(get(t, c, g.url("/a"), nil).Body) != "vfinal" {
		if time.Now().After(deadline) {
			t.Fatalf("the final file's body never became active")
		}
		time.Sleep(25 * time.Millisecond)
	}
	total, failures := load.stop()
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed during the reload storm; first: %s", len(failures), total, failures[0])
	}
	if total < 20 {
		t.Errorf("only %d requests were made during the storm", total)
	}
	time.Sleep(300 * time.Millisecond) // any reload still queued lands now
	for i := 0; i < 20; i++ {
		expect(t, c, g.url("/a"), 200, "vfinal")
	}
	expect(t, c, g.url("/b"), 200, "b")
	if rd := readyz(t, g); !rd.Ready || rd.LastReload == nil || !rd.LastReload.OK {
		t.Errorf("/readyz after the storm: %+v", rd)
	}
}
