package jwks

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

var (
	rsaOnce  sync.Once
	rsaKeys  [2]*rsa.PrivateKey
	rsaSmall *rsa.PrivateKey
)

// testRSA returns two 2048-bit keys and one of 1024 bits, made once.
func testRSA(t testing.TB) ([2]*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	rsaOnce.Do(func() {
		for i := range rsaKeys {
			rsaKeys[i], _ = rsa.GenerateKey(rand.Reader, 2048)
		}
		rsaSmall, _ = rsa.GenerateKey(rand.Reader, 1024) // a hostile input
	})
	return rsaKeys, rsaSmall
}

// jwk renders pub as a JWK (go-jose's encoder: the test's oracle is an
// independent writer of the format) with extra members merged in.
func jwk(t testing.TB, pub crypto.PublicKey, kid string, extra map[string]any) json.RawMessage {
	t.Helper()
	b, err := jose.JSONWebKey{Key: pub, KeyID: kid}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for k, v := range extra {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	out, _ := json.Marshal(m)
	return out
}

func doc(keys ...json.RawMessage) []byte {
	b, _ := json.Marshal(map[string]any{"keys": keys})
	return b
}

// provider is an identity provider's JWKS endpoint: it serves body,
// counts requests, and can fail or hold requests.
type provider struct {
	srv      *httptest.Server
	body     atomic.Pointer[[]byte]
	status   atomic.Int32
	cc       atomic.Pointer[string]
	requests atomic.Int64
	hold     atomic.Pointer[chan struct{}] // when set, requests wait for it to close
	arrived  chan struct{}
}

func newProvider(t *testing.T, body []byte) *provider {
	p := &provider{arrived: make(chan struct{}, 100)}
	p.body.Store(&body)
	p.status.Store(200)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		select {
		case p.arrived <- struct{}{}:
		default:
		}
		if h := p.hold.Load(); h != nil {
			select {
			case <-*h:
			case <-r.Context().Done():
				return
			}
		}
		if cc := p.cc.Load(); cc != nil {
			w.Header().Set("Cache-Control", *cc)
		}
		w.WriteHeader(int(p.status.Load()))
		w.Write(*p.body.Load())
	}))
	t.Cleanup(func() {
		// A held request would keep Close waiting (a failed test's).
		if h := p.hold.Swap(nil); h != nil {
			close(*h)
		}
		p.srv.Close()
	})
	return p
}

func (p *provider) serve(b []byte) { p.body.Store(&b) }

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newSet returns a started Set on p's URL on clock c, closed at cleanup.
func newSet(t *testing.T, p *provider, c *fakeClock) *Set {
	return newSetWait(t, p, c, UnknownKidWait)
}

