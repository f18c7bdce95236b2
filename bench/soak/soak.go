package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"text/template"
	"time"

	"github.com/tollgate/gateway/bench/soak/probe"
)

// options configure one soak run.
type options struct {
	Duration     time.Duration // traffic time
	Interval     time.Duration // between samples
	ReloadEvery  time.Duration // between SIGHUP reloads
	RPS          int           // offered requests per second, all kinds together
	Workers      int           // concurrent clients
	Keys         int           // distinct API keys of the allowed traffic
	Gateway      string        // gateway binary; "" builds ./cmd/gateway
	Root         string        // module root (for building and the template)
	Out          string        // directory for soak.csv and soak.png; "" writes nothing
	Log          io.Writer     // progress lines
	GatewayLog   io.Writer     // the gateway's own output; nil discards it
	SettleWithin time.Duration // bound of the final poll for goroutines and fds to return
}

// kind is one sort of request of the traffic mix.
type kind struct {
	name   string
	weight int
	// want reports whether a response status is what this kind expects; a
	// kind whose client gives up early (disconnect) has want == nil.
	want func(status int) bool
	req  func(base string, key string) (*http.Request, time.Duration)
}

// mix is the soak's traffic: mostly allowed and denied requests, a share
// of upstream failures, upstream timeouts and clients hanging up.
var mix = []kind{
	{"allowed", 50, is(200), func(b, k string) (*http.Request, time.Duration) {
		return newReq(b+"/ok/item", map[string]string{"X-API-Key": k}), 0
	}},
	{"denied", 25, is(200, 429), func(b, _ string) (*http.Request, time.Duration) {
		return newReq(b+"/hot", map[string]string{"X-API-Key": "hot-key"}), 0
	}},
	{"upstream-500", 5, is(500), func(b, k string) (*http.Request, time.Duration) {
		return newReq(b+"/ok/fail", map[string]string{"X-API-Key": k, hStatus: "500"}), 0
	}},
	{"upstream-reset", 4, is(502), func(b, k string) (*http.Request, time.Duration) {
		return newReq(b+"/ok/reset", map[string]string{"X-API-Key": k, hReset: "1"}), 0
	}},
	{"upstream-down", 4, is(502), func(b, k string) (*http.Request, time.Duration) {
		return newReq(b+"/down", map[string]string{"X-API-Key": k}), 0
	}},
	{"upstream-timeout", 4, is(504), func(b, k string) (*http.Request, time.Duration) {
		return newReq(b+"/slow", map[string]string{"X-API-Key": k, hSleep: "2s"}), 0
	}},
	{"disconnect", 8, nil, func(b, k string) (*http.Request, time.Duration) {
		return newReq(b+"/ok/hang", map[string]string{"X-API-Key": k, hSleep: "1s"}), 20 * time.Millisecond
	}},
}

func is(codes ...int) func(int) bool {
	return func(s int) bool {
		for _, c := range codes {
			if s == c {
				return true
			}
		}
		return false
	}
}

func newReq(url string, hdr map[string]string) *http.Request {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req
}

// row is one sample with the traffic counters at that instant.
type row struct {
	Elapsed time.Duration
	probe.Sample
	Requests, S2xx, S429, S5xx, Disconnects, Unexpected, Reloads int64
	RPS                                                          float64
}

// report is the outcome of a run.
type report struct {
	Rows []row
	// Before is sampled with the gateway idle before traffic, After idle
	// once traffic stopped and the clients closed their connections.
	Before, After probe.Sample
	ByKind        map[string]int64
	Unexpected    []string // the first few unexpected outcomes
	ReloadsFailed int64
}

// counters is the traffic tally, updated by the workers.
type counters struct {
	requests, s2xx, s429, s5xx, disconnects, unexpected, reloads, reloadsFailed atomic.Int64
	mu                                                                          sync.Mutex
	byKind                                                                      map[string]int64
	examples                                                                    []string
}

