package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// sinkEvent is one CloudEvent as the usage export posts it.
type sinkEvent struct {
	SpecVersion string         `json:"specversion"`
	Type        string         `json:"type"`
	Source      string         `json:"source"`
	ID          string         `json:"id"`
	Subject     string         `json:"subject"`
	Data        map[string]any `json:"data"`
}

// usageSink is a billing receiver: it keeps each event once by id (as a
// receiver of an at-least-once export must), counts the events it saw
// again, and answers as its script says for the n-th post.
type usageSink struct {
	srv    *http.Server
	addr   string
	mu     sync.Mutex
	byID   map[string]sinkEvent
	raw    []sinkEvent // every event received, duplicates included
	posts  int
	dups   int
	idem   []string
	script func(n int) string // "ok", "500", "hang", "lost" (kept, answered 500)
	hang   chan struct{}
}

// startSink serves the receiver on ln.
func startSink(t *testing.T, ln net.Listener, script func(n int) string) *usageSink {
	s := &usageSink{byID: map[string]sinkEvent{}, script: script, hang: make(chan struct{}), addr: ln.Addr().String()}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve)}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() {
		close(s.hang)
		s.srv.Close()
	})
	return s
}

func (s *usageSink) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.posts++
	n := s.posts
	s.idem = append(s.idem, r.Header.Get("Idempotency-Key"))
	s.mu.Unlock()
	mode := "ok"
	if s.script != nil {
		mode = s.script(n)
	}
	var evs []sinkEvent
	if err := json.NewDecoder(r.Body).Decode(&evs); err != nil {
		http.Error(w, "bad batch", 400)
		return
	}
	switch mode {
	case "500":
		w.WriteHeader(500)
		return
	case "hang":
		select {
		case <-s.hang:
		case <-r.Context().Done():
		}
		return
	}
	s.mu.Lock()
	for _, ev := range evs {
		s.raw = append(s.raw, ev)
		if _, dup := s.byID[ev.ID]; dup {
			s.dups++
			continue
		}
		s.byID[ev.ID] = ev
	}
	s.mu.Unlock()
	if mode == "lost" {
		w.WriteHeader(500) // kept, but the gateway cannot know
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// totals sums the units of the usage records kept, by "consumer/limit".
func (s *usageSink) totals() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for _, ev := range s.byID {
		if ev.Type == "dev.tollgate.usage.v1" {
			out[fmt.Sprint(ev.Data["consumer"], "/", ev.Data["limit"])] += int64(ev.Data["units"].(float64))
		}
	}
	return out
}

func (s *usageSink) postCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.posts
}

// usageRegistry: consumers acme and bob (plan pro), one key each.
func usageRegistry(t *testing.T) string {
	reg := filepath.Join(t.TempDir(), "consumers.toml")
	writeFileAtomic(t, reg, []byte(fmt.Sprintf(`[[consumers]]
name = "acme"
plan = "pro"
api_keys_sha256 = ["%s"]

[[consumers]]
name = "bob"
api_keys_sha256 = ["%s"]
`, keySum("acme-key"), keySum("bob-key"))))
	return reg
}

// usageData fills usage.toml.tmpl.
func usageData(t *testing.T, sink string, up *upstream, kv ...any) map[string]any {
	d := map[string]any{"Redis": "", "Prefix": "tollgate:", "Registry": usageRegistry(t), "Sink": sink,
		"Upstream": up.URL, "Rate": "40/hour", "Notify": false, "MaxPending": 100000,
		"Limits": `"calls", "monthly", "watch"`, "Extra": "", "Clock": ""}
	for i := 0; i+1 < len(kv); i += 2 {
		d[kv[i].(string)] = kv[i+1]
	}
	return d
}

// waitUntil polls cond; a hang guard, not a timing assertion.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ledger is the test's own account of what the gateway admitted: the
// cost of every answered request, by consumer and limit.
type ledger map[string]int64

// send makes n requests of consumer with key, costs 1..3 by X-Cost, and
// books each one the gateway admitted (200); 429s book nothing.
func (l ledger) send(t *testing.T, c *http.Client, g *gw, consumer, key string, n int) (admitted, limited int) {
	t.Helper()
	for i := range n {
		cost := int64(i%3 + 1)
		r := get(t, c, g.url("/api/x"), map[string]string{"X-API-Key": key, "X-Cost": strconv.FormatInt(cost, 10)})
		switch r.Status {
		case 200:
			admitted++
			l[consumer+"/calls"] += cost
			l[consumer+"/monthly"] += cost
			l[consumer+"/watch"] += 2 // the shadow limit's static cost
		case 429:
			limited++
		default:
			t.Fatalf("request %d of %s: %s", i, consumer, r)
		}
	}
	return admitted, limited
}

