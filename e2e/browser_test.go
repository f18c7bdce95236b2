package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// chromiumPath finds Chromium, installing it from apt when missing and the
// test runs as root (as in CI); otherwise the test fails saying how.
func chromiumPath(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("the dashboard test needs Chromium: apt-get install -y chromium")
	}
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "chromium"}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apt-get %s: %v\n%s\n(the dashboard test needs Chromium: apt-get install -y chromium)", strings.Join(args, " "), err, out)
		}
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium installed from apt but not found: %v", err)
	}
	return p
}

// browser is a headless Chromium driven over the DevTools protocol: one
// page, one websocket, requests answered in order.
type browser struct {
	t    testing.TB
	ws   *websocket.Conn
	mu   sync.Mutex
	next int
}

var devtoolsLine = regexp.MustCompile(`DevTools listening on (ws://\S+)`)

// startBrowser starts Chromium on a blank page and connects to the page.
func startBrowser(t testing.TB) *browser {
	t.Helper()
	cmd := exec.Command(chromiumPath(t), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--window-size=1440,900",
		"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
		// The DevTools websocket accepts only the origin it is told.
		"--remote-allow-origins=http://127.0.0.1",
		"--user-data-dir="+t.TempDir(), "about:blank")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := devtoolsLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	var browserWS string
	select {
	case browserWS = <-found:
	case <-time.After(30 * time.Second):
		t.Fatal("chromium printed no DevTools address within 30s")
	}
	// The page target of about:blank.
	host := strings.TrimPrefix(browserWS, "ws://")
	host = host[:strings.IndexByte(host, '/')]
	var pageWS string
	for deadline := time.Now().Add(10 * time.Second); pageWS == "" && time.Now().Before(deadline); {
		resp, err := http.Get("http://" + host + "/json/list")
		if err == nil {
			var targets []struct{ Type, WebSocketDebuggerURL string }
			_ = json.NewDecoder(resp.Body).Decode(&targets)
			resp.Body.Close()
			for _, tg := range targets {
				if tg.Type == "page" {
					pageWS = tg.WebSocketDebuggerURL
				}
			}
		}
		if pageWS == "" {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if pageWS == "" {
		t.Fatal("chromium has no page target")
	}
	ws, err := websocket.Dial(pageWS, "", "http://127.0.0.1")
	if err != nil {
		t.Fatalf("connecting to the page: %v", err)
	}
	ws.MaxPayloadBytes = 64 << 20
	t.Cleanup(func() { ws.Close() })
	return &browser{t: t, ws: ws}
}

// call sends one DevTools command and returns its result, skipping the
// events the page sends meanwhile.
func (b *browser) call(method string, params any) json.RawMessage {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	id := b.next
	if err := websocket.JSON.Send(b.ws, map[string]any{"id": id, "method": method, "params": params}); err != nil {
		b.t.Fatalf("%s: %v", method, err)
	}
	_ = b.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := websocket.JSON.Receive(b.ws, &msg); err != nil {
			b.t.Fatalf("%s: %v", method, err)
		}
		if msg.ID != id {
			continue
		}
		if msg.Error != nil {
			b.t.Fatalf("%s: %s", method, msg.Error.Message)
		}
		return msg.Result
	}
}

// eval evaluates a JavaScript expression in the page and decodes its
// value (awaited when it is a promise) into out.
func (b *browser) eval(expr string, out any) {
	b.t.Helper()
	res := b.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true})
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		b.t.Fatalf("eval %s: %v", expr, err)
	}
	if r.ExceptionDetails != nil {
		b.t.Fatalf("eval %s: %s", expr, r.ExceptionDetails.Text)
	}
	if out != nil {
		if err := json.Unmarshal(r.Result.Value, out); err != nil {
			b.t.Fatalf("eval %s: decoding %s: %v", expr, r.Result.Value, err)
		}
	}
}

// navigate loads url and waits for its load event's document.
func (b *browser) navigate(url string) {
	b.t.Helper()
	b.call("Page.navigate", map[string]any{"url": url})
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var state, href string
		b.eval(`document.readyState`, &state)
		b.eval(`location.href`, &href)
		if state == "complete" && href == url {
			return
		}
	}
	b.t.Fatalf("%s did not load within 15s", url)
}

// screenshot returns a PNG of the page.
func (b *browser) screenshot() []byte {
	b.t.Helper()
	var r struct {
		Data []byte `json:"data"`
	}
	if err := json.Unmarshal(b.call("Page.captureScreenshot", map[string]any{"format": "png"}), &r); err != nil {
		b.t.Fatal(err)
	}
	return r.Data
}

// dashRow is one limit's row as the dashboard shows it.
type dashRow struct {
	Allowed, Denied, Shadow float64
}