func (c *counters) note(k string, unexpected string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byKind[k]++
	if unexpected != "" && len(c.examples) < 10 {
		c.examples = append(c.examples, unexpected)
	}
}

// run starts the upstream and the gateway, drives the mix for o.Duration
// while sampling, and returns the samples.
func run(ctx context.Context, o options) (*report, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	tmp, err := os.MkdirTemp("", "tollgate-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := o.Gateway
	if bin == "" {
		if bin, err = probe.BuildGateway(ctx, o.Root, tmp, "soak", o.Log); err != nil {
			return nil, err
		}
	}
	up := httptest.NewServer(upstreamHandler)
	defer up.Close()
	down, err := closedAddr()
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New("gateway.toml.tmpl").Option("missingkey=error").
		ParseFiles(filepath.Join(o.Root, "bench", "soak", "gateway.toml.tmpl"))
	if err != nil {
		return nil, err
	}
	listen, err := probe.FreeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := probe.FreeAddr()
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(tmp, "gateway.toml")
	data := map[string]any{"Listen": listen, "Admin": admin, "Upstream": up.URL,
		"Down": "http://" + down, "Body": "v0", "Extra": ""}
	if err := writeConfig(tmpl, cfg, data); err != nil {
		return nil, err
	}
	gw, err := probe.StartGateway(ctx, bin, cfg, admin, o.GatewayLog)
	if err != nil {
		return nil, err
	}
	defer gw.Stop()
	pc := &probe.Client{PID: gw.PID(), Admin: admin}

	rep := &report{ByKind: map[string]int64{}}
	rep.Before, err = pc.Sample(ctx)
	if err != nil {
		return nil, fmt.Errorf("sample before traffic: %w", err)
	}
	fmt.Fprintf(o.Log, "soak: gateway pid %d on %s (admin %s); %v of traffic at %d req/s, sample every %v, reload every %v\n",
		gw.PID(), listen, admin, o.Duration, o.RPS, o.Interval, o.ReloadEvery)

	c := &counters{byKind: map[string]int64{}}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: o.Workers,
		DisableCompression:  true,
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	tctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var wg sync.WaitGroup
	tokens := pace(tctx, o.RPS)
	for w := 0; w < o.Workers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			worker(tctx, client, "http://"+listen, tokens, o.Keys, rand.New(rand.NewPCG(seed, 7)), c)
		}(uint64(w))
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		reloader(tctx, o, tmpl, cfg, data, gw, c)
	}()

	start := time.Now()
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	var lastReq int64
	lastAt := start
	sample := func() error {
		s, err := pc.Sample(ctx)
		if err != nil {
			return err
		}
		req := c.requests.Load()
		r := row{Elapsed: s.At.Sub(start).Round(time.Millisecond), Sample: s,
			Requests: req, S2xx: c.s2xx.Load(), S429: c.s429.Load(), S5xx: c.s5xx.Load(),
			Disconnects: c.disconnects.Load(), Unexpected: c.unexpected.Load(), Reloads: c.reloads.Load(),
			RPS: float64(req-lastReq) / s.At.Sub(lastAt).Seconds()}
		lastReq, lastAt = req, s.At
		rep.Rows = append(rep.Rows, r)
		fmt.Fprintf(o.Log, "soak: %7.0fs goroutines %4d heap %6.1f MiB rss %6.1f MiB fds %3d  %6.0f req/s  2xx %d 429 %d 5xx %d disc %d unexpected %d reloads %d\n",
			r.Elapsed.Seconds(), s.Goroutines, mib(s.HeapInuse), mib(s.RSS), s.FDs, r.RPS,
			r.S2xx, r.S429, r.S5xx, r.Disconnects, r.Unexpected, r.Reloads)
		return nil
	}
	var sampleErr error