// TestUsageExportSinkFailsAndRecovers: the sink refuses connections,
// then answers 500, hangs past usage.timeout, keeps batches but answers
// 500 (their acknowledgement lost), and recovers; a reload happens
// between; the gateway stops gracefully. The receiver, deduplicating by
// id, holds exactly the units the gateway admitted, per consumer and
// limit: nothing lost, nothing counted twice, denied requests not at all.
func TestUsageExportSinkFailsAndRecovers(t *testing.T) {
	t.Run("memory", func(t *testing.T) { usageSinkFailsAndRecovers(t, "") })
	t.Run("redis", func(t *testing.T) { usageSinkFailsAndRecovers(t, redistest.Standalone(t).Addr) })
}

func usageSinkFailsAndRecovers(t *testing.T, redisAddr string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused until the receiver listens there
	up := newUpstream(t)
	g := startGateway(t, "usage.toml.tmpl", gwOpts{Data: usageData(t, "http://ingest:s3cret-token@"+addr+"/usage?key=q-secret", up,
		"Redis", redisAddr)})
	c := &http.Client{Timeout: 10 * time.Second}
	book := ledger{}

	_, limited := book.send(t, c, g, "acme", "acme-key", 30) // 60 units asked of 40/hour: some 429
	book.send(t, c, g, "bob", "bob-key", 5)
	waitUntil(t, "a refused post logged", func() bool { return strings.Contains(g.output(), "usage: posting records failed") })

	var ln2 net.Listener
	for range 200 { // the port was free a moment ago; retry briefly if taken
		if ln2, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ln2 == nil {
		t.Fatalf("listen %s again: %v", addr, err)
	}
	var holding atomic.Bool // the sink failing while the gateway reloads
	holding.Store(true)
	sink := startSink(t, ln2, func(n int) string {
		switch {
		case n <= 2:
			return "500"
		case n <= 4:
			return "hang"
		case n <= 6:
			return "lost"
		case holding.Load():
			return "500"
		}
		return "ok"
	})
	book.send(t, c, g, "bob", "bob-key", 10)
	waitUntil(t, "the receiver's scripted failures", func() bool { return sink.postCount() > 7 })

	// A reload while the sink fails keeps the aggregate (and the
	// exporter): what it holds is delivered after.
	before := time.Now()
	g.rewrite(t, map[string]any{"Extra": "\n[[routes]]\nname = \"more\"\npath_prefix = \"/more\"\nupstream = \"" + up.URL + "\"\n"})
	g.signal(t, syscall.SIGHUP)
	waitReload(t, g, before)
	book.send(t, c, g, "acme", "acme-key", 4)
	book.send(t, c, g, "bob", "bob-key", 3)
	holding.Store(false)
	n := sink.postCount()
	waitUntil(t, "a post after the sink recovered", func() bool { return sink.postCount() > n+1 })
	book.send(t, c, g, "bob", "bob-key", 2)

	if r := adminDo(t, g, "GET", "/admin/config", ""); r.Status != 200 || strings.Contains(string(r.Body), "s3cret") ||
		strings.Contains(string(r.Body), "ingest") || strings.Contains(string(r.Body), "q-secret") || !strings.Contains(string(r.Body), "REDACTED") {
		t.Errorf("/admin/config shows the sink's credentials or nothing: %s", r)
	}

	// A graceful stop flushes what is left.
	g.signal(t, syscall.SIGTERM)
	if code, err := g.wait(30 * time.Second); err != nil || code != 0 {
		t.Fatalf("exit %d, %v", code, err)
	}
	if limited == 0 {
		t.Errorf("no request was limited: the test does not show denied requests are not exported")
	}
	got := sink.totals()
	for k, want := range book {
		if got[k] != want {
			t.Errorf("%s: receiver holds %d units, the gateway admitted %d", k, got[k], want)
		}
	}
	for k := range got {
		if _, ok := book[k]; !ok {
			t.Errorf("%s: %d units exported for nothing admitted", k, got[k])
		}
	}
	sink.mu.Lock()
	dups, idem := sink.dups, sink.idem
	for _, ev := range sink.byID {
		if ev.SpecVersion != "1.0" || ev.Subject != ev.Data["consumer"] || ev.Source == "" {
			t.Errorf("event %+v", ev)
		}
		if ev.Data["limit"] == "monthly" && ev.Data["period"] != "month" {
			t.Errorf("quota record period %v, want month", ev.Data["period"])
		}
		if ev.Data["limit"] == "calls" && ev.Data["period"] != "1h0m0s" {
			t.Errorf("fixed window record period %v, want 1h0m0s", ev.Data["period"])
		}
	}
	sink.mu.Unlock()
	if dups == 0 {
		t.Errorf("no batch arrived twice: the lost acknowledgements were not retried")
	}
	for i, k := range idem {
		if k == "" {
			t.Errorf("post %d had no Idempotency-Key", i+1)
		}
	}
	out := g.output()
	for _, secret := range []string{"s3cret-token", "q-secret", "ingest:"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log shows the sink's secret %q", secret)
		}
	}
}

