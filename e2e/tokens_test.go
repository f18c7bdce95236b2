package e2e

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// llmUpstream is a mock LLM API. Every answer reports the usage X-Usage
// asks for ("none": no usage), as a JSON body or, with X-Stream: 1, as a
// server-sent event stream of chunks whose last event before [DONE]
// carries it. X-Status sets the status, X-Pad pads a JSON answer's
// content with that many bytes. With X-Hold: 1 the answer waits for
// release; a stream with X-Gate: 1 sends its first chunk, then waits for
// gate before the rest (X-Gate: usage sends the usage first).
type llmUpstream struct {
	arrived atomic.Int64
	release chan struct{}
	freed   sync.Once
	opened  sync.Once
	gate    chan struct{}
	// done is signalled when a gated stream's handler has ended (written
	// everything or failed to).
	done chan struct{}
}

func startLLM(t *testing.T) (*llmUpstream, string) {
	u := &llmUpstream{release: make(chan struct{}), gate: make(chan struct{}), done: make(chan struct{}, 16)}
	srv := httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(srv.Close)
	// Before the server closes (cleanups run last first): a failed test
	// must not leave held answers that Close would wait for.
	t.Cleanup(u.free)
	return u, srv.URL
}

// free releases the held answers and opens the gate (once).
func (u *llmUpstream) free() {
	u.freed.Do(func() { close(u.release) })
	u.opened.Do(func() { close(u.gate) })
}

// open opens the gate of gated streams (once).
func (u *llmUpstream) open() { u.opened.Do(func() { close(u.gate) }) }