loop:
	for {
		select {
		case <-tctx.Done():
			break loop
		case <-gw.Done():
			return nil, fmt.Errorf("gateway exited during the soak: %v", gw.Err())
		case <-tick.C:
			if err := sample(); err != nil && sampleErr == nil {
				sampleErr = err
			}
		}
	}
	wg.Wait()
	if err := sample(); err != nil && sampleErr == nil {
		sampleErr = err
	}
	if sampleErr != nil {
		return nil, fmt.Errorf("sampling: %w", sampleErr)
	}
	// Close the connections on both sides: the clients' and the gateway's
	// pooled upstream connections (two goroutines and one fd each, kept for
	// the transport's idle timeout). What remains after that is a leak.
	quiesce := func() {
		tr.CloseIdleConnections()
		up.CloseClientConnections()
	}
	quiesce()
	// Idle again: poll (bounded) until goroutines and fds are back within
	// a few of the idle figures, then keep the last reading.
	deadline := time.Now().Add(o.SettleWithin)
	for {
		rep.After, err = pc.Sample(ctx)
		if err != nil {
			return nil, fmt.Errorf("sample after traffic: %w", err)
		}
		if settled(rep.Before, rep.After) || time.Now().After(deadline) {
			break
		}
		quiesce()
		time.Sleep(100 * time.Millisecond)
	}
	c.mu.Lock()
	for k, v := range c.byKind {
		rep.ByKind[k] = v
	}
	rep.Unexpected = append(rep.Unexpected, c.examples...)
	c.mu.Unlock()
	rep.ReloadsFailed = c.reloadsFailed.Load()
	if o.Out != "" {
		if err := writeResults(o.Out, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// Tolerances of the flatness checks.
const (
	goroutineSlack = 5
	fdSlack        = 5
)

// settled reports whether after is back within the slack of before.
func settled(before, after probe.Sample) bool {
	return after.Goroutines <= before.Goroutines+goroutineSlack && after.FDs <= before.FDs+fdSlack
}

// pace emits rps tokens per second (in 10 ms batches) until ctx ends.
func pace(ctx context.Context, rps int) <-chan struct{} {
	ch := make(chan struct{}, rps)
	go func() {
		defer close(ch)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		start, sent := time.Now(), 0
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				due := int(now.Sub(start).Seconds() * float64(rps))
				for ; sent < due; sent++ {
					select {
					case ch <- struct{}{}:
					default: // workers behind: drop, never queue unboundedly
					}
				}
			}
		}
	}()
	return ch
}

// worker sends one request of a random kind per token.
func worker(ctx context.Context, client *http.Client, base string, tokens <-chan struct{}, keys int,
	rng *rand.Rand, c *counters) {
	total := 0
	for _, k := range mix {
		total += k.weight
	}
	for range tokens {
		if ctx.Err() != nil {
			return
		}
		n := rng.IntN(total)
		k := mix[0]
		for _, m := range mix {
			if n < m.weight {
				k = m
				break
			}
			n -= m.weight
		}
		req, hangUp := k.req(base, fmt.Sprintf("key-%d", rng.IntN(keys)))
		one(ctx, client, k, req, hangUp, c)
	}
}

// one sends req and tallies the outcome.
func one(ctx context.Context, client *http.Client, k kind, req *http.Request, hangUp time.Duration, c *counters) {
	rctx := ctx
	if hangUp > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), hangUp)
		defer cancel()
	} else {
		rctx = context.WithoutCancel(ctx) // let a request in flight finish at the end
	}
	resp, err := client.Do(req.WithContext(rctx))
	c.requests.Add(1)
	if err != nil {
		if hangUp > 0 && errors.Is(err, context.DeadlineExceeded) {
			c.disconnects.Add(1)
			c.note(k.name, "")
			return
		}
		c.unexpected.Add(1)
		c.note(k.name, fmt.Sprintf("%s: %v", k.name, err))
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch {
	case resp.StatusCode == 429:
		c.s429.Add(1)
	case resp.StatusCode >= 500:
		c.s5xx.Add(1)
	case resp.StatusCode < 300:
		c.s2xx.Add(1)
	}
	if k.want == nil || !k.want(resp.StatusCode) {
		c.unexpected.Add(1)
		c.note(k.name, fmt.Sprintf("%s: status %d", k.name, resp.StatusCode))
		return
	}
	c.note(k.name, "")
}

