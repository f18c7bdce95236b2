package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// load is how wrk drives every target: the same for all of them.
type load struct {
	threads, conns int
	keys           int    // distinct X-API-Key values in the "many keys" modes
	hotKey         string // the X-API-Key of the single-key modes
}

// wrkResult is what one wrk run reported.
type wrkResult struct {
	requests int64
	non2xx   int64
	errors   int64
	rps      float64
	p50, p99 time.Duration
}

// keysScript writes the wrk Lua script that rotates n API keys.
func keysScript(dir string, n int) (string, error) {
	path := filepath.Join(dir, "keys.lua")
	script := fmt.Sprintf(`-- rotate %d X-API-Key values, one per request
local n = 0
request = function()
  n = (n + 1) %% %d
  return wrk.format(nil, nil, { ["X-API-Key"] = "key-" .. n })
end
`, n, n)
	return path, os.WriteFile(path, []byte(script), 0o644)
}

// wrkArgs returns wrk's arguments for url: a fixed hot key, or the key
// rotation script when script is set.
func (l load) wrkArgs(url, script string, d time.Duration) []string {
	// wrk takes whole seconds.
	secs := max(1, int(d.Round(time.Second)/time.Second))
	args := []string{"-t", strconv.Itoa(l.threads), "-c", strconv.Itoa(l.conns),
		"-d", strconv.Itoa(secs) + "s", "--latency", "--timeout", "5s"}
	if script != "" {
		args = append(args, "-s", script)
	} else {
		args = append(args, "-H", "X-API-Key: "+l.hotKey)
	}
	return append(args, url)
}

// runWrk runs wrk once and parses its report.
func runWrk(ctx context.Context, args []string) (wrkResult, string, error) {
	cmd := exec.CommandContext(ctx, "wrk", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, string(out), fmt.Errorf("wrk %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	r, err := parseWrk(string(out))
	if err != nil {
		return r, string(out), fmt.Errorf("wrk %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return r, string(out), nil
}

// parseWrk reads the figures of a `wrk --latency` report.
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	var haveReq, haveRPS bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch {
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return r, fmt.Errorf("request count %q", f[0])
			}
			r.requests, haveReq = n, true
		case f[0] == "Requests/sec:" && len(f) == 2:
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return r, fmt.Errorf("wrk's Requests/sec %q", f[1])
			}
			r.rps, haveRPS = v, true
		case f[0] == "50%" && len(f) == 2:
			r.p50 = parseWrkDuration(f[1])
		case f[0] == "99%" && len(f) == 2:
			r.p99 = parseWrkDuration(f[1])
		case strings.HasPrefix(sc.Text(), "  Non-2xx or 3xx responses:"):
			r.non2xx, _ = strconv.ParseInt(f[len(f)-1], 10, 64)
		case f[0] == "Socket" && f[1] == "errors:":
			// Socket errors: connect 0, read 0, write 0, timeout 0
			for i := 2; i+1 < len(f); i += 2 {
				n, _ := strconv.ParseInt(strings.TrimSuffix(f[i+1], ","), 10, 64)
				r.errors += n
			}
		}
	}
	if !haveReq || !haveRPS {
		return r, fmt.Errorf("no request count or Requests/sec in the report")
	}
	return r, nil
}

// parseWrkDuration parses wrk's latency figures: "180.00us", "1.23ms", "2.00s", "1.00m".
func parseWrkDuration(s string) time.Duration {
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"us", time.Microsecond}, {"ms", time.Millisecond}, {"m", time.Minute}, {"s", time.Second}}
	for _, u := range units {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0
			}
			return time.Duration(f * float64(u.unit))
		}
	}
	return 0
}
