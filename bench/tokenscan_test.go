package bench

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/policytest"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/proxy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// The token budget's scanner against forwarding the same answer
// unscanned, in one run (BENCHMARKS.md, Token budgets):
//
//	go test -run '^$' -bench 'TokenScan' -count 6 ./bench
//
// Both routes count by response on a fixed window; "scan" also reads
// usage.total_tokens from the answer. cpu-ns/MB is the process's CPU
// time (user + system, getrusage) per MB of answer: the client and the
// upstream run in the same process and cost the same on both routes, so
// the difference between the two is the scanner's. ttfb-p99-µs is the
// 99th percentile of the time to the first byte of an event stream.

const (
	jsonAnswerBytes = 8 << 20
	sseAnswerBytes  = 1 << 20
)

// prose is an answer's content as a JSON string holds it: English-like
// text with an escaped newline every line and an escaped quotation every
// few lines (about one quote per 300 bytes).
const prose = `The gateway counts the tokens an upstream reports, reading the answer as it passes.\n` +
	`Nothing is held back: each chunk goes on to the client as it arrives from the upstream.\n` +
	`A \"usage\" object at the end of the body carries the count, which the scanner finds.\n` +
	`Strings are skipped a run at a time, so long answers cost little more than copying.\n`

// quoteDense is the worst case for the scanner: a quotation every 32
// bytes (each ends a run it skips).
const quoteDense = `Lorem ipsum \"dolor\" sit amet, `

func tokenUpstream() *httptest.Server {
	body := func(unit string) []byte {
		content := strings.Repeat(unit, jsonAnswerBytes/len(unit))
		return []byte(`{"id":"c1","choices":[{"message":{"content":"` + content + `"}}],"usage":{"total_tokens":12}}`)
	}
	jsonBody, denseBody := body(prose), body(quoteDense)
	event := []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Lorem ipsum dolor"}}],"usage":null}` + "\n\n")
	final := []byte(`data: {"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}` + "\n\ndata: [DONE]\n\n")
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/ttfb") {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(event)
			w.(http.Flusher).Flush()
			w.Write(final)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/dense") {
			w.Header().Set("Content-Type", "application/json")
			w.Write(denseBody)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/sse") {
			w.Header().Set("Content-Type", "text/event-stream")
			f := w.(http.Flusher)
			for n := 0; n < sseAnswerBytes; n += len(event) {
				w.Write(event)
				f.Flush()
			}
			w.Write(final)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(jsonBody)
	}))
}

func tokenHandler(tb testing.TB, upstream string) *proxy.Handler {
	tb.Helper()
	p := policytest.Compile(tb, func(c *config.Config) {
		c.Identity.Sources = []string{"api_key", "ip"}
		for _, name := range []string{"plain", "scan"} {
			l := config.DefaultLimit()
			l.Name, l.Algorithm, l.Rates, l.Count = name, "fixed_window", []string{"1000000000000/1h"}, "response"
			if name == "scan" {
				l.CostResponseJSON = "usage.total_tokens"
			}
			c.Limits = append(c.Limits, l)
			rt := config.DefaultRoute()
			rt.Name, rt.PathPrefix, rt.Upstream, rt.Limits = name, "/"+name, upstream, []string{name}
			c.Routes = append(c.Routes, rt)
		}
	})
	h, err := proxy.New(p, proxy.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkTokenScan(b *testing.B) {
	up := tokenUpstream()
	defer up.Close()
	gw := httptest.NewServer(tokenHandler(b, up.URL))
	defer gw.Close()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	for _, kind := range []string{"json", "dense", "sse"} {
		for _, route := range []string{"plain", "scan"} {
			b.Run(kind+"/"+route, func(b *testing.B) {
				url := gw.URL + "/" + route + "/" + kind
				var bytes int64
				cpu0 := cpuTime()
				for b.Loop() {
					resp, err := client.Get(url)
					if err != nil {
						b.Fatal(err)
					}
					n, _ := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					bytes += n
				}
				b.SetBytes(bytes / int64(b.N))
				b.ReportMetric(float64(cpuTime()-cpu0)/(float64(bytes)/1e6), "cpu-ns/MB")
			})
		}
	}
	for _, route := range []string{"plain", "scan"} {
		b.Run("ttfb/"+route, func(b *testing.B) {
			url := gw.URL + "/" + route + "/ttfb"
			var lat []time.Duration
			for b.Loop() {
				start := time.Now()
				resp, err := client.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				br := bufio.NewReader(resp.Body)
				if _, err := br.ReadByte(); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				io.Copy(io.Discard, br)
				resp.Body.Close()
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "ttfb-p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "ttfb-p99-µs")
		})
	}
}