// reloader rewrites the config and sends SIGHUP every o.ReloadEvery,
// alternating the hot route's body and an extra route, so every reload
// compiles a different policy while the limits stay unchanged.
func reloader(ctx context.Context, o options, tmpl *template.Template, cfg string, data map[string]any,
	gw *probe.Gateway, c *counters) {
	t := time.NewTicker(o.ReloadEvery)
	defer t.Stop()
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d := map[string]any{}
		for k, v := range data {
			d[k] = v
		}
		d["Body"] = fmt.Sprintf("v%d", i)
		if i%2 == 1 {
			d["Extra"] = fmt.Sprintf("\n[[routes]]\nname = \"extra\"\npath_prefix = \"/extra\"\nrespond = { status = 200, body = \"extra %d\" }\n", i)
		}
		if err := writeConfig(tmpl, cfg, d); err != nil || gw.Signal(syscall.SIGHUP) != nil {
			c.reloadsFailed.Add(1)
			continue
		}
		c.reloads.Add(1)
	}
}

// writeConfig renders tmpl with data and replaces path by rename.
func writeConfig(tmpl *template.Template, path string, data map[string]any) error {
	var b bytes.Buffer
	if err := tmpl.Execute(&b, data); err != nil {
		return err
	}
	if err := os.WriteFile(path+".tmp", b.Bytes(), 0o600); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// closedAddr is a loopback address where nothing listens.
func closedAddr() (string, error) { return probe.FreeAddr() }

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// flatness compares the second half of the run with its first half (the
// first sample, taken while caches and pools warm up, is skipped) and
// returns a problem per resource that kept growing, plus a leak after the
// traffic stopped.
func flatness(rep *report) []string {
	var problems []string
	rows := rep.Rows
	if len(rows) < 5 {
		return []string{fmt.Sprintf("only %d samples; need at least 5 to judge flatness", len(rows))}
	}
	// The last row is taken after traffic stopped; judge the steady rows.
	steady := rows[1 : len(rows)-1]
	half := len(steady) / 2
	first, second := steady[:half], steady[half:]
	check := func(name string, get func(row) float64, slack, ratio float64, unit string) {
		a, b := median(first, get), median(second, get)
		maxA, maxB := maxOf(first, get), maxOf(second, get)
		if b > a*ratio+slack || maxB > maxA*ratio+2*slack {
			problems = append(problems, fmt.Sprintf("%s grows: median %.1f%s → %.1f%s, max %.1f%s → %.1f%s (first half → second half)",
				name, a, unit, b, unit, maxA, unit, maxB, unit))
		}
	}
	check("goroutines", func(r row) float64 { return float64(r.Goroutines) }, 20, 1.25, "")
	check("fds", func(r row) float64 { return float64(r.FDs) }, 10, 1.25, "")
	check("heap in use", func(r row) float64 { return mib(r.HeapInuse) }, 4, 1.5, " MiB")
	check("rss", func(r row) float64 { return mib(r.RSS) }, 8, 1.25, " MiB")
	if !settled(rep.Before, rep.After) {
		problems = append(problems, fmt.Sprintf("idle again after the traffic: goroutines %d → %d, fds %d → %d (slack %d, %d)",
			rep.Before.Goroutines, rep.After.Goroutines, rep.Before.FDs, rep.After.FDs, goroutineSlack, fdSlack))
	}
	return problems
}

func median(rs []row, get func(row) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = get(r)
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

func maxOf(rs []row, get func(row) float64) float64 {
	m := get(rs[0])
	for _, r := range rs[1:] {
		m = max(m, get(r))
	}
	return m
}
