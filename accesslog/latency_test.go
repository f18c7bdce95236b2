package accesslog

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestLongestLatency: the first pass finds what the Parser reads, in both
// formats, and no client-controlled field can claim a latency.
func TestLongestLatency(t *testing.T) {
	for _, f := range []Format{Combined, JSONL} {
		var buf bytes.Buffer
		w, _ := NewWriter(&buf, Options{Format: f})
		for _, e := range sample() {
			w.Log(&e)
		}
		w.Close()
		want := time.Duration(0)
		p := NewParser(bytes.NewReader(buf.Bytes()), f)
		for p.Next() {
			want = max(want, p.Entry().Latency)
		}
		for _, g := range []Format{f, Auto} {
			got, err := LongestLatency(bytes.NewReader(buf.Bytes()), g)
			if err != nil || got != want || want != 90*time.Second {
				t.Errorf("%s read as %s: %s, %v; want %s (the Parser's, 90s)", f, g, got, err, want)
			}
		}
	}

	tests := []struct {
		name, line string
		want       time.Duration
	}{
		{"combined", `a - - [14/Mar/2025:15:09:26 +0000] "GET / HTTP/1.1" 200 5 "-" "-" route=r latency=1.5 kind=ip`, 1500 * time.Millisecond},
		{"combined, no referer or agent", `a - - [14/Mar/2025:15:09:26 +0000] "GET / HTTP/1.1" 200 5 latency=0.25`, 250 * time.Millisecond},
		{"nginx line, agent claims a latency", `10.0.0.1 - - [24/Nov/2026:22:12:00 +0000] "GET /latency=9 HTTP/1.1" 200 3 "x latency=99" "y latency=99"`, 0},
		{"combined, negative", `a - - [14/Mar/2025:15:09:26 +0000] "GET / HTTP/1.1" 200 5 "-" "-" latency=-1`, 0},
		{"jsonl", `{"time":"2025-03-14T15:09:26Z","latency":2.5,"route":"r"}`, 2500 * time.Millisecond},
		{"jsonl, spaces and exponent", `{ "route" : "latency" , "latency" : 1e-3 }`, time.Millisecond},
		{"jsonl, key inside a string", `{"path":"/a\",\"latency\":99","user_agent":"\"latency\": 99","latency":0.5}`, 500 * time.Millisecond},
		{"jsonl, value named latency only", `{"route":"latency","outcome":"x"}`, 0},
		{"garbage", `garbage latency=5`, 0},
		{"overlong line", `a - - [14/Mar/2025:15:09:26 +0000] "GET /` + strings.Repeat("x", MaxLineBytes) + ` HTTP/1.1" 200 5 latency=7`, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LongestLatency(strings.NewReader(tc.line+"\n"+tc.line), Auto)
			if err != nil || got != tc.want {
				t.Errorf("%s, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// BenchmarkLongestLatency reports the first pass's time per line, beside
// BenchmarkParse's for the same lines.
func BenchmarkLongestLatency(b *testing.B) {
	for _, f := range []Format{Combined, JSONL} {
		b.Run(f.String(), func(b *testing.B) {
			data := benchLog(b, f, 10000)
			b.SetBytes(int64(len(data) / 10000))
			b.ReportAllocs()
			for i := 0; i < b.N; i += 10000 {
				if d, err := LongestLatency(bytes.NewReader(data), f); err != nil || d == 0 {
					b.Fatal(d, err)
				}
			}
		})
	}
}