// newSetWait is newSet with the unknown-kid wait and the fetch timeout
// set to wait: an hour shows who waits for a held fetch (a hang, caught by
// the test's guard), since nothing then ends the wait but the fetch.
func newSetWait(t *testing.T, p *provider, c *fakeClock, wait time.Duration) *Set {
	s := New(Config{URL: p.srv.URL, Refresh: time.Hour}, Options{Logger: quiet(), Now: c.now})
	s.kidWait, s.fetchTimeout = wait, max(wait, FetchTimeout)
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func TestLookup(t *testing.T) {
	rk, _ := testRSA(t)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	edPub, _, _ := ed25519.GenerateKey(rand.Reader)
	p := newProvider(t, doc(
		jwk(t, &rk[0].PublicKey, "r1", map[string]any{"alg": "RS256", "use": "sig"}),
		jwk(t, &rk[1].PublicKey, "r2", nil),
		jwk(t, &p256.PublicKey, "e1", nil),
		jwk(t, edPub, "ed", nil),
	))
	s := newSet(t, p, &fakeClock{t: time.Unix(1e9, 0)})
	ctx := context.Background()
	for _, tt := range []struct {
		kid, alg string
		want     crypto.PublicKey
		err      error
	}{
		{"r1", "RS256", &rk[0].PublicKey, nil},
		{"r1", "RS384", nil, ErrKeyAlg}, // the JWK's own alg is RS256
		{"r2", "RS512", &rk[1].PublicKey, nil},
		{"r2", "ES256", nil, ErrKeyAlg},
		{"e1", "ES256", &p256.PublicKey, nil},
		{"e1", "ES384", nil, ErrKeyAlg},
		{"ed", "EdDSA", edPub, nil},
		{"", "ES256", &p256.PublicKey, nil}, // the one key for ES256
		{"", "EdDSA", edPub, nil},
		{"", "RS256", nil, ErrNoKid}, // two RSA keys: which one?
	} {
		k, err := s.VerificationKey(ctx, tt.kid, tt.alg)
		if !errors.Is(err, tt.err) || (tt.want != nil && !tt.want.(interface{ Equal(crypto.PublicKey) bool }).Equal(k)) {
			t.Errorf("VerificationKey(%q, %s) = %v, %v; want %v", tt.kid, tt.alg, k != nil, err, tt.err)
		}
	}
	if st := s.Status(); st.Keys != 4 || st.Error != "" || st.LastSuccess.IsZero() {
		t.Errorf("status %+v", st)
	}
}

// TestRotation: a token naming a kid the set lacks starts one fetch and
// waits for it, so a rotated key works at its first use; a second unknown
// kid within UnknownKidEvery starts none, and one after it does.
func TestRotation(t *testing.T) {
	rk, _ := testRSA(t)
	p := newProvider(t, doc(jwk(t, &rk[0].PublicKey, "old", nil)))
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	s := newSet(t, p, clk)
	ctx := context.Background()
	if p.requests.Load() != 1 {
		t.Fatalf("%d requests at start, want 1", p.requests.Load())
	}
	p.serve(doc(jwk(t, &rk[0].PublicKey, "old", nil), jwk(t, &rk[1].PublicKey, "new", nil)))
	if _, err := s.VerificationKey(ctx, "new", "RS256"); err != nil {
		t.Fatalf("rotated key: %v", err)
	}
	if n := p.requests.Load(); n != 2 {
		t.Fatalf("%d requests after the rotation, want 2", n)
	}
	for i := range 50 {
		if _, err := s.VerificationKey(ctx, fmt.Sprintf("forged-%d", i), "RS256"); !errors.Is(err, ErrUnknownKid) {
			t.Fatalf("forged kid: %v", err)
		}
	}
	clk.add(UnknownKidEvery - time.Millisecond)
	s.VerificationKey(ctx, "forged-x", "RS256")
	if n := p.requests.Load(); n != 2 {
		t.Fatalf("%d requests after forged kids within %v, want 2", n, UnknownKidEvery)
	}
	clk.add(time.Millisecond)
	s.VerificationKey(ctx, "forged-y", "RS256")
	if n := p.requests.Load(); n != 3 {
		t.Fatalf("%d requests after %v, want 3", n, UnknownKidEvery)
	}
}

// TestForgedKidFlood: many concurrent requests with forged kids cost the
// provider one fetch, and none of them waits for a fetch another started
// (the provider holds its answer until every lookup has returned).
func TestForgedKidFlood(t *testing.T) {
	rk, _ := testRSA(t)
	p := newProvider(t, doc(jwk(t, &rk[0].PublicKey, "k", nil)))
	s := newSetWait(t, p, &fakeClock{t: time.Unix(1e9, 0)}, time.Hour)
	hold := make(chan struct{})
	p.hold.Store(&hold)
	first := make(chan error)
	go func() {
		_, err := s.VerificationKey(context.Background(), "forged-first", "RS256")
		first <- err
	}()
	<-p.arrived // the start's fetch
	<-p.arrived // the fetch the first forged kid started, held
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if _, err := s.VerificationKey(context.Background(), fmt.Sprintf("forged-%d", i), "RS256"); !errors.Is(err, ErrUnknownKid) {
				t.Errorf("forged kid: %v", err)
			}
		})
	}
	waitOrFail(t, &wg) // returns only if none waited for the held fetch
	if p.hold.CompareAndSwap(&hold, nil) {
		close(hold)
	}
	if err := <-first; !errors.Is(err, ErrUnknownKid) {
		t.Errorf("first forged kid: %v", err)
	}
	if n := p.requests.Load(); n != 2 {
		t.Errorf("%d requests, want 2 (start, one unknown kid)", n)
	}
}

