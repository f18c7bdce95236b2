package e2e

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// redisData is redis.toml.tmpl's data: a standalone Redis at addr (or
// cluster seeds when cluster is non-empty), the on_error policy, the store
// timeout and the limits and routes as TOML text. StoreExtra (empty here)
// holds more [store] lines.
func redisData(addr string, cluster []string, onError, timeout, body string) map[string]any {
	c := ""
	if len(cluster) > 0 {
		c = `["` + strings.Join(cluster, `", "`) + `"]`
	}
	return map[string]any{"Redis": addr, "Cluster": c, "OnError": onError, "Timeout": timeout,
		"Prefix": "tollgate:", "Body": body, "StoreExtra": ""}
}

// limitTOML is one [[limits]] table.
func limitTOML(name, rate, alg string, by ...string) string {
	q := make([]string, len(by))
	for i, b := range by {
		q[i] = strconv.Quote(b)
	}
	return fmt.Sprintf("[[limits]]\nname = %q\nrates = [%q]\nalgorithm = %q\nby = [%s]\n\n",
		name, rate, alg, strings.Join(q, ", "))
}

// routeTOML is one [[routes]] table answering 200 "ok" by itself.
func routeTOML(name, prefix string, limits ...string) string {
	q := make([]string, len(limits))
	for i, l := range limits {
		q[i] = strconv.Quote(l)
	}
	return fmt.Sprintf("[[routes]]\nname = %q\npath_prefix = %q\nrespond = { status = 200, body = \"ok\" }\nlimits = [%s]\n\n",
		name, prefix, strings.Join(q, ", "))
}

// burstResult tallies a burst.
type burstResult struct {
	got   statuses
	errs  []error
	badRA int // 429s without Retry-After ≥ 1
}

// burst sends n requests at once (all released together), request i to
// urls[i%len(urls)] with headers hdr(i), and tallies the statuses.
func burst(n int, urls []string, hdr func(i int) map[string]string) burstResult {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: n,
	}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		res = burstResult{got: statuses{}}
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			var h map[string]string
			if hdr != nil {
				h = hdr(i)
			}
			r, err := tryDo(c, "GET", urls[i%len(urls)], h, nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.errs = append(res.errs, err)
				return
			}
			res.got[r.Status]++
			if r.Status == http.StatusTooManyRequests {
				if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 {
					res.badRA++
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	return res
}

// check fails t unless the burst admitted exactly want and denied the rest
// with 429 and a Retry-After ≥ 1.
func (b burstResult) check(t testing.TB, n, want int) {
	t.Helper()
	if len(b.errs) > 0 {
		t.Errorf("%d requests failed; first: %v", len(b.errs), b.errs[0])
	}
	if b.got[200] != want || b.got[429] != n-want {
		t.Errorf("statuses %s, want exactly %d×200 and %d×429", b.got, want, n-want)
	}
	if b.badRA > 0 {
		t.Errorf("%d denials without a Retry-After ≥ 1", b.badRA)
	}
}
