package replay

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tollgate/gateway/accesslog"
)

// benchLog writes n lines of format f: 10,000 clients (a tenth with API
// keys) at about 2,000 requests per second over both routes of testPolicy.
func benchLog(b *testing.B, n int, f accesslog.Format) []byte {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	var buf bytes.Buffer
	buf.Grow(n * 200)
	w, err := accesslog.NewWriter(&buf, accesslog.Options{Format: f, Salt: []byte("salt")})
	if err != nil {
		b.Fatal(err)
	}
	at := time.Duration(0)
	for range n {
		at += time.Duration(rng.ExpFloat64() * float64(500*time.Microsecond))
		c := rng.IntN(10_000)
		ip := fmt.Sprintf("10.%d.%d.%d", c>>16, c>>8&255, c&255)
		key := ""
		if c%10 == 0 {
			key = fmt.Sprintf("key-%d", c)
		}
		e := entry(at, ip, key, "web", "/web/items")
		if c%3 == 0 {
			e.Route, e.Path = "api", "/v1/items"
		}
		w.Log(&e)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// benchLines is the length of the benchmark log.
const benchLines = 1_000_000

// BenchmarkRun1M replays a one-million-line log; ns/op is the whole replay.
func BenchmarkRun1M(b *testing.B) {
	for _, f := range []accesslog.Format{accesslog.Combined, accesslog.JSONL} {
		b.Run(f.String(), func(b *testing.B) {
			log := benchLog(b, benchLines, f)
			p := testPolicy(b)
			b.SetBytes(int64(len(log)))
			b.ReportAllocs()
			for b.Loop() {
				rep, err := Run(context.Background(), p, bytes.NewReader(log), Options{Format: f})
				if err != nil || rep.Requests != benchLines {
					b.Fatalf("replayed %d, err %v", rep.Requests, err)
				}
			}
		})
	}
}