// TestProviderDown: a failed fetch keeps the last good keys and says so;
// the next good one clears the error.
func TestProviderDown(t *testing.T) {
	rk, _ := testRSA(t)
	p := newProvider(t, doc(jwk(t, &rk[0].PublicKey, "k", nil)))
	var results []bool
	var mu sync.Mutex
	s := New(Config{URL: p.srv.URL, Refresh: time.Hour}, Options{Logger: quiet(), Fetched: func(ok bool) {
		mu.Lock()
		results = append(results, ok)
		mu.Unlock()
	}})
	s.Start()
	defer s.Close()
	p.status.Store(503)
	s.fetch()
	st := s.Status()
	if st.Keys != 1 || !strings.Contains(st.Error, "503") || st.LastSuccess.IsZero() {
		t.Fatalf("status after a failure %+v", st)
	}
	if _, err := s.VerificationKey(context.Background(), "k", "RS256"); err != nil {
		t.Fatalf("last good key: %v", err)
	}
	p.status.Store(200)
	s.fetch()
	if st := s.Status(); st.Error != "" {
		t.Fatalf("status after recovery %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(results) != "[true false true]" {
		t.Errorf("fetch results %v", results)
	}
}

// TestNeverFetched: a provider down at the start leaves the set empty
// (every token refused) with the reason, and the refresh loop retries.
func TestNeverFetched(t *testing.T) {
	rk, _ := testRSA(t)
	p := newProvider(t, doc(jwk(t, &rk[0].PublicKey, "k", nil)))
	p.status.Store(500)
	s := New(Config{URL: p.srv.URL, Refresh: time.Hour}, Options{Logger: quiet()})
	s.Start()
	defer s.Close()
	if st := s.Status(); st.Keys != 0 || st.Error == "" || !st.LastSuccess.IsZero() {
		t.Fatalf("status %+v", st)
	}
	p.status.Store(200)
	deadline := time.Now().Add(time.Minute) // hang guard, not a timing assertion
	for s.Status().Keys == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the refresh loop did not retry")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHostileSets: what an identity provider (or whoever answers in its
// place) may send, and what the set makes of it.
func TestHostileSets(t *testing.T) {
	rk, small := testRSA(t)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p521, _ := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	good := jwk(t, &rk[0].PublicKey, "good", nil)
	many := make([]json.RawMessage, MaxKeys+1)
	for i := range many {
		many[i] = jwk(t, &rk[0].PublicKey, fmt.Sprint(i), nil)
	}
	big := []byte(`{"keys":[` + string(good) + `],"pad":"` + strings.Repeat("x", MaxBytes) + `"}`)
	symmetric := json.RawMessage(`{"kty":"oct","kid":"hmac","k":"` + strings.Repeat("A", 43) + `"}`)
	ecPriv, _ := jose.JSONWebKey{Key: p256, KeyID: "priv"}.MarshalJSON()
	for _, tt := range []struct {
		name string
		body []byte
		err  string   // the fetch fails with this; "" for success
		kids []string // the usable kids after it
	}{
		{"good", doc(good), "", []string{"good"}},
		{"more than MaxKeys keys", doc(many...), "more than 100", nil},
		{"larger than MaxBytes", big, "larger than", nil},
		{"not JSON", []byte("<html>"), "not a JWKS", nil},
		{"keys not an array", []byte(`{"keys":{}}`), "not a JWKS", nil},
		{"no key", doc(), "no usable key", nil},
		{"RSA 1024-bit skipped", doc(jwk(t, &small.PublicKey, "small", nil), good), "", []string{"good"}},
		{"only RSA 1024-bit", doc(jwk(t, &small.PublicKey, "small", nil)), "1024 bits", nil},
		{"RSA 4104-bit skipped", doc(json.RawMessage(`{"kty":"RSA","kid":"big","n":"`+oddModulus(4104)+`","e":"AQAB"}`), good), "", []string{"good"}},
		{"RSA 8192-bit skipped", doc(json.RawMessage(`{"kty":"RSA","kid":"big","n":"`+oddModulus(8192)+`","e":"AQAB"}`), good), "", []string{"good"}},
		{"RSA 4096-bit used", doc(json.RawMessage(`{"kty":"RSA","kid":"max","n":"` + oddModulus(4096) + `","e":"AQAB"}`)), "", []string{"max"}},
		{"use enc skipped", doc(jwk(t, &rk[1].PublicKey, "enc", map[string]any{"use": "enc"}), good), "", []string{"good"}},
		{"alg HS256 on an RSA key skipped", doc(jwk(t, &rk[1].PublicKey, "hs", map[string]any{"alg": "HS256"}), good), "", []string{"good"}},
		{"alg ES256 on an RSA key skipped", doc(jwk(t, &rk[1].PublicKey, "conf", map[string]any{"alg": "ES256"}), good), "", []string{"good"}},
		{"alg ES384 on a P-256 key skipped", doc(jwk(t, &p256.PublicKey, "curve", map[string]any{"alg": "ES384"}), good), "", []string{"good"}},
		{"P-521 skipped", doc(jwk(t, &p521.PublicKey, "p521", nil), good), "", []string{"good"}},
		{"EC point off the curve", doc(jwk(t, &p256.PublicKey, "off", map[string]any{"y": b64(make([]byte, 32))}), good), "", []string{"good"}},
		{"symmetric key skipped", doc(symmetric, good), "", []string{"good"}},
		{"private key skipped", doc(ecPriv, good), "", []string{"good"}},
		{"unknown kty skipped", doc(json.RawMessage(`{"kty":"XYZ","kid":"x"}`), good), "", []string{"good"}},
		{"kid over MaxKidLen skipped", doc(jwk(t, &rk[1].PublicKey, strings.Repeat("k", MaxKidLen+1), nil), good), "", []string{"good"}},
		{"x5c only skipped", doc(json.RawMessage(`{"kty":"RSA","kid":"x5c","x5c":["MIIB"]}`), good), "", []string{"good"}},
		{"a member twice skipped", doc(json.RawMessage(`{"kty":"RSA","kid":"a","kid":"good","n":"AQAB","e":"AQAB"}`), good), "", []string{"good"}},
		{"Ed25519 of 31 bytes skipped", doc(json.RawMessage(`{"kty":"OKP","crv":"Ed25519","kid":"ed","x":"`+b64(make([]byte, 31))+`"}`), good), "", []string{"good"}},
		{"kid with odd bytes kept as bytes", doc(jwk(t, &rk[1].PublicKey, "a\x00\u202e", nil)), "", []string{"a\x00\u202e"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t, tt.body)
			s := newSet(t, p, &fakeClock{t: time.Unix(1e9, 0)})
			st := s.Status()
			if tt.err == "" && st.Error != "" || tt.err != "" && !strings.Contains(st.Error, tt.err) {
				t.Fatalf("error %q, want %q", st.Error, tt.err)
			}
			if st.Keys != len(tt.kids) {
				t.Fatalf("%d keys, want %d", st.Keys, len(tt.kids))
			}
			for _, kid := range tt.kids {
				if _, err := s.cur.Load().find(kid, "RS256"); err != nil {
					t.Errorf("kid %q: %v", kid, err)
				}
			}
		})
	}
}

// TestOversizedKeepsLastGood: a refused set does not replace the one held.
func TestOversizedKeepsLastGood(t *testing.T) {
	rk, _ := testRSA(t)
	p := newProvider(t, doc(jwk(t, &rk[0].PublicKey, "k", nil)))
	s := newSet(t, p, &fakeClock{t: time.Unix(1e9, 0)})
	p.serve([]byte(`{"keys":[],"pad":"` + strings.Repeat("x", 2*MaxBytes) + `"}`))
	s.fetch()
	if st := s.Status(); st.Keys != 1 || !strings.Contains(st.Error, "larger than") {
		t.Fatalf("status %+v", st)
	}
}

// TestSlowProvider: a provider that does not answer costs the one request
// that started the fetch at most UnknownKidWait (or its context), never the
// others; the fetch itself is bounded by FetchTimeout.
func TestSlowProvider(t *testing.T) {
	rk, _ := testRSA(t)
	p := newProvider(t, doc(jwk(t, &rk[0].PublicKey, "k", nil)))
	s := newSetWait(t, p, &fakeClock{t: time.Unix(1e9, 0)}, time.Hour)
	hold := make(chan struct{})
	p.hold.Store(&hold)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := s.VerificationKey(ctx, "new", "RS256")
		done <- err
	}()
	<-p.arrived
	<-p.arrived
	cancel() // the client gave up: the request stops waiting
	if err := <-done; !errors.Is(err, ErrUnknownKid) {
		t.Fatalf("err %v", err)
	}
	// The known key answers at once while the fetch hangs.
	if _, err := s.VerificationKey(context.Background(), "k", "RS256"); err != nil {
		t.Fatal(err)
	}
}