// readDashboard returns the dashboard's rows by limit and the time of
// the figures they show (the data's "now").
func (b *browser) readDashboard() (map[string]dashRow, time.Time) {
	b.t.Helper()
	var v struct {
		Now  string
		Rows map[string]dashRow
	}
	b.eval(`(() => {
		const rows = {};
		for (const tr of document.querySelectorAll("#limits tbody tr[data-limit]")) {
			rows[tr.dataset.limit] = {
				Allowed: Number(tr.querySelector("td.allowed").textContent),
				Denied: Number(tr.querySelector("td.denied").textContent),
				Shadow: Number(tr.querySelector("td.shadow").textContent)};
		}
		return {Now: document.getElementById("updated").dataset.now || "", Rows: rows};
	})()`, &v)
	at, _ := time.Parse(time.RFC3339Nano, v.Now)
	return v.Rows, at
}

// TestDashboardMatchesMetrics drives the dashboard in headless Chromium:
// the page asks for the admin token (kept in session storage, never in a
// URL), then shows, per limit, the decisions /metrics reports — equal to
// a scrape taken just before the page's next refresh — and the top
// limited client of the limit clicked; on Redis, the store's latency. On
// the memory store, a screenshot of the page under traffic is written to
// docs/dashboard.png when TOLLGATE_UPDATE_SCREENSHOT is set.
func TestDashboardMatchesMetrics(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"memory", "redis"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			testDashboard(t, store)
		})
	}
}

