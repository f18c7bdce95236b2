package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/template"
	"time"

	"github.com/tollgate/gateway/bench/soak/probe"
)

// options configure one key-rotation run.
type options struct {
	Keys     int           // distinct API keys to send, one request each
	MaxKeys  int           // store.memory.max_keys
	Workers  int           // concurrent clients
	Interval time.Duration // between samples
	Timeout  time.Duration // bound of the whole traffic phase
	Redis    string        // host:port of a Redis for store.backend = "redis"; "" for memory
	Gateway  string        // gateway binary; "" builds ./cmd/gateway
	Root     string        // module root
	Log      io.Writer     // progress lines
}

// metricLiveKeys is the in-memory store's live-key gauge on /metrics.
const metricLiveKeys = "tollgate_store_memory_keys"

const configTmpl = `# bench/keyrot: one limit keyed by API key on a respond route.
[server]
listen = "{{.Listen}}"
admin_listen = "{{.Admin}}"
shutdown_timeout = "5s"

[store]
{{- if .Redis}}
backend = "redis"
on_error = "deny"
timeout = "1s"
[store.redis]
url = "redis://{{.Redis}}/0"
prefix = "tollgate:"
{{- else}}
backend = "memory"
{{- end}}

[store.memory]
max_keys = {{.MaxKeys}}

[identity]
sources = ["api_key", "ip"]

[[limits]]
name = "per-key"
rates = ["10/minute"]
algorithm = "sliding_window_counter"
by = ["client"]

[[routes]]
name = "r"
path_prefix = "/r"
respond = { status = 200, body = "ok" }
limits = ["per-key"]
`

// row is one sample.
type row struct {
	Elapsed  time.Duration
	Sent     int64   // requests answered so far
	RPS      float64 // in the last interval
	RSS      int64
	Heap     int64 // HeapInuse
	LiveKeys float64
}

// result is the outcome of a run.
type result struct {
	Rows     []row
	Sent     int64
	Non200   int64
	Errors   int64
	FirstErr string
	Elapsed  time.Duration
	// RedisKeys and RedisNoTTL are counted after a Redis run.
	RedisKeys, RedisNoTTL int
}