// TestUsageExportBound: with the sink failing and usage.max_pending = 1,
// the one record held keeps adding (its units all delivered once the
// sink recovers), while units needing a second record are dropped,
// counted in tollgate_usage_dropped_units_total and logged.
func TestUsageExportBound(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var down sync.Mutex
	failing := true
	sink := startSink(t, ln, func(int) string {
		down.Lock()
		defer down.Unlock()
		if failing {
			return "500"
		}
		return "ok"
	})
	up := newUpstream(t)
	g := startGateway(t, "usage.toml.tmpl", gwOpts{Data: usageData(t, "http://"+sink.addr+"/", up,
		"MaxPending", 1, "Limits", `"calls"`)})
	c := &http.Client{Timeout: 10 * time.Second}
	book := ledger{}
	book.send(t, c, g, "acme", "acme-key", 6) // 12 units, one record
	book.send(t, c, g, "bob", "bob-key", 3)   // 6 units, no room
	waitUntil(t, "the drop counted", func() bool {
		return scrape(t, g, "")["tollgate_usage_dropped_units_total"] == float64(book["bob/calls"])
	})
	if !strings.Contains(g.output(), "usage: aggregate full") {
		t.Errorf("the drop was not logged")
	}
	down.Lock()
	failing = false
	down.Unlock()
	g.stop(t)
	got := sink.totals()
	if got["acme/calls"] != book["acme/calls"] || got["bob/calls"] != 0 {
		t.Errorf("receiver %v, want acme's %d units and none of bob's", got, book["acme/calls"])
	}
}

// TestUsageNotifyAcrossFleet: two gateways on one Redis; acme spends its
// 10/hour through both, past the limit. Each threshold of notify_at is
// posted once in all (the gateways claim it on Redis), although both
// saw it crossed. The receiver counts every event it received, so a
// notice posted by both would show twice.
func TestUsageNotifyAcrossFleet(t *testing.T) {
	rs := redistest.Standalone(t)
	sink := startSink(t, mustListen(t), nil)
	up := newUpstream(t)
	var gs []*gw
	for range 2 {
		gs = append(gs, startGateway(t, "usage.toml.tmpl", gwOpts{Data: usageData(t, "http://"+sink.addr+"/", up,
			"Redis", rs.Addr, "Prefix", "tgu:", "Rate", "10/hour", "Notify", true, "Limits", `"calls"`)}))
	}
	c := &http.Client{Timeout: 10 * time.Second}
	admitted := 0
	for i := range 16 {
		r := get(t, c, gs[i%2].url("/api/x"), map[string]string{"X-API-Key": "acme-key"})
		if r.Status == 200 {
			admitted++
		}
	}
	for _, g := range gs {
		g.stop(t)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	seen := map[string]int{}
	byThreshold := map[string]int{}
	for _, ev := range sink.raw {
		if ev.Type != "dev.tollgate.usage.threshold.v1" {
			continue
		}
		seen[ev.ID]++
		key := fmt.Sprint(ev.Data["period_start"], " ", ev.Data["threshold"])
		byThreshold[key]++
		if ev.Data["consumer"] != "acme" || ev.Data["limit"] != "calls" || ev.Data["capacity"].(float64) != 10 {
			t.Errorf("notice %+v", ev.Data)
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("notice %s posted %d times", id, n)
		}
	}
	for k, n := range byThreshold {
		if n != 1 {
			t.Errorf("threshold %s noticed %d times", k, n)
		}
	}
	// The hour may turn during the test: then a period has its own.
	if len(byThreshold) < 2 {
		t.Errorf("notices %v, want 0.5 and 1 at least once (admitted %d)", byThreshold, admitted)
	}
	keys, err := redistest.Do(rs.Addr, "KEYS", "tgu:usage:notice:*")
	if err != nil {
		t.Fatal(err)
	}
	if ks, _ := keys.([]any); len(ks) != len(byThreshold) {
		t.Errorf("claim keys %v, want one per notice", keys)
	}
}

func mustListen(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