// waitOrFail waits for wg, failing the test after a minute: a hang guard,
// not a timing assertion.
func waitOrFail(t *testing.T, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("lookups waited for a fetch they did not start")
	}
}

func TestOIDCDiscovery(t *testing.T) {
	rk, _ := testRSA(t)
	keys := newProvider(t, doc(jwk(t, &rk[0].PublicKey, "k", nil)))
	var issuer atomic.Pointer[string]
	var jwksURI atomic.Pointer[string]
	disc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/realm/.well-known/openid-configuration" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(map[string]string{"issuer": *issuer.Load(), "jwks_uri": *jwksURI.Load()})
	}))
	defer disc.Close()
	iss := disc.URL + "/realm"
	set := func(i, u string) { issuer.Store(&i); jwksURI.Store(&u) }
	for _, tt := range []struct {
		name, issuer, uri, err string
	}{
		{"good", iss, keys.srv.URL, ""},
		{"issuer mismatch", "https://evil.example/realm", keys.srv.URL, "is not the configured"},
		{"issuer with a trailing slash", iss + "/", keys.srv.URL, "is not the configured"},
		{"jwks_uri over plain http beyond loopback", iss, "http://idp.example/keys", "plain http"},
		{"no jwks_uri", iss, "", "no jwks_uri"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			set(tt.issuer, tt.uri)
			s := New(Config{Issuer: iss, Refresh: time.Hour}, Options{Logger: quiet()})
			s.Start()
			defer s.Close()
			st := s.Status()
			if tt.err == "" && (st.Error != "" || st.Keys != 1) || tt.err != "" && (!strings.Contains(st.Error, tt.err) || st.Keys != 0) {
				t.Fatalf("status %+v, want error %q", st, tt.err)
			}
		})
	}
}

