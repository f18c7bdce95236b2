// Package probe samples a running gateway process from outside, the way an
// operator would: resident memory and open file descriptors from /proc, the
// goroutine count and heap figures from the admin listener's /debug/pprof,
// and any gauge or counter from its /metrics (Prometheus text). It is used by
// the soak and key-rotation load programs and by the end-to-end leak tests.
//
// Every reading reads once and returns; none retries or sleeps. Beside them,
// BuildGateway and StartGateway build and run the gateway these programs
// measure (StartGateway polls /healthz until the gateway is up). Linux only
// (/proc).
package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Sample is one reading of a process.
type Sample struct {
	// At is when the sample was taken.
	At time.Time
	// Goroutines is the total of /debug/pprof/goroutine?debug=1.
	Goroutines int
	// HeapAlloc and HeapInuse are runtime.MemStats fields in bytes, from
	// /debug/pprof/heap?debug=1.
	HeapAlloc, HeapInuse int64
	// RSS is VmRSS from /proc/<pid>/status, in bytes.
	RSS int64
	// FDs is the number of entries of /proc/<pid>/fd.
	FDs int
}

// Client reads one process: pid for /proc, admin ("host:port") for the
// admin listener. The zero HTTP client is replaced by one with a 5 s
// timeout.
type Client struct {
	PID   int
	Admin string
	HTTP  *http.Client
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 5 * time.Second}
}

// Sample reads every figure of s; the first error stops it.
func (c *Client) Sample(ctx context.Context) (Sample, error) {
	s := Sample{At: time.Now()}
	var err error
	if s.Goroutines, err = c.Goroutines(ctx); err != nil {
		return s, err
	}
	if s.HeapAlloc, s.HeapInuse, err = c.Heap(ctx); err != nil {
		return s, err
	}
	if s.RSS, err = RSS(c.PID); err != nil {
		return s, err
	}
	if s.FDs, err = FDs(c.PID); err != nil {
		return s, err
	}
	return s, nil
}

// get fetches path from the admin listener.
func (c *Client) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.Admin+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
	}
	return b, nil
}

// Goroutines returns the process's goroutine count from the first line of
// /debug/pprof/goroutine?debug=1 ("goroutine profile: total N"). The
// request being served is one of them.
func (c *Client) Goroutines(ctx context.Context) (int, error) {
	b, err := c.get(ctx, "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, err
	}
	return ParseGoroutines(b)
}

// ParseGoroutines reads N from a goroutine profile's "goroutine profile:
// total N" first line.
func ParseGoroutines(b []byte) (int, error) {
	line, _, _ := strings.Cut(string(b), "\n")
	v, ok := strings.CutPrefix(line, "goroutine profile: total ")
	if !ok {
		return 0, fmt.Errorf("probe: not a goroutine profile: %.80q", line)
	}
	return strconv.Atoi(strings.TrimSpace(v))
}

// Heap returns HeapAlloc and HeapInuse from /debug/pprof/heap?debug=1.
func (c *Client) Heap(ctx context.Context) (alloc, inuse int64, err error) {
	b, err := c.get(ctx, "/debug/pprof/heap?debug=1")
	if err != nil {
		return 0, 0, err
	}
	return ParseHeap(b)
}

// ParseHeap reads the "# HeapAlloc = N" and "# HeapInuse = N" lines of a
// debug=1 heap profile.
func ParseHeap(b []byte) (alloc, inuse int64, err error) {
	found := 0
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			alloc, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			found++
		} else if v, ok := strings.CutPrefix(line, "# HeapInuse = "); ok {
			inuse, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			found++
		}
		if err != nil {
			return 0, 0, fmt.Errorf("probe: heap profile: %w", err)
		}
	}
	if found != 2 {
		return 0, 0, errors.New("probe: heap profile without HeapAlloc/HeapInuse lines")
	}
	return alloc, inuse, nil
}

// Metric returns the sum of every sample of the Prometheus metric name
// (all label sets) on /metrics, and whether any sample was present.
func (c *Client) Metric(ctx context.Context, name string) (float64, bool, error) {
	b, err := c.get(ctx, "/metrics")
	if err != nil {
		return 0, false, err
	}
	v, ok := ParseMetric(b, name)
	return v, ok, nil
}

// ParseMetric sums the samples of name in Prometheus text b.
func ParseMetric(b []byte, name string) (float64, bool) {
	var sum float64
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if rest[0] == '{' {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// RSS returns VmRSS of pid in bytes.
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("probe: VmRSS line %q", line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("probe: no VmRSS in /proc/%d/status", pid)
}

// FDs returns the number of open file descriptors of pid.
func FDs(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, err
	}
	return len(ents), nil
}