func testDashboard(t *testing.T, store string) {
	const token = "dash-token-7f3a"
	// 40 more limits on a route of their own: the table must stay usable.
	var extra strings.Builder
	var names []string
	for i := range 40 {
		fmt.Fprintf(&extra, "[[limits]]\nname = \"tenant-%02d\"\nrates = [\"%d/minute\"]\nalgorithm = \"gcra\"\nby = [\"client\"]\n\n", i, 20+i)
		names = append(names, fmt.Sprintf("%q", fmt.Sprintf("tenant-%02d", i)))
	}
	fmt.Fprintf(&extra, "[[routes]]\nname = \"tenants\"\npath_prefix = \"/t\"\nrespond = { status = 200, body = \"ok\" }\nlimits = [%s]\n\n", strings.Join(names, ", "))
	addr := ""
	if store == "redis" {
		addr = startRedisAddr(t)
	}
	d := topData(addr, false)
	d["TokenEnv"], d["TopK"], d["Rate"], d["ExtraLimits"] = "DASH_TOKEN", 100, "20/minute", extra.String()
	g := startGateway(t, "top.toml.tmpl", gwOpts{Data: d, Env: []string{"DASH_TOKEN=" + token}})
	br := startBrowser(t)

	// Without the token the data endpoint refuses; the page itself holds
	// no data and asks for the token.
	if r := adminDo(t, g, "GET", "/admin/ui/data", ""); r.Status != 401 {
		t.Fatalf("/admin/ui/data without the token: %s", r)
	}
	br.navigate(g.adminURL("/admin/ui"))
	waitFor(t, br, `!document.getElementById("login").classList.contains("hidden")`, "the token form")
	// Nothing was tried yet: nothing was refused.
	var loginErr string
	br.eval(`document.getElementById("loginerr").textContent`, &loginErr)
	if loginErr != "" {
		t.Errorf("the token form says %q before a token was tried", loginErr)
	}
	br.eval(`document.getElementById("token").value = "wrong"; document.getElementById("loginform").requestSubmit(); true`, nil)
	waitFor(t, br, `document.getElementById("loginerr").textContent.includes("refused")`, "the wrong token refused")
	br.eval(`document.getElementById("token").value = "`+token+`"; document.getElementById("loginform").requestSubmit(); true`, nil)
	waitFor(t, br, `document.querySelectorAll("#limits tbody tr[data-limit]").length === 42`, "42 limit rows")
	var href string
	br.eval(`location.href`, &href)
	if strings.Contains(href, token) {
		t.Fatalf("the token is in the URL %s", href)
	}

	// Traffic: five clients, two of them far over the limit.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := &http.Client{Timeout: 5 * time.Second}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			key := fmt.Sprint("client-", i%5)
			if i%3 != 0 {
				key = fmt.Sprint("hot-", i%2)
			}
			path := "/api"
			if i%4 == 0 {
				path = "/t"
			}
			req, _ := http.NewRequest("GET", g.url(path), nil)
			req.Header.Set("X-API-Key", key)
			if resp, err := c.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	time.Sleep(3 * time.Second)
	br.eval(`document.querySelector('#limits tr[data-limit="per-client"]').click(); true`, nil)
	waitFor(t, br, `document.querySelectorAll("#top tbody tr td").length > 1 && document.querySelector("#top tbody td").textContent.length >= 16`, "top clients of per-client")
	shot := br.screenshot()
	close(stop)
	<-done
	if len(shot) < 1000 || string(shot[1:4]) != "PNG" {
		t.Fatalf("screenshot: %d bytes, not a PNG", len(shot))
	}
	if store == "redis" {
		var lat string
		br.eval(`document.getElementById("latency").textContent`, &lat)
		if !strings.Contains(lat, " ms (") {
			t.Errorf("store latency on Redis shows %q, want a mean in ms", lat)
		}
	}
	if store == "memory" && os.Getenv("TOLLGATE_UPDATE_SCREENSHOT") != "" {
		root, err := moduleRoot()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(root+"/docs/dashboard.png", shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Traffic has stopped: the page's next refresh shows what /metrics says.
	m := scrape(t, g, token)
	scraped := time.Now()
	var rows map[string]dashRow
	deadline := time.Now().Add(5 * time.Second)
	for {
		var at time.Time
		rows, at = br.readDashboard()
		if at.After(scraped) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dashboard did not refresh within 5s of the scrape (shows %v)", at)
		}
		time.Sleep(100 * time.Millisecond)
	}
	metric := func(limit, decision, mode string) float64 {
		return m[fmt.Sprintf(`tollgate_decisions_total{tollgate_decision=%q,tollgate_limit=%q,tollgate_mode=%q}`, decision, limit, mode)]
	}
	checked := 0
	for _, l := range []string{"per-client", "probe", "tenant-00", "tenant-39"} {
		mode := "enforce"
		if l == "probe" {
			mode = "shadow"
		}
		want := dashRow{Allowed: metric(l, "allowed", mode)}
		if mode == "shadow" {
			want.Shadow = metric(l, "denied", mode)
		} else {
			want.Denied = metric(l, "denied", mode)
		}
		if got := rows[l]; got != want {
			t.Errorf("limit %s: dashboard %+v, /metrics %+v", l, got, want)
		}
		if want.Allowed > 0 {
			checked++
		}
	}
	if rows["per-client"].Denied == 0 || rows["probe"].Shadow == 0 || checked < 4 {
		t.Errorf("the traffic should have denied on per-client and shadow-denied on probe: %+v", rows)
	}
	// A candidate with a tighter per-client limit: the dashboard shows
	// its extra denials once traffic runs.
	live, err := os.ReadFile(g.Config)
	if err != nil {
		t.Fatal(err)
	}
	cand := strings.Replace(string(live), `rates = ["20/minute"]`, `rates = ["1/minute"]`, 1)
	c := &http.Client{Timeout: 5 * time.Second}
	r, err := tryDo(c, "POST", g.adminURL("/admin/candidate"),
		map[string]string{"Content-Type": "application/toml", "Authorization": "Bearer " + token}, []byte(cand))
	if err != nil || r.Status/100 != 2 {
		t.Fatalf("POST /admin/candidate: %v %v", r, err)
	}
	for i := range 5 {
		get(t, c, g.url("/api"), map[string]string{"X-API-Key": fmt.Sprint("fresh-", i%2)})
	}
	waitFor(t, br, `!document.getElementById("candidate").classList.contains("hidden") && Number((document.querySelector('#candlimits tr[data-limit="per-client"] td.extra') || {}).textContent) > 0`, "the candidate's extra denials")
	// The filter narrows the table to matching limits.
	br.eval(`const f = document.getElementById("filter"); f.value = "tenant-1"; f.dispatchEvent(new Event("input")); true`, nil)
	waitFor(t, br, `document.querySelectorAll("#limits tbody tr[data-limit]").length === 10`, "10 rows for tenant-1")
	// The client form inspects one counter through /admin/limits.
	br.eval(`document.getElementById("climit").value = "per-client"; document.getElementById("ckey").value = "api_key:hot-0"; document.getElementById("clientform").requestSubmit(); true`, nil)
	waitFor(t, br, `document.getElementById("clientout").textContent.includes("\"used\"")`, "the usage of hot-0")
	// The reset button's DELETE (with the page's own Origin) passes the
	// admin listener's cross-site checks.
	br.eval(`window.confirm = () => true; document.getElementById("reset").click(); true`, nil)
	waitFor(t, br, `document.getElementById("clientout").textContent.startsWith("reset.")`, "the reset of hot-0")
}

// waitFor waits until a JavaScript condition holds in the page.
func waitFor(t testing.TB, br *browser, cond, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var ok bool
		br.eval("!!("+cond+")", &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			var body string
			br.eval(`document.body.innerText.slice(0, 2000)`, &body)
			t.Fatalf("waiting for %s: not within 15s; the page shows:\n%s", what, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