func TestMaxAge(t *testing.T) {
	for cc, want := range map[string]time.Duration{
		"":                             0,
		"no-cache":                     0,
		"max-age=300":                  5 * time.Minute,
		"public, max-age=3600":         time.Hour,
		"max-age=1":                    MinMaxAge,
		"max-age=999999999999":         MaxMaxAge,
		"max-age=99999999999999999999": 0, // does not parse
		"max-age=-5":                   0,
		`MAX-AGE="120"`:                2 * time.Minute,
	} {
		if got := maxAge(cc); got != want {
			t.Errorf("maxAge(%q) = %v, want %v", cc, got, want)
		}
	}
}

// TestMaxAgeRefresh: a response's max-age times the next refresh when it
// is shorter than the interval; a longer one (a provider or cache saying
// "a day") never stretches the interval, which bounds how long a key the
// provider withdrew is still trusted.
func TestMaxAgeRefresh(t *testing.T) {
	rk, _ := testRSA(t)
	p := newProvider(t, doc(jwk(t, &rk[0].PublicKey, "k", nil)))
	cc := "max-age=600"
	p.cc.Store(&cc)
	s := newSet(t, p, &fakeClock{t: time.Unix(1e9, 0)}) // Refresh: 1h
	if got := s.cur.Load().maxAge; got != 10*time.Minute {
		t.Fatalf("maxAge %v", got)
	}
	for _, tt := range []struct {
		refresh, maxAge, want time.Duration
	}{
		{time.Hour, 10 * time.Minute, 10 * time.Minute},
		{5 * time.Minute, 24 * time.Hour, 5 * time.Minute},
		{5 * time.Minute, 0, 5 * time.Minute},
		{time.Second, MinMaxAge, time.Second},
	} {
		s := New(Config{URL: p.srv.URL, Refresh: tt.refresh}, Options{Logger: quiet()})
		s.cur.Store(&keySet{maxAge: tt.maxAge})
		if got := s.interval(); got != tt.want {
			t.Errorf("refresh %v, max-age %v: next fetch after %v, want %v", tt.refresh, tt.maxAge, got, tt.want)
		}
	}
}

