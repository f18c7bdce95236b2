package proxy

import (
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/tollgate/gateway/internal/policytest"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// TestHeaderRulesRefuseOwned: every header the proxy strips or owns is
// refused as a header rule's name, in its own spelling and respelled
// with '_' and in lower case: the policy's list cannot drift from this
// one unnoticed.
func TestHeaderRulesRefuseOwned(t *testing.T) {
	names := append(append([]string{requestIDHeader, "Upgrade", "Connection"}, gatewayOwned...), forwardingHeaders...)
	for _, n := range names {
		for _, spelling := range []string{n, strings.ReplaceAll(n, "-", "_"), strings.ToLower(n)} {
			c := config.Default()
			rt := config.DefaultRoute()
			rt.Name, rt.Upstream = "r", "http://127.0.0.1:1"
			rt.RequestHeaders = &config.HeaderRulesConfig{Set: map[string]string{spelling: "x"}}
			c.Routes = []config.RouteConfig{rt}
			if _, err := policy.Compile(c, func(string) string { return "" }, nil); err == nil || !strings.Contains(err.Error(), "gateway owns") {
				t.Errorf("a rule setting %q compiled (err %v)", spelling, err)
			}
		}
	}
}

// TestBodyBound: a body reader with a bound passes at most the bound and
// then fails with errBodyTooLarge, whatever the sizes of the reads and
// of the body; a body of exactly the bound ends normally.
func TestBodyBound(t *testing.T) {
	for _, tc := range []struct {
		name        string
		body, limit int
		oneByte     bool
		wantErr     bool
	}{
		{"under", 9, 10, false, false},
		{"exact", 10, 10, false, false},
		{"exact, byte by byte", 10, 10, true, false},
		{"one over", 11, 10, false, true},
		{"one over, byte by byte", 11, 10, true, true},
		{"far over", 1 << 20, 10, false, true},
		{"huge bound", 100, 1 << 62, false, false},
		{"largest bound", 100, math.MaxInt64, false, false}, // limit-n+1 overflowed: panic
		{"one byte bound", 2, 1, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader = strings.NewReader(strings.Repeat("x", tc.body))
			if tc.oneByte {
				r = iotest.OneByteReader(r)
			}
			b := &bodyReader{ReadCloser: io.NopCloser(r), limit: int64(tc.limit)}
			got, err := io.ReadAll(b)
			if tc.wantErr {
				if !errors.Is(err, errBodyTooLarge) || len(got) > tc.limit {
					t.Fatalf("read %d bytes, %v; want at most %d and errBodyTooLarge", len(got), err, tc.limit)
				}
				if p := b.err.Load(); p == nil || *p != errBodyTooLarge {
					t.Fatal("the error is not recorded for upstreamError")
				}
				return
			}
			if err != nil || len(got) != tc.body {
				t.Fatalf("read %d bytes, %v; want all %d", len(got), err, tc.body)
			}
		})
	}
}

// TestBodyBoundLyingLength: a Content-Length within the bound over a
// body that is longer cannot pass more than the declared length (net/http
// reads no further), and a declared length past the bound is refused
// before the body is read; a negative or absent length streams under the
// bound.
func TestBodyBoundLyingLength(t *testing.T) {
	p := policytest.Compile(t, func(c *config.Config) {
		c.Routes = []config.RouteConfig{{Name: "r", PathPrefix: "/", Timeout: "1s", MaxBodyBytes: 10,
			Respond: &config.RespondConfig{Body: "ok"}}}
	})
	h := newTestHandler(t, p)
	for _, tc := range []struct {
		name   string
		length int64
		want   int
	}{
		{"declared over", 11, 413},
		{"declared huge", 1 << 62, 413},
		{"declared within", 10, 200},
		{"unknown", -1, 200}, // a respond route reads no body
	} {
		req := httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("x", 20)))
		req.ContentLength = tc.length
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, rec.Code, tc.want)
		}
		if tc.want == 413 && (!strings.Contains(rec.Body.String(), `"status":413`) || rec.Header().Get("Content-Type") != "application/problem+json") {
			t.Errorf("%s: 413 without a problem body: %q %q", tc.name, rec.Header(), rec.Body)
		}
	}
}

// TestRequestIDs: ids are 32 lower-case hex digits, distinct, each its
// own full-capacity slice (appending to one cannot write into another).
func TestRequestIDs(t *testing.T) {
	seen := map[string]bool{}
	var ids, other idBatch
	for i := range 10 * idsPerBatch {
		v := ids.take()
		if i%3 == 0 {
			// Two batches (two pooled requests) never share an id.
			v = other.take()
		}
		if len(v) != 1 || cap(v) != 1 || !validRequestID(v[0]) || len(v[0]) != idLen || strings.Trim(v[0], "0123456789abcdef") != "" {
			t.Fatalf("id %q (cap %d)", v, cap(v))
		}
		if seen[v[0]] {
			t.Fatalf("id %q twice", v[0])
		}
		seen[v[0]] = true
	}
	for s, want := range map[string]bool{"": false, "a": true, strings.Repeat("a", 128): true, strings.Repeat("a", 129): false,
		"a b": false, "a\r\nb": false, "a\x00": false, "caf\xc3\xa9": false, "a\x7f": false, "~!@#$%^&*()": true} {
		if validRequestID(s) != want {
			t.Errorf("validRequestID(%q) = %v", s, !want)
		}
	}
}

// BenchmarkRequestID is the cost of one generated id, the one thing the
// request path adds to every request.
func BenchmarkRequestID(b *testing.B) {
	b.ReportAllocs()
	var v []string
	var ids idBatch
	for b.Loop() {
		v = ids.take()
	}
	_ = v
}

// newTestHandler is a Handler on p with a memory store.
func newTestHandler(t *testing.T, p *policy.Policy) http.Handler {
	t.Helper()
	h, err := New(p, Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	return h
}