// run starts a gateway and sends o.Keys distinct keys through it.
func run(ctx context.Context, o options) (*result, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	tmp, err := os.MkdirTemp("", "tollgate-keyrot-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := o.Gateway
	if bin == "" {
		if bin, err = probe.BuildGateway(ctx, o.Root, tmp, "keyrot", o.Log); err != nil {
			return nil, err
		}
	}
	listen, err := probe.FreeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := probe.FreeAddr()
	if err != nil {
		return nil, err
	}
	var cfg bytes.Buffer
	tp := template.Must(template.New("cfg").Option("missingkey=error").Parse(configTmpl))
	if err := tp.Execute(&cfg, map[string]any{"Listen": listen, "Admin": admin, "Redis": o.Redis, "MaxKeys": o.MaxKeys}); err != nil {
		return nil, err
	}
	path := filepath.Join(tmp, "gateway.toml")
	if err := os.WriteFile(path, cfg.Bytes(), 0o600); err != nil {
		return nil, err
	}
	// gwOut is read only once the gateway has ended (StartGateway's error,
	// Done): its output is complete then and no longer written.
	var gwOut bytes.Buffer
	gw, err := probe.StartGateway(ctx, bin, path, admin, &gwOut)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, gwOut.String())
	}
	defer gw.Stop()
	pc := &probe.Client{PID: gw.PID(), Admin: admin}
	fmt.Fprintf(o.Log, "keyrot: gateway pid %d, %d keys, max_keys %d, %d workers, store %s\n",
		gw.PID(), o.Keys, o.MaxKeys, o.Workers, map[bool]string{true: "redis " + o.Redis, false: "memory"}[o.Redis != ""])

	res := &result{}
	tctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var next, sent, non200, errs atomic.Int64
	var firstErr sync.Once
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: o.Workers,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	url := "http://" + listen + "/r"
	idle, err := probe.RSS(gw.PID())
	if err != nil {
		return nil, err
	}
	_, idleHeap, err := pc.Heap(ctx)
	if err != nil {
		return nil, err
	}
	res.Rows = append(res.Rows, row{RSS: idle, Heap: idleHeap})
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < o.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(tctx, http.MethodGet, url, nil)
			for tctx.Err() == nil {
				i := next.Add(1)
				if i > int64(o.Keys) {
					return
				}
				req.Header.Set("X-API-Key", fmt.Sprintf("rotating-key-%d", i))
				resp, err := client.Do(req)
				if err != nil {
					if tctx.Err() == nil {
						errs.Add(1)
						firstErr.Do(func() { res.FirstErr = err.Error() })
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				sent.Add(1)
				if resp.StatusCode != http.StatusOK {
					non200.Add(1)
					firstErr.Do(func() { res.FirstErr = fmt.Sprintf("status %d", resp.StatusCode) })
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	var lastSent int64
	lastAt := start
	sample := func() error {
		now := time.Now()
		s := sent.Load()
		rss, err := probe.RSS(gw.PID())
		if err != nil {
			return err
		}
		_, heap, err := pc.Heap(ctx)
		if err != nil {
			return err
		}
		live, _, err := pc.Metric(ctx, metricLiveKeys)
		if err != nil {
			return err
		}
		r := row{Elapsed: now.Sub(start), Sent: s, RPS: float64(s-lastSent) / now.Sub(lastAt).Seconds(),
			RSS: rss, Heap: heap, LiveKeys: live}
		lastSent, lastAt = s, now
		res.Rows = append(res.Rows, r)
		fmt.Fprintf(o.Log, "keyrot: %6.1fs sent %8d  %7.0f req/s  rss %6.1f MiB  heap %6.1f MiB  live keys %7.0f\n",
			r.Elapsed.Seconds(), r.Sent, r.RPS, mib(r.RSS), mib(r.Heap), r.LiveKeys)
		return nil
	}
loop:
	for {
		select {
		case <-done:
			break loop
		case <-gw.Done():
			return nil, fmt.Errorf("gateway exited: %v\n%s", gw.Err(), gwOut.String())
		case <-tick.C:
			if err := sample(); err != nil {
				return nil, fmt.Errorf("sample: %w", err)
			}
		}
	}
	res.Elapsed = time.Since(start)
	if err := sample(); err != nil {
		return nil, fmt.Errorf("sample: %w", err)
	}
	res.Sent, res.Non200, res.Errors = sent.Load(), non200.Load(), errs.Load()
	if o.Redis != "" {
		res.RedisKeys, res.RedisNoTTL, err = redisTTLs(ctx, o.Redis)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// plateau checks that resident memory stopped growing once the store was
// full: every sample taken after 2×max_keys keys were sent stays within
// 25 % + 8 MiB of the RSS at that point, and RSS does not grow with the
// keys sent at more than a tenth of the rate it grew while the store was
// filling.
func plateau(res *result, maxKeys int) []string {
	var problems []string
	ref := -1
	for i, r := range res.Rows {
		if r.Sent >= int64(2*maxKeys) {
			ref = i
			break
		}
	}
	if ref < 0 || len(res.Rows)-ref < 3 {
		return []string{fmt.Sprintf("too few samples after %d keys (2×max_keys) to judge a plateau: %d of %d",
			2*maxKeys, max(0, len(res.Rows)-max(ref, 0)), len(res.Rows))}
	}
	base := res.Rows[ref]
	last := res.Rows[len(res.Rows)-1]
	limit := float64(base.RSS)*1.25 + 8<<20
	for _, r := range res.Rows[ref:] {
		if float64(r.RSS) > limit {
			problems = append(problems, fmt.Sprintf("RSS %.1f MiB at %d keys sent exceeds %.1f MiB (1.25 × %.1f MiB at %d keys + 8 MiB)",
				mib(r.RSS), r.Sent, limit/(1<<20), mib(base.RSS), base.Sent))
			break
		}
	}
	// Row 0 is the idle gateway. Compare the growth per key while the
	// store filled with the growth per key over the second half of the
	// samples after it was full. The slope is judged only over at least
	// max_keys keys: on a loaded machine the second half may see a few
	// thousand requests, and the collector's timing alone then moves RSS
	// by more per key than a leak would (the absolute bound above still
	// holds the whole run).
	first, mid := res.Rows[0], res.Rows[ref+(len(res.Rows)-ref)/2]
	if base.Sent > first.Sent && last.Sent-mid.Sent >= int64(maxKeys) {
		fill := float64(base.RSS-first.RSS) / float64(base.Sent-first.Sent)
		after := float64(last.RSS-mid.RSS) / float64(last.Sent-mid.Sent)
		if fill > 0 && after > fill/4 {
			problems = append(problems, fmt.Sprintf("RSS keeps growing with keys: %.0f B/key after %d keys vs %.0f B/key while filling",
				after, mid.Sent, fill))
		}
	}
	if last.LiveKeys > float64(maxKeys) {
		problems = append(problems, fmt.Sprintf("%s = %.0f exceeds max_keys %d", metricLiveKeys, last.LiveKeys, maxKeys))
	}
	return problems
}

// redisTTLs counts the keys under tollgate: and those without a TTL, with
// redis-cli (SCAN, then TTL for every key through one pipe).
func redisTTLs(ctx context.Context, addr string) (keys, noTTL int, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, 0, err
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return 0, 0, errors.New("redis-cli not found: install it with `apt-get install redis-tools`")
	}
	list, err := exec.CommandContext(ctx, cli, "-h", host, "-p", port, "--scan", "--pattern", "tollgate:*").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("redis-cli --scan: %w", err)
	}
	names := strings.Fields(string(list))
	var in bytes.Buffer
	for _, k := range names {
		fmt.Fprintf(&in, "TTL %s\n", k)
	}
	ttl := exec.CommandContext(ctx, cli, "-h", host, "-p", port)
	ttl.Stdin = &in
	out, err := ttl.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := ttl.Start(); err != nil {
		return 0, 0, err
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "-1" {
			noTTL++
		}
	}
	if err := ttl.Wait(); err != nil {
		return 0, 0, fmt.Errorf("redis-cli TTL: %w", err)
	}
	return len(names), noTTL, nil
}

// table prints about n evenly spaced rows as Markdown.
func table(w io.Writer, res *result, n int) {
	fmt.Fprintln(w, "| elapsed | keys sent | req/s (interval) | RSS | heap in use | live keys (metric) |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	step := max(1, len(res.Rows)/max(1, n))
	for i, r := range res.Rows {
		if i%step != 0 && i != len(res.Rows)-1 {
			continue
		}
		fmt.Fprintf(w, "| %.0fs | %d | %.0f | %.1f MiB | %.1f MiB | %.0f |\n",
			r.Elapsed.Seconds(), r.Sent, r.RPS, mib(r.RSS), mib(r.Heap), r.LiveKeys)
	}
}

// throughput returns the median and minimum per-interval rate, leaving out
// the last (partial) interval.
func throughput(res *result) (median, low float64) {
	var v []float64
	for _, r := range res.Rows[1:max(1, len(res.Rows)-1)] { // not the idle row nor the last, partial one
		v = append(v, r.RPS)
	}
	if len(v) == 0 {
		return 0, 0
	}
	sort.Float64s(v)
	return v[len(v)/2], v[0]
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