func (u *llmUpstream) serve(w http.ResponseWriter, r *http.Request) {
	u.arrived.Add(1)
	_, _ = io.Copy(io.Discard, r.Body)
	if r.Header.Get("X-Hold") == "1" {
		<-u.release
	}
	usage := ""
	if v := r.Header.Get("X-Usage"); v != "none" {
		usage = `,"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":` + v + `}`
	}
	status := 200
	if s, err := strconv.Atoi(r.Header.Get("X-Status")); err == nil {
		status = s
	}
	if r.Header.Get("X-Gzip") == "1" {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		_, _ = io.WriteString(zw, `{"choices":[]`+usage+`}`)
		_ = zw.Close()
		return
	}
	if r.Header.Get("X-Stream") != "1" {
		w.Header().Set("Content-Type", "application/json")
		pad, _ := strconv.Atoi(r.Header.Get("X-Pad"))
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"id":"c1","choices":[{"message":{"content":"`)
		chunk := strings.Repeat("tokens \\\"quoted\\\" ", 4096)
		if r.Header.Get("X-Prose") == "1" {
			chunk = strings.Repeat(proseLine, 64<<10/len(proseLine))
		}
		for pad > 0 {
			n := min(pad, len(chunk))
			if _, err := io.WriteString(w, chunk[:n]); err != nil {
				return
			}
			pad -= n
		}
		_, _ = io.WriteString(w, `"}}]`+usage+`}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(status)
	f := w.(http.Flusher)
	gate := r.Header.Get("X-Gate")
	if gate != "" {
		defer func() { u.done <- struct{}{} }()
	}
	send := func(s string) bool {
		_, err := io.WriteString(w, s)
		f.Flush()
		return err == nil
	}
	chunk := `data: {"id":"c1","object":"chat.completion.chunk","choices":[{"delta":{"content":"hi"}}],"usage":null}` + "\n\n"
	final := `data: {"id":"c1","choices":[]` + usage + "}\n\n"
	if gate == "usage" {
		send(final)
	}
	if pad, _ := strconv.Atoi(r.Header.Get("X-Pad")); pad > 0 {
		for n := 0; n < pad; n += len(chunk) {
			if !send(chunk) {
				return
			}
		}
	}
	send(chunk)
	if gate != "" {
		<-u.gate
		// The client may have gone: keep writing until the gateway's
		// copy fails and it closes this stream, as an upstream unaware
		// of it would (a megabyte: far more than the sockets buffer).
		for range 10000 {
			if !send(chunk) {
				return
			}
		}
	}
	if gate != "usage" {
		send(final)
	}
	send("data: [DONE]\n\n")
}

// tokensGateway starts a gateway on tokens.toml.tmpl; algorithm and
// rate are the "tokens" limit's.
func tokensGateway(t *testing.T, redis, algorithm, rate string) (*gw, *llmUpstream, string) {
	t.Helper()
	return tokensGatewaySync(t, redis, algorithm, rate, "")
}

// tokensGatewaySync is tokensGateway with the limit's sync ("" exact).
func tokensGatewaySync(t *testing.T, redis, algorithm, rate, sync string) (*gw, *llmUpstream, string) {
	t.Helper()
	// The budgets' windows are UTC days (and a month): a test must not
	// straddle midnight.
	if left := 24*time.Hour - time.Duration(time.Now().UTC().UnixNano()%int64(24*time.Hour)); left < 2*time.Minute {
		time.Sleep(left + time.Second)
	}
	u, url := startLLM(t)
	logPath := filepath.Join(t.TempDir(), "access.log")
	data := map[string]any{"Upstream": url, "Redis": "", "Algorithm": algorithm, "Rate": rate, "AccessLog": logPath, "Sync": sync}
	if redis != "" {
		data["Redis"], data["Prefix"] = redis, "tk:"
	}
	return startGateway(t, "tokens.toml.tmpl", gwOpts{Data: data}), u, logPath
}

// chat posts a chat request with max_tokens (omitted when < 0) and the
// headers of llmUpstream.
func chat(t testing.TB, c *http.Client, url string, maxTokens int, hdr map[string]string) *response {
	t.Helper()
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	if maxTokens >= 0 {
		body = `{"model":"m","max_tokens":` + strconv.Itoa(maxTokens) + `,"messages":[{"role":"user","content":"hi"}]}`
	}
	return postBody(t, c, url, body, hdr)
}

func postBody(t testing.TB, c *http.Client, url, body string, hdr map[string]string) *response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the body: %v", url, err)
	}
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// used reads the units counted on limit for API key key (admin API).
func used(t testing.TB, g *gw, limit, key string) (used, remaining int64) {
	t.Helper()
	r := adminDo(t, g, "GET", "/admin/limits?limit="+limit+"&key=api_key:"+key, "")
	var u usage
	if err := json.Unmarshal(r.Body, &u); err != nil || r.Status != 200 || len(u.Windows) != 1 {
		t.Fatalf("GET /admin/limits %s %s: %s", limit, key, r)
	}
	return u.Windows[0].Used, u.Windows[0].Remaining
}

// waitTokens polls until limit's key has used want units (the settling
// runs after the client has its answer), failing after a generous guard.
func waitTokens(t testing.TB, g *gw, limit, key string, want int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		u, _ := used(t, g, limit, key)
		if u == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s for %s: %d units used, want %d", limit, key, u, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitTokensWithin polls until limit's key has used between lo and hi
// units.
func waitTokensWithin(t testing.TB, g *gw, limit, key string, lo, hi int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		u, _ := used(t, g, limit, key)
		if u >= lo && u <= hi {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s for %s: %d units used, want %d..%d", limit, key, u, lo, hi)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTokenBudget: a budget of 1000 tokens reserves each request's
// max_tokens and settles to the usage the upstream reports, on every
// algorithm that can and on both stores: a usage below the estimate gives
// the rest back, above it is charged past it, an answer without usage
// keeps the estimate, a 5xx settles to zero, a request without max_tokens
// reserves its cost (1), and the RateLimit header shows tokens; with
// sync = "batched" too (Redis: leases of the budget; memory: exact).
func TestTokenBudget(t *testing.T) {
	t.Parallel()
	for _, a := range []struct{ alg, rate, sync string }{
		{"fixed_window", "1000/24h", ""}, {"sliding_window_log", "1000/24h", ""}, {"sliding_window_counter", "1000/24h", ""},
		{"token_bucket", "1000/240h", ""}, {"gcra", "1000/240h", ""}, {"quota", "1000/month", ""},
		{"fixed_window", "1000/24h", "batched"}, {"sliding_window_counter", "1000/24h", "batched"},
	} {
		t.Run(a.alg+a.sync, func(t *testing.T) {
			t.Parallel()
			stores(t, func(t *testing.T, redis string) {
				g, _, _ := tokensGatewaySync(t, redis, a.alg, a.rate, a.sync)
				c := newClient(t, "")
				key := "k-" + a.alg
				h := func(kv ...string) map[string]string {
					m := map[string]string{"X-API-Key": key}
					for i := 0; i+1 < len(kv); i += 2 {
						m[kv[i]] = kv[i+1]
					}
					return m
				}
				steps := []struct {
					what      string
					maxTokens int
					hdr       map[string]string
					status    int
					want      int64
				}{
					{"usage below the estimate", 300, h("X-Usage", "120"), 200, 120},
					{"usage above the estimate", 300, h("X-Usage", "500"), 200, 620},
					{"a stream's usage", 100, h("X-Usage", "30", "X-Stream", "1"), 200, 650},
					{"no usage: the estimate stays", 100, h("X-Usage", "none"), 200, 750},
					{"an upstream error settles to zero", 100, h("X-Usage", "77", "X-Status", "503"), 503, 750},
					{"no max_tokens: its cost", -1, h("X-Usage", "10"), 200, 760},
				}
				for _, s := range steps {
					r := chat(t, c, g.url("/v1/chat/completions"), s.maxTokens, s.hdr)
					if r.Status != s.status {
						t.Fatalf("%s: %s", s.what, r)
					}
					if a.sync == "" {
						waitTokens(t, g, "tokens", key, s.want)
					} else {
						// Batched: the store also holds the units of
						// this gateway's lease not yet admitted (fewer
						// than its size, 10), until the lease ends.
						waitTokensWithin(t, g, "tokens", key, s.want, s.want+9)
					}
				}
				// 760 used: a reservation of 300 does not fit; the rest
				// does, and the RateLimit header counts it.
				if r := chat(t, c, g.url("/v1/chat/completions"), 300, h("X-Usage", "1")); r.Status != 429 {
					t.Fatalf("a reservation past the budget: %s", r)
				}
				u, _ := used(t, g, "tokens", key)
				r := chat(t, c, g.url("/v1/chat/completions"), int(1000-u), h("X-Usage", "1"))
				for deadline := time.Now().Add(10 * time.Second); a.sync != "" && r.Status == 429 && time.Now().Before(deadline); {
					// Batched: the 429 above is repeated locally until
					// sync_interval (100ms) has passed.
					time.Sleep(50 * time.Millisecond)
					r = chat(t, c, g.url("/v1/chat/completions"), int(1000-u), h("X-Usage", "1"))
				}
				// Batched: the store's count also held the lease's units
				// not yet admitted (fewer than its size, 10), so "the
				// rest" read from it may leave up to 9 of them.
				rem := "r=0;"
				for n := 1; a.sync != "" && n <= 9 && !strings.Contains(r.Header.Get("RateLimit"), rem); n++ {
					rem = "r=" + strconv.Itoa(n) + ";"
				}
				if r.Status != 200 || !strings.Contains(r.Header.Get("RateLimit"), rem) {
					t.Fatalf("a reservation of the rest (%d): %s, want 200 with r=0 (up to r=9 when batched)", 1000-u, r)
				}
			})
		})
	}
}

// TestTokenStream: an event stream is passed on event by event (the
// upstream sends its next events only once the client has the first, so
// a gateway holding the stream back would hang here), its usage read
// from the final event; a stream whose answer is read whole counts its
// usage on a limit that only peeks before forwarding.
func TestTokenStream(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, redis string) {
		g, u, logPath := tokensGateway(t, redis, "fixed_window", "1000/24h")
		c := newClient(t, "")
		req, _ := http.NewRequest(http.MethodPost, g.url("/v1/chat"), strings.NewReader(`{"max_tokens":200}`))
		req.Header.Set("X-API-Key", "s")
		req.Header.Set("X-Stream", "1")
		req.Header.Set("X-Usage", "42")
		req.Header.Set("X-Gate", "1")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		first, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(first, "data: ") {
			t.Fatalf("first event: %q, %v", first, err)
		}
		u.open()
		rest, err := io.ReadAll(br)
		if err != nil || !strings.Contains(string(rest), `"total_tokens":42`) || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
			t.Fatalf("the rest of the stream: %q, %v", rest, err)
		}
		waitTokens(t, g, "tokens", "s", 42)
		// The quota route shows tokens.
		qr := get(t, c, g.url("/rate_limit"), map[string]string{"X-API-Key": "s"})
		var qa quotaAnswer
		if err := json.Unmarshal(qr.Body, &qa); err != nil || qr.Status != 200 {
			t.Fatalf("quota: %s", qr)
		}
		if rem := qa.remaining(t, "llm", "tokens"); rem != 958 {
			t.Errorf("quota route: %d tokens remaining, want 958", rem)
		}
		// The access log records the units the budget settled to.
		deadline := time.Now().Add(20 * time.Second)
		for {
			b, _ := os.ReadFile(logPath)
			if bytes.Contains(b, []byte(`"units":{"tokens":42}`)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no access-log line with the units counted:\n%s", b)
			}
			time.Sleep(20 * time.Millisecond)
		}

		r := chat(t, c, g.url("/peek"), -1, map[string]string{"X-API-Key": "p", "X-Stream": "1", "X-Usage": "64"})
		if r.Status != 200 {
			t.Fatalf("peek: %s", r)
		}
		waitTokens(t, g, "peek-tokens", "p", 64)
		r = chat(t, c, g.url("/peek"), -1, map[string]string{"X-API-Key": "p", "X-Usage": "none"})
		if r.Status != 200 {
			t.Fatalf("peek without usage: %s", r)
		}
		waitTokens(t, g, "peek-tokens", "p", 65) // the request's cost
	})
}

// TestTokenHangUp: a client that hangs up mid-stream is charged the
// usage the upstream reported before it went, or the estimate when the
// stream had not reported it yet.
func TestTokenHangUp(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, redis string) {
		for _, c := range []struct {
			gate string
			want int64
		}{{"usage", 42}, {"1", 200}} {
			g, u, _ := tokensGateway(t, redis, "fixed_window", "1000/24h")
			cl := newClient(t, "")
			req, _ := http.NewRequest(http.MethodPost, g.url("/v1/chat"), strings.NewReader(`{"max_tokens":200}`))
			req.Header.Set("X-API-Key", "h"+c.gate) // one Redis for both gateways
			req.Header.Set("X-Stream", "1")
			req.Header.Set("X-Usage", "42")
			req.Header.Set("X-Gate", c.gate)
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(resp.Body)
			events, want := 0, 1
			if c.gate == "usage" {
				want = 2 // the usage and a chunk
			}
			for events < want {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("reading the stream: %v", err)
				}
				if strings.HasPrefix(line, "data: ") {
					events++
				}
			}
			resp.Body.Close()
			cl.CloseIdleConnections()
			u.open()
			select {
			case <-u.done:
			case <-time.After(30 * time.Second):
				t.Fatal("the upstream's stream never ended")
			}
			waitTokens(t, g, "tokens", "h"+c.gate, c.want)
		}
	})
}

// TestTokenConcurrentReservations: 50 requests reserving 100 tokens
// each at once against a budget of 1000: never more than 10 reach the
// upstream; once they are answered with 37 tokens each, the budget left
// is 1000 - 37 per admitted request.
func TestTokenConcurrentReservations(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"", "batched"} {
		t.Run("sync="+mode, func(t *testing.T) { concurrentReservations(t, mode) })
	}
}

// reserveAtOnce sends 50 requests of client key reserving 100 tokens
// each at once, held at the upstream until all have been answered or
// arrived: no more than 10 (a budget of 1000) may reach it. It frees
// them (37 tokens used each) and returns how many were admitted.
func reserveAtOnce(t *testing.T, g *gw, u *llmUpstream, key string) int64 {
	t.Helper()
	c := newClient(t, "")
	var wg sync.WaitGroup
	var ok, denied atomic.Int64
	for range 50 {
		wg.Go(func() {
			r := chat(t, c, g.url("/v1/chat"), 100, map[string]string{"X-API-Key": key, "X-Usage": "37", "X-Hold": "1"})
			switch r.Status {
			case 200:
				ok.Add(1)
			case 429:
				denied.Add(1)
			default:
				t.Errorf("a reservation: %s", r)
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for denied.Load()+u.arrived.Load() < 50 {
		if time.Now().After(deadline) {
			t.Fatalf("%d denied, %d at the upstream: some requests never got an answer", denied.Load(), u.arrived.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := u.arrived.Load(); n > 10 {
		t.Fatalf("%d requests reserved 100 of 1000 tokens each", n)
	}
	u.free()
	wg.Wait()
	n := ok.Load()
	if n != u.arrived.Load() || n+denied.Load() != 50 {
		t.Fatalf("%d admitted, %d denied, %d at the upstream", n, denied.Load(), u.arrived.Load())
	}
	return n
}

func concurrentReservations(t *testing.T, mode string) {
	t.Parallel()
	stores(t, func(t *testing.T, redis string) {
		g, u, _ := tokensGatewaySync(t, redis, "fixed_window", "1000/24h", mode)
		n := reserveAtOnce(t, g, u, "c")
		if mode == "" {
			waitTokens(t, g, "tokens", "c", 37*n)
			if _, rem := used(t, g, "tokens", "c"); rem != 1000-37*n {
				t.Errorf("remaining %d, want %d", rem, 1000-37*n)
			}
		} else {
			// Leases of the budget: up to a lease's unused units (fewer
			// than its size, 10) stay counted until the lease ends.
			waitTokensWithin(t, g, "tokens", "c", 37*n, 37*n+9)
		}
		t.Logf("%d admitted at once", n)
	})
}

// TestTokenBigAnswer: a 100 MB answer reaches the client whole; past the
// default scan bound (64 MiB) its usage is not read and the estimate
// stays counted, under a bound of 200 MiB it is read from its end.
func TestTokenBigAnswer(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, redis string) {
		g, _, _ := tokensGateway(t, redis, "fixed_window", "1000000/24h")
		c := newClient(t, "")
		const pad = 100 << 20
		for _, p := range []struct {
			path, limit string
			want        int64
		}{{"/v1/chat", "tokens", 500}, {"/big/chat", "big-tokens", 77}} {
			req, _ := http.NewRequest(http.MethodPost, g.url(p.path), strings.NewReader(`{"max_tokens":500}`))
			req.Header.Set("X-API-Key", "b")
			req.Header.Set("X-Usage", "77")
			req.Header.Set("X-Pad", strconv.Itoa(pad))
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			n, err := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err != nil || n < pad || resp.StatusCode != 200 {
				t.Fatalf("%s: %d bytes, %v, status %d", p.path, n, err, resp.StatusCode)
			}
			waitTokens(t, g, p.limit, "b", p.want)
		}
	})
}

// TestTokenHostileRequests: the estimate is read from the request's
// JSON body and a bad one is refused before anything is reserved; the
// body reaches the upstream intact. (docs/hostile-inputs.md, Token
// budgets.)
func TestTokenHostileRequests(t *testing.T) {
	t.Parallel()
	g, u, _ := tokensGateway(t, "", "fixed_window", "1000/24h")
	c := newClient(t, "")
	for _, tc := range []struct {
		name, body string
		status     int
		want       int64 // units used after it
	}{
		{"negative", `{"max_tokens":-5}`, 400, 0},
		{"zero", `{"max_tokens":0}`, 400, 0},
		{"float", `{"max_tokens":12.5}`, 400, 0},
		{"string", `{"max_tokens":"12"}`, 400, 0},
		{"nested", `{"max_tokens":{"n":12}}`, 400, 0},
		{"huge", `{"max_tokens":123456789012345678901234567890}`, 400, 0},
		{"not JSON", `max_tokens=12`, 400, 0},
		{"trailing garbage", `{"max_tokens":1} {"max_tokens":900}`, 400, 0},
		{"repeated: the last counts", `{"max_tokens":1,"max_tokens":900}`, 200, 900},
		{"above the budget: capped at it", `{"max_tokens":5000}`, 429, 900},
		{"nested path elsewhere", `{"x":{"max_tokens":50}}`, 200, 901},
		{"exponent", `{"max_tokens":1e3}`, 400, 901},
		{"array", `{"max_tokens":[12]}`, 400, 901},
		{"null", `{"max_tokens":null}`, 400, 901},
		{"too deep", strings.Repeat("[", 600) + strings.Repeat("]", 600), 400, 901},
		{"escaped key: not the path", `{"max\u005ftokens":700}`, 200, 902},
	} {
		r := postBody(t, c, g.url("/v1/chat"), tc.body, map[string]string{"X-API-Key": "x", "X-Usage": "none"})
		if r.Status != tc.status {
			t.Errorf("%s: %s, want %d", tc.name, r, tc.status)
		}
		waitTokens(t, g, "tokens", "x", tc.want)
	}
	if n := u.arrived.Load(); n != 3 {
		t.Errorf("%d requests reached the upstream, want 3", n)
	}
	// Hostile usage values from the upstream: no usage, so the estimate
	// (50) stays; a repeated usage: the last counts.
	for _, v := range []string{"-5", "1e3", "12.0", `"12"`, "null", `{"n":1}`, "99999999999999999999", "9007199254740993"} {
		before, _ := used(t, g, "tokens", "y")
		if r := chat(t, c, g.url("/v1/chat"), 50, map[string]string{"X-API-Key": "y", "X-Usage": v}); r.Status != 200 {
			t.Fatalf("usage %s: %s", v, r)
		}
		waitTokens(t, g, "tokens", "y", before+50)
	}
	// A client that accepts gzip does not get its answer's usage left
	// unread: its Accept-Encoding is dropped, the gateway's transport
	// decodes the answer, the usage is read (TestTokenGzipDodge).
	if r := chat(t, c, g.url("/v1/chat"), 50, map[string]string{"X-API-Key": "gz", "X-Usage": "7", "X-Gzip": "1", "Accept-Encoding": "gzip"}); r.Status != 200 || r.Header.Get("Content-Encoding") != "" {
		t.Fatalf("a gzip answer: %s", r)
	}
	waitTokens(t, g, "tokens", "gz", 7)
	// Asked without Accept-Encoding, the gateway's own transport asks
	// for gzip and decodes the answer for the client: its usage is read.
	if r := chat(t, c, g.url("/v1/chat"), 50, map[string]string{"X-API-Key": "gz2", "X-Usage": "7", "X-Gzip": "1"}); r.Status != 200 || r.Header.Get("Content-Encoding") != "" {
		t.Fatalf("an answer decoded by the gateway: %s", r)
	}
	waitTokens(t, g, "tokens", "gz2", 7)
	if r := chat(t, c, g.url("/v1/chat"), 50, map[string]string{"X-API-Key": "z", "X-Usage": `3},"usage":{"total_tokens":9`}); r.Status != 200 {
		t.Fatalf("a repeated usage: %s", r)
	}
	waitTokens(t, g, "tokens", "z", 9)

	// A request body that never ends: 408 at the route's timeout (3s),
	// nothing reserved.
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte(`{"max_tokens":5,"pad":"`)) }()
	req, _ := http.NewRequest(http.MethodPost, g.url("/v1/chat"), pr)
	req.Header.Set("X-API-Key", "n")
	if resp, err := c.Do(req); err != nil || resp.StatusCode != 408 {
		t.Errorf("a body that never ends: %v %v, want 408", resp, err)
	} else {
		resp.Body.Close()
	}
	if u, _ := used(t, g, "tokens", "n"); u != 0 {
		t.Errorf("a body that never ends reserved %d", u)
	}

	// A body past cost_request_bytes (1 MiB) is refused.
	big := `{"max_tokens":1,"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	if r := postBody(t, c, g.url("/v1/chat"), big, map[string]string{"X-API-Key": "x"}); r.Status != 413 {
		t.Errorf("a body past the bound: %s, want 413", r)
	}
}

// proseLine is an answer's content as a JSON string holds it: text with
// an escaped newline and an escaped quotation per ~90 bytes.
const proseLine = `The gateway counts the tokens an upstream reports, reading the answer as it passes.\n` +
	`A \"usage\" object at the end of the body carries the count, which the scanner finds.\n`

// TestTokenScanCost measures, through the binary, the gateway process's
// CPU time (user + system, /proc) per MB of a 100 MB answer forwarded by
// a route that reads its usage and by one that does not, alternating,
// and the time to the first byte of a stream on each. It only reports
// (BENCHMARKS.md, Token budgets); run it with
//
//	TOLLGATE_MEASURE=1 go test -count=1 -run TestTokenScanCost -v ./e2e
func TestTokenScanCost(t *testing.T) {
	if os.Getenv("TOLLGATE_MEASURE") == "" {
		t.Skip("a measurement: set TOLLGATE_MEASURE=1")
	}
	g, _, _ := tokensGateway(t, "", "fixed_window", "1000000000/24h")
	c := newClient(t, "")
	pid := g.cmd.Process.Pid
	cpu := func() time.Duration {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ = 100
	}
	const pad = 100 << 20
	for _, content := range []string{"prose", "dense", "stream"} {
		total := map[string]time.Duration{}
		mb := map[string]float64{}
		for round := range 6 {
			for _, route := range []string{"/plain/chat", "/peek/chat"} {
				if round%2 == 1 {
					route = map[string]string{"/plain/chat": "/peek/chat", "/peek/chat": "/plain/chat"}[route]
				}
				req, _ := http.NewRequest(http.MethodPost, g.url(route), strings.NewReader(`{}`))
				req.Header.Set("X-API-Key", "m")
				req.Header.Set("X-Usage", "7")
				req.Header.Set("X-Pad", strconv.Itoa(pad))
				switch content {
				case "prose":
					req.Header.Set("X-Prose", "1")
				case "stream":
					req.Header.Set("X-Stream", "1")
				}
				c0 := cpu()
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				total[route] += cpu() - c0
				mb[route] += float64(n) / 1e6
			}
		}
		plain := float64(total["/plain/chat"].Microseconds()) / mb["/plain/chat"]
		scan := float64(total["/peek/chat"].Microseconds()) / mb["/peek/chat"]
		t.Logf("%s: unscanned %.0f µs CPU/MB, scanned %.0f µs CPU/MB: %+.1f%%", content, plain, scan, 100*(scan/plain-1))
	}
	for _, route := range []string{"/plain/chat", "/peek/chat", "/plain/chat", "/peek/chat"} {
		var lat []time.Duration
		for range 2000 {
			req, _ := http.NewRequest(http.MethodPost, g.url(route), strings.NewReader(`{}`))
			req.Header.Set("X-API-Key", "m")
			req.Header.Set("X-Usage", "7")
			req.Header.Set("X-Stream", "1")
			start := time.Now()
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(resp.Body)
			if _, err := br.ReadByte(); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(start))
			_, _ = io.Copy(io.Discard, br)
			resp.Body.Close()
		}
		slices.Sort(lat)
		t.Logf("%s: time to first byte of a stream p50 %v, p99 %v", route, lat[len(lat)/2], lat[len(lat)*99/100])
	}
}