func TestCheckRedirect(t *testing.T) {
	req := func(u string) *http.Request { r, _ := http.NewRequest("GET", u, nil); return r }
	https := []*http.Request{req("https://idp.example/keys")}
	local := []*http.Request{req("http://127.0.0.1/keys")}
	for _, tt := range []struct {
		to  string
		via []*http.Request
		ok  bool
	}{
		{"https://cdn.example/keys", https, true},
		{"http://cdn.example/keys", https, false},
		{"https://127.0.0.1/keys", local, false},
		{"http://127.0.0.1:9/keys", local, true},
		{"https://cdn.example/keys", append(append([]*http.Request{}, https...), https[0], https[0], https[0]), false},
	} {
		if err := checkRedirect(req(tt.to), tt.via); (err == nil) != tt.ok {
			t.Errorf("redirect to %s after %d: %v, want ok %v", tt.to, len(tt.via), err, tt.ok)
		}
	}
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// TestProviderTextBounded: what a hostile provider writes into a failed
// fetch's error (a jwks_uri of 200 KB, a redirect's Location of 200 KB)
// reaches Status (and so /readyz) and the log at most MaxErrorLen bytes
// long. Before, the whole of it did, on every failure.
func TestProviderTextBounded(t *testing.T) {
	long := strings.Repeat("x", 200_000)
	var iss string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/realm/.well-known/openid-configuration":
			json.NewEncoder(w).Encode(map[string]string{"issuer": iss, "jwks_uri": long})
		case "/redirect":
			w.Header().Set("Location", "ftp://"+long)
			w.WriteHeader(http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	iss = srv.URL + "/realm"
	for name, cfg := range map[string]Config{
		"jwks_uri": {Issuer: iss, Refresh: time.Hour},
		"redirect": {URL: srv.URL + "/redirect", Refresh: time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			var logged syncBuf
			s := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
			s.Start()
			defer s.Close()
			st := s.Status()
			if st.Error == "" || st.Keys != 0 {
				t.Fatalf("status %+v, want a failure", st)
			}
			if len(st.Error) > MaxErrorLen+len("…") {
				t.Errorf("error of %d bytes, more than %d: %.120s…", len(st.Error), MaxErrorLen, st.Error)
			}
			if n := logged.Len(); n == 0 || n > MaxErrorLen+1024 {
				t.Errorf("log of %d bytes for one failure", n)
			}
		})
	}
}

// syncBuf is a bytes.Buffer safe for the Set's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) Len() int                    { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Len() }

func TestCut(t *testing.T) {
	for _, tt := range []struct {
		in   string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"aé", 2, "a…"}, // é is two bytes: never cut inside it
		{"éé", 3, "é…"},
	} {
		if got := cut(tt.in, tt.n); got != tt.want {
			t.Errorf("cut(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

// TestProviderBombs: a gzip answer that inflates to 64 MiB is refused
// after 1 MiB of inflated bytes (the client asks for gzip and inflates it
// itself; the bound is on what it inflates), and an answer dripping a
// byte at a time ends with the fetch's timeout. Neither costs more than
// the bounds, and the last good keys stay.
func TestProviderBombs(t *testing.T) {
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zw.Write([]byte(`{"keys":[`))
	zeros := make([]byte, 1<<20)
	for i := range zeros {
		zeros[i] = ' '
	}
	for range 64 {
		zw.Write(zeros)
	}
	zw.Write([]byte(`]}`))
	zw.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/gzip":
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Type", "application/json")
			w.Write(bomb.Bytes())
		case "/drip":
			w.Write([]byte(`{"keys":[`))
			for {
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
				if _, err := w.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}))
	defer srv.Close()
	for path, want := range map[string]string{"/gzip": "larger than", "/drip": "deadline exceeded"} {
		t.Run(path, func(t *testing.T) {
			s := New(Config{URL: srv.URL + path, Refresh: time.Hour}, Options{Logger: quiet()})
			s.fetchTimeout = time.Second
			done := make(chan struct{})
			go func() { s.Start(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the fetch never ended")
			}
			defer s.Close()
			if st := s.Status(); st.Keys != 0 || !strings.Contains(st.Error, want) {
				t.Fatalf("status %+v, want %q", st, want)
			}
		})
	}
}

// TestFloodDuringRotation: the bound on what a forged-kid flood does to a
// rotation. An attacker who spends the unknown-kid fetch just before the
// provider publishes a new key gets the new key's tokens refused (at once,
// never waiting) until UnknownKidEvery has passed since; then the next
// unknown kid, forged or not, fetches for everyone and the new key
// verifies. The attacker cannot stretch that: each of its fetches is one
// more chance to learn the key.
func TestFloodDuringRotation(t *testing.T) {
	rk, _ := testRSA(t)
	p := newProvider(t, doc(jwk(t, &rk[0].PublicKey, "old", nil)))
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	s := newSet(t, p, clk)
	ctx := context.Background()
	if _, err := s.VerificationKey(ctx, "forged-1", "RS256"); !errors.Is(err, ErrUnknownKid) {
		t.Fatalf("forged kid: %v", err)
	}
	p.serve(doc(jwk(t, &rk[0].PublicKey, "old", nil), jwk(t, &rk[1].PublicKey, "new", nil)))
	clk.add(UnknownKidEvery - time.Millisecond)
	if _, err := s.VerificationKey(ctx, "new", "RS256"); !errors.Is(err, ErrUnknownKid) {
		t.Fatalf("new key within %v of the attacker's fetch: %v, want refused", UnknownKidEvery, err)
	}
	clk.add(time.Millisecond)
	// The attacker is first again: its fetch learns the new key.
	if _, err := s.VerificationKey(ctx, "forged-2", "RS256"); !errors.Is(err, ErrUnknownKid) {
		t.Fatalf("forged kid: %v", err)
	}
	if _, err := s.VerificationKey(ctx, "new", "RS256"); err != nil {
		t.Fatalf("new key after the attacker's next fetch: %v", err)
	}
	if n := p.requests.Load(); n != 3 {
		t.Fatalf("%d requests, want 3 (start, two forged kids)", n)
	}
}

// TestReusedKid: a provider that replaces a key under an unchanged kid
// has tokens of the new key refused until the next refresh. A known kid
// never starts a fetch, whatever its signature: if a bad signature under
// a known kid did, any client could make the gateway fetch.
func TestReusedKid(t *testing.T) {
	rk, _ := testRSA(t)
	p := newProvider(t, doc(jwk(t, &rk[0].PublicKey, "main", nil)))
	s := newSet(t, p, &fakeClock{t: time.Unix(1e9, 0)})
	p.serve(doc(jwk(t, &rk[1].PublicKey, "main", nil)))
	for range 20 {
		k, err := s.VerificationKey(context.Background(), "main", "RS256")
		if err != nil || !k.(*rsa.PublicKey).Equal(&rk[0].PublicKey) {
			t.Fatalf("key %v, %v: want the held one", k, err)
		}
	}
	if n := p.requests.Load(); n != 1 {
		t.Fatalf("%d requests, want 1 (the start)", n)
	}
}

// TestDuplicateKid: two keys of one type under one kid (a provider's
// mistake, or a second key slipped into the set): the first in the set
// verifies, the second never does, and a token without kid finds no
// single key.
func TestDuplicateKid(t *testing.T) {
	rk, _ := testRSA(t)
	p := newProvider(t, doc(jwk(t, &rk[0].PublicKey, "dup", nil), jwk(t, &rk[1].PublicKey, "dup", nil)))
	s := newSet(t, p, &fakeClock{t: time.Unix(1e9, 0)})
	k, err := s.VerificationKey(context.Background(), "dup", "RS256")
	if err != nil || !k.(*rsa.PublicKey).Equal(&rk[0].PublicKey) {
		t.Fatalf("key %v, %v: want the first", k, err)
	}
	if _, err := s.VerificationKey(context.Background(), "", "RS256"); !errors.Is(err, ErrNoKid) {
		t.Fatalf("no kid: %v, want ErrNoKid", err)
	}
}

// oddModulus is an odd number of exactly bits bits, base64url: an RSA
// modulus of that size as far as a parser can tell.
func oddModulus(bits int) string {
	b := make([]byte, (bits+7)/8)
	rand.Read(b)
	b[0] = 0x80 >> ((8 - bits%8) % 8)
	b[len(b)-1] |= 1
	return b64(b)
}

// TestFlappingProvider: a provider whose answers alternate between two
// sets (two nodes behind one name, mid-rotation). Each fetch replaces the
// set whole; a token whose key the last answer lacked starts a fetch
// (once per UnknownKidEvery) and is verified when that fetch brings the
// key back. The gateway never holds more than one answer, so memory does
// not grow with flapping.
func TestFlappingProvider(t *testing.T) {
	rk, _ := testRSA(t)
	a, b := doc(jwk(t, &rk[0].PublicKey, "a", nil)), doc(jwk(t, &rk[1].PublicKey, "b", nil))
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1)%2 == 1 {
			w.Write(a)
		} else {
			w.Write(b)
		}
	}))
	defer srv.Close()
	clk := &fakeClock{t: time.Unix(1e9, 0)}
	s := New(Config{URL: srv.URL, Refresh: time.Hour}, Options{Logger: quiet(), Now: clk.now})
	s.Start()
	defer s.Close()
	ctx := context.Background()
	if _, err := s.VerificationKey(ctx, "a", "RS256"); err != nil {
		t.Fatalf("a after the start: %v", err)
	}
	if _, err := s.VerificationKey(ctx, "b", "RS256"); err != nil {
		t.Fatalf("b, fetched for its unknown kid: %v", err)
	}
	if _, err := s.VerificationKey(ctx, "a", "RS256"); !errors.Is(err, ErrUnknownKid) {
		t.Fatalf("a within %v of the last fetch, which lacked it: %v, want refused", UnknownKidEvery, err)
	}
	clk.add(UnknownKidEvery)
	if _, err := s.VerificationKey(ctx, "a", "RS256"); err != nil {
		t.Fatalf("a after %v: %v", UnknownKidEvery, err)
	}
	if st := s.Status(); st.Keys != 1 || n.Load() != 3 {
		t.Fatalf("status %+v after %d fetches, want 1 key after 3", st, n.Load())
	}
}
