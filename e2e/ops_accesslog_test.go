package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// accessLine is what the test reads from one access-log line, whatever
// its format.
type accessLine struct {
	Client, Kind, Route, Outcome, Decision, Limit string
	Status                                        int
	raw                                           string
}

// TestOpsAccessLog: with an access log in either format, every
// request is one line carrying its route, outcome, decision, binding limit
// and a hashed client (no raw API key or IP anywhere in the file); and
// `gateway replay` over that file with the same configuration reproduces
// the live allowed and denied counts of a limit keyed by the client.
func TestOpsAccessLog(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"jsonl", "combined"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t)
			logPath := filepath.Join(t.TempDir(), "access.log")
			g := startGateway(t, "ops.toml.tmpl", gwOpts{
				Data: opsData(t, up, "AccessLog", logPath, "Format", format),
				Env:  []string{"OPS_LOG_SALT=pepper"},
			})
			c := newClient(t, "")
			byIP := newClient(t, "127.0.0.2")
			statuses := map[int]int{}
			send := func(cl *http.Client, path string, hdr map[string]string, n int) {
				for i := 0; i < n; i++ {
					statuses[get(t, cl, g.url(path), hdr).Status]++
				}
			}
			send(c, "/api/a", map[string]string{"X-API-Key": "key-alpha"}, 5) // 3 allowed, 2 denied
			send(c, "/api/b", map[string]string{"X-API-Key": "key-bravo"}, 2) // 2 allowed
			send(byIP, "/api/c", nil, 4)                                      // 3 allowed, 1 denied
			send(c, "/nowhere", nil, 1)                                       // no route
			if statuses[200] != 8 || statuses[429] != 3 || statuses[404] != 1 {
				t.Fatalf("live statuses %v, want 8×200, 3×429, 1×404", statuses)
			}

			data := flushLog(t, g, logPath)
			for _, raw := range []string{"key-alpha", "key-bravo", "127.0.0.2"} {
				if bytes.Contains(data, []byte(raw)) {
					t.Errorf("the access log holds the raw identity %q", raw)
				}
			}
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			if len(lines) != 12 {
				t.Fatalf("%d access-log lines, want 12 (one per request):\n%s", len(lines), data)
			}
			var got []accessLine
			for _, l := range lines {
				got = append(got, parseAccessLine(t, format, l))
			}
			want := []struct{ route, outcome, decision, limit string }{
				{"api", "forwarded", "allowed", "per-key"}, {"api", "forwarded", "allowed", "per-key"},
				{"api", "forwarded", "allowed", "per-key"}, {"api", "limited", "denied", "per-key"},
				{"api", "limited", "denied", "per-key"},
				{"api", "forwarded", "allowed", "per-key"}, {"api", "forwarded", "allowed", "per-key"},
				{"api", "forwarded", "allowed", "per-key"}, {"api", "forwarded", "allowed", "per-key"},
				{"api", "forwarded", "allowed", "per-key"}, {"api", "limited", "denied", "per-key"},
				{"", "no_route", "", ""},
			}
			clients := map[string]bool{}
			for i, w := range want {
				l := got[i]
				if l.Route != w.route || l.Outcome != w.outcome || l.Decision != w.decision || l.Limit != w.limit {
					t.Errorf("line %d: route %q outcome %q decision %q limit %q, want %q %q %q %q\n  %s",
						i+1, l.Route, l.Outcome, l.Decision, l.Limit, w.route, w.outcome, w.decision, w.limit, l.raw)
				}
				if i < 11 && len(l.Client) != 16 {
					t.Errorf("line %d: client %q is not a 16-character hash\n  %s", i+1, l.Client, l.raw)
				}
				clients[l.Client] = true
			}
			if got[0].Client != got[4].Client || got[0].Client == got[5].Client || got[5].Client == got[7].Client {
				t.Errorf("hashed clients do not tell the three clients apart: %q %q %q", got[0].Client, got[5].Client, got[7].Client)
			}
			if got[0].Kind != "api_key" || got[7].Kind != "ip" {
				t.Errorf("client kinds %q, %q; want api_key, ip", got[0].Kind, got[7].Kind)
			}

			// Replay reproduces the live counts of per-key.
			rep := runReplay(t, g.Config, logPath)
			row := replayRow(t, rep, "per-key")
			if want := []string{"per-key", "sliding_window_log", "enforce", "11", "8", "3"}; strings.Join(row[:6], " ") != strings.Join(want, " ") {
				t.Errorf("replay row %q, want %q (live: 11 requests, 8 allowed, 3 denied)\n%s", row, want, rep)
			}
			if !strings.Contains(rep, "replayed 12 requests from 12 lines (0 malformed)") {
				t.Errorf("replay did not read every line:\n%s", rep)
			}
		})
	}
}

// parseAccessLine reads the fields the test checks from one line.
func parseAccessLine(t *testing.T, format, line string) accessLine {
	t.Helper()
	l := accessLine{raw: line}
	if format == "jsonl" {
		var j struct {
			Client, Kind, Route, Outcome, Decision, Limit string
			Status                                        int
		}
		if err := json.Unmarshal([]byte(line), &j); err != nil {
			t.Fatalf("jsonl line is not JSON: %v: %s", err, line)
		}
		return accessLine{Client: j.Client, Kind: j.Kind, Route: j.Route, Outcome: j.Outcome,
			Decision: j.Decision, Limit: j.Limit, Status: j.Status, raw: line}
	}
	// CLIENT - - [time] "request" status bytes "referer" "ua" k=v ...
	if !strings.HasPrefix(line, "{") {
		l.Client, _, _ = strings.Cut(line, " ")
	}
	for _, tok := range strings.Fields(line) {
		k, v, ok := strings.Cut(tok, "=")
		if !ok {
			continue
		}
		if v == "-" {
			v = ""
		}
		switch k {
		case "route":
			l.Route = v
		case "outcome":
			l.Outcome = v
		case "decision":
			l.Decision = v
		case "limit":
			l.Limit = v
		case "kind":
			l.Kind = v
		}
	}
	if l.Client == "-" {
		l.Client = ""
	}
	return l
}
