package e2e

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// idp is an identity provider in the test process: a JWKS at /jwks and an
// OpenID Connect discovery document at /realm/.well-known/... It counts
// the JWKS requests, can answer 503, and can hold every request until
// released (a provider that hangs).
type idp struct {
	srv      *httptest.Server
	jwks     atomic.Pointer[[]byte]
	issuer   atomic.Pointer[string] // the discovery document's issuer
	jwksURI  atomic.Pointer[string] // the discovery document's jwks_uri; nil: /jwks
	down     atomic.Bool
	requests atomic.Int64 // JWKS requests
	hold     atomic.Pointer[chan struct{}]
	arrived  chan struct{}          // one value per JWKS request, when there is room
	conns    atomic.Int64           // connections open to the provider
	cc       atomic.Pointer[string] // the JWKS answer's Cache-Control; nil: none
}

func newIdP(t *testing.T) *idp {
	t.Helper()
	p := &idp{arrived: make(chan struct{}, 1000)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.Listener = ln
	p.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			p.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			p.conns.Add(-1)
		}
	}
	p.srv.Start()
	t.Cleanup(func() {
		if h := p.hold.Swap(nil); h != nil {
			close(*h)
		}
		p.srv.CloseClientConnections()
		p.srv.Close()
	})
	iss := p.srv.URL + "/realm"
	p.issuer.Store(&iss)
	return p
}

func (p *idp) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/realm/.well-known/openid-configuration":
		uri := p.srv.URL + "/jwks"
		if u := p.jwksURI.Load(); u != nil {
			uri = *u
		}
		json.NewEncoder(w).Encode(map[string]string{"issuer": *p.issuer.Load(), "jwks_uri": uri})
		return
	case "/jwks":
	default:
		http.NotFound(w, r)
		return
	}
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
	if p.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if cc := p.cc.Load(); cc != nil {
		w.Header().Set("Cache-Control", *cc)
	}
	w.Write(*p.jwks.Load())
}

// publish makes the JWKS the given keys by kid.
func (p *idp) publish(keys map[string]*rsa.PrivateKey) {
	var list []map[string]string
	for kid, k := range keys {
		list = append(list, rsaJWK(kid, &k.PublicKey))
	}
	b, _ := json.Marshal(map[string]any{"keys": list})
	p.jwks.Store(&b)
}

func (p *idp) publishRaw(b []byte) { p.jwks.Store(&b) }

// rsaJWK writes an RSA public key as a JWK (RFC 7518 §6.3.1), by hand: the
// test's encoder is not the gateway's parser.
func rsaJWK(kid string, k *rsa.PublicKey) map[string]string {
	enc := base64.RawURLEncoding
	return map[string]string{"kty": "RSA", "kid": kid, "use": "sig",
		"n": enc.EncodeToString(k.N.Bytes()), "e": enc.EncodeToString(big.NewInt(int64(k.E)).Bytes())}
}

// testIssuer is the iss of the gateways with a jwks_url (jwksGateway) and
// of rs256's tokens.
const testIssuer = "https://idp.example/tenant-a"

// rs256 signs a token naming kid with sub, exp an hour ahead, the
// gateway's audience and issuer (identity_jwks.toml.tmpl) and the extra
// claims; an extra claim of nil removes that claim.
func rs256(t testing.TB, k *rsa.PrivateKey, kid, sub string, extra map[string]any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	hdr, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": kid})
	claims := map[string]any{"sub": sub, "exp": time.Now().Add(time.Hour).Unix(), "aud": "orders-api", "iss": testIssuer}
	for c, v := range extra {
		claims[c] = v
		if v == nil {
			delete(claims, c)
		}
	}
	body, _ := json.Marshal(claims)
	signed := enc.EncodeToString(hdr) + "." + enc.EncodeToString(body)
	d := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + enc.EncodeToString(sig)
}

func rsaKeyT(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// jwksGateway starts a gateway whose tokens are verified with p's keys
// (keySource: a jwks_url or oidc_issuer line), one request a minute per
// client. spendIP uses up the budget of the test client's IP, so that from
// then on 200 means "the token was an identity" and 429 "it was not".
func jwksGateway(t *testing.T, p *idp, keySource, refresh string) (*gw, *http.Client) {
	t.Helper()
	up := newUpstream(t)
	issuer := "" // oidc_issuer: the issuer is the expected iss
	if keySource == "" {
		keySource = fmt.Sprintf("jwks_url = %q", p.srv.URL+"/jwks")
		issuer = testIssuer
	}
	g := startGateway(t, "identity_jwks.toml.tmpl", gwOpts{Data: map[string]any{
		"Upstream": up.URL, "KeySource": keySource, "Refresh": refresh, "Rate": "1/minute",
		"Audience": "orders-api", "Issuer": issuer}})
	c := &http.Client{Timeout: 30 * time.Second}
	if r := get(t, c, g.url("/api"), nil); r.Status != 200 {
		t.Fatalf("first request without a token: %s", r)
	}
	return g, c
}

// spendIP sends requests without a token until the client's IP is denied,
// so that a 200 again means "the token was an identity".
func spendIP(t testing.TB, g *gw, c *http.Client) {
	t.Helper()
	for range 5 {
		if get(t, c, g.url("/api"), nil).Status == 429 {
			return
		}
	}
	t.Fatal("the IP's budget was never spent")
}

// accepted reports whether the gateway took tok as an identity (see
// jwksGateway); each sub may be asked about once.
func accepted(t testing.TB, g *gw, c *http.Client, tok string) bool {
	t.Helper()
	r := get(t, c, g.url("/api"), map[string]string{"Authorization": "Bearer " + tok})
	if r.Status != 200 && r.Status != 429 {
		t.Fatalf("unexpected answer %s", r)
	}
	return r.Status == 200
}

// TestJWKSRotation: a token signed by a key the provider published after
// the gateway's last fetch is accepted at its first use (the unknown kid
// starts a fetch the request waits for); a reload that keeps the URL
// fetches nothing (the keys and the fetch state survive it); a key the
// provider does not publish is refused.
func TestJWKSRotation(t *testing.T) {
	t.Parallel()
	p := newIdP(t)
	k1, k2, forged := rsaKeyT(t), rsaKeyT(t), rsaKeyT(t)
	p.publish(map[string]*rsa.PrivateKey{"k1": k1})
	g, c := jwksGateway(t, p, "", "1h")
	if !accepted(t, g, c, rs256(t, k1, "k1", "alice", nil)) {
		t.Fatal("token of the published key k1 refused")
	}
	if rd := readyz(t, g); !rd.Ready || rd.JWKS == nil || rd.JWKS.Keys != 1 || rd.JWKS.Error != "" {
		t.Fatalf("/readyz %+v jwks %+v", rd, rd.JWKS)
	}
	if accepted(t, g, c, rs256(t, forged, "k1", "mallory", nil)) {
		t.Fatal("token signed by another key under kid k1 accepted")
	}
	p.publish(map[string]*rsa.PrivateKey{"k1": k1, "k2": k2})
	before := p.requests.Load()
	if !accepted(t, g, c, rs256(t, k2, "k2", "bob", nil)) {
		t.Fatalf("token of the rotated key k2 refused at its first use (provider asked %d times)", p.requests.Load())
	}
	if n := p.requests.Load() - before; n != 1 {
		t.Fatalf("the rotation cost %d fetches, want 1", n)
	}
	// A reload with the same URL (another rate, one that keeps the IP's
	// budget spent) keeps the set.
	before = p.requests.Load()
	at := time.Now()
	g.rewrite(t, map[string]any{"Rate": "1/hour"})
	g.signal(t, syscall.SIGHUP)
	if rd := waitReload(t, g, at); !rd.LastReload.OK {
		t.Fatalf("reload failed: %+v", rd.LastReload)
	}
	spendIP(t, g, c) // a new window size counts afresh
	if !accepted(t, g, c, rs256(t, k2, "k2", "carol", nil)) {
		t.Fatal("k2 refused after the reload")
	}
	if n := p.requests.Load() - before; n != 0 {
		t.Fatalf("a reload with the same jwks_url fetched %d times, want 0", n)
	}
	// A reload to another provider's URL takes its keys, and the old set
	// stops: the old provider hears nothing more.
	p2 := newIdP(t)
	k3 := rsaKeyT(t)
	p2.publish(map[string]*rsa.PrivateKey{"k3": k3})
	at = time.Now()
	g.rewrite(t, map[string]any{"KeySource": fmt.Sprintf("jwks_url = %q", p2.srv.URL+"/jwks")})
	g.signal(t, syscall.SIGHUP)
	if rd := waitReload(t, g, at); !rd.LastReload.OK || rd.JWKS == nil || rd.JWKS.Keys != 1 {
		t.Fatalf("reload to another provider: %+v jwks %+v", rd.LastReload, rd.JWKS)
	}
	spendIP(t, g, c)
	if !accepted(t, g, c, rs256(t, k3, "k3", "dave", nil)) {
		t.Fatal("the new provider's key refused after the reload")
	}
	before = p.requests.Load()
	if accepted(t, g, c, rs256(t, k1, "k1", "erin", nil)) {
		t.Fatal("the old provider's key accepted after the reload")
	}
	if n := p.requests.Load() - before; n != 0 {
		t.Fatalf("the old provider was asked %d times after the reload", n)
	}
}

// TestJWKSProviderDown: a provider that fails keeps the last good keys in
// use; /readyz stays ready but says the fetch fails, and the metrics count
// the failures. When it answers again, the error clears.
func TestJWKSProviderDown(t *testing.T) {
	t.Parallel()
	p := newIdP(t)
	k1 := rsaKeyT(t)
	p.publish(map[string]*rsa.PrivateKey{"k1": k1})
	g, c := jwksGateway(t, p, "", "1s")
	p.down.Store(true)
	rd := waitJWKS(t, g, func(rd *readyzBody) bool { return rd.JWKS.Error != "" })
	if !rd.Ready || rd.JWKS.Keys != 1 || !strings.Contains(rd.JWKS.Error, "503") {
		t.Fatalf("/readyz while the provider is down: ready %v jwks %+v", rd.Ready, rd.JWKS)
	}
	if !accepted(t, g, c, rs256(t, k1, "k1", "alice", nil)) {
		t.Fatal("the last good key refused while the provider is down")
	}
	m := scrape(t, g, "")
	if f := m.family("tollgate_jwks_refreshes_total", `tollgate_result="failure"`); len(f) != 1 || sum(f) < 1 {
		t.Errorf("failures not counted:%s", m.family("tollgate_jwks_refreshes_total"))
	}
	if f := m.family("tollgate_jwks_keys"); sum(f) != 1 {
		t.Errorf("tollgate_jwks_keys:%s", f)
	}
	if f := m.family("tollgate_jwks_last_success_timestamp_seconds"); len(f) != 1 || sum(f) < float64(time.Now().Add(-time.Hour).Unix()) {
		t.Errorf("tollgate_jwks_last_success_timestamp_seconds:%s", f)
	}
	if !strings.Contains(g.output(), "jwks: fetch failed") {
		t.Error("the failure was not logged")
	}
	p.down.Store(false)
	waitJWKS(t, g, func(rd *readyzBody) bool { return rd.JWKS.Error == "" })
}

func sum(m metrics) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// waitJWKS polls /readyz until its jwks field satisfies ok (a hang guard
// of 30 s, not a timing assertion).
func waitJWKS(t testing.TB, g *gw, ok func(*readyzBody) bool) *readyzBody {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rd := readyz(t, g)
		if rd.JWKS == nil {
			t.Fatalf("/readyz has no jwks field")
		}
		if ok(rd) {
			return rd
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz jwks never changed as expected: %+v", rd.JWKS)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestJWKSForgedKidFlood: tokens naming made-up kids, sent as fast as the
// client can, are refused and cost the provider at most one fetch per
// 10 s of the flood.
func TestJWKSForgedKidFlood(t *testing.T) {
	t.Parallel()
	p := newIdP(t)
	k1, forged := rsaKeyT(t), rsaKeyT(t)
	p.publish(map[string]*rsa.PrivateKey{"k1": k1})
	g, c := jwksGateway(t, p, "", "1h")
	start := time.Now()
	before := p.requests.Load()
	const n = 300
	for i := range n {
		ft := rs256(t, forged, fmt.Sprintf("forged-%d-\u202e\x01", i), fmt.Sprint("m", i), nil)
		if accepted(t, g, c, ft) {
			t.Fatalf("forged kid %d accepted", i)
		}
	}
	elapsed := time.Since(start)
	allowed := 1 + int64(elapsed/(10*time.Second))
	if got := p.requests.Load() - before; got > allowed || got < 1 {
		t.Fatalf("%d forged kids over %v cost %d fetches, want 1..%d", n, elapsed.Round(time.Millisecond), got, allowed)
	}
	if !accepted(t, g, c, rs256(t, k1, "k1", "alice", nil)) {
		t.Fatal("the published key refused after the flood")
	}
}

// TestJWKSRefusedSets: a set with more than 100 keys, or a response over
// 1 MiB, is refused whole: a gateway that never got keys is unready and
// says why, and refuses every token.
func TestJWKSRefusedSets(t *testing.T) {
	t.Parallel()
	k1 := rsaKeyT(t)
	one := rsaJWK("k1", &k1.PublicKey)
	many := make([]map[string]string, 101)
	for i := range many {
		many[i] = rsaJWK(fmt.Sprint("k", i), &k1.PublicKey)
	}
	huge, _ := json.Marshal(map[string]any{"keys": many})
	big, _ := json.Marshal(map[string]any{"keys": []any{one}, "pad": strings.Repeat("x", 1<<20)})
	for _, tc := range []struct {
		name string
		body []byte
		err  string
	}{
		{"101 keys", huge, "more than 100"},
		{"over 1 MiB", big, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newIdP(t)
			p.publishRaw(tc.body)
			g, c := jwksGateway(t, p, "", "1h")
			rd := readyz(t, g)
			if rd.Ready || rd.status != 503 || rd.JWKS == nil || rd.JWKS.Keys != 0 || !strings.Contains(rd.JWKS.Error, tc.err) {
				t.Fatalf("/readyz %d ready %v jwks %+v, want unready with %q", rd.status, rd.Ready, rd.JWKS, tc.err)
			}
			if accepted(t, g, c, rs256(t, k1, "k1", "alice", nil)) {
				t.Fatal("a token accepted from a refused set")
			}
		})
	}
}

// TestJWKSSlowProvider: while a fetch hangs at the provider, requests with
// a known kid are verified at once and requests with other unknown kids
// are refused at once: only the request that started the fetch waits, and
// only for a bounded time. (The provider holds its answer until these
// requests are done: had they waited for the fetch, they would not be.)
func TestJWKSSlowProvider(t *testing.T) {
	t.Parallel()
	p := newIdP(t)
	k1, k2 := rsaKeyT(t), rsaKeyT(t)
	p.publish(map[string]*rsa.PrivateKey{"k1": k1})
	g, c := jwksGateway(t, p, "", "1h")
	<-p.arrived // the start's fetch
	hold := make(chan struct{})
	p.hold.Store(&hold)
	first := make(chan bool)
	tok := rs256(t, k2, "k2", "bob", nil)
	go func() {
		r, err := tryDo(c, "GET", g.url("/api"), map[string]string{"Authorization": "Bearer " + tok}, nil)
		first <- err == nil && r.Status == 200
	}()
	<-p.arrived // the fetch k2 started, held
	for i := range 5 {
		if !accepted(t, g, c, rs256(t, k1, "k1", fmt.Sprint("alice", i), nil)) {
			t.Fatal("a known key refused while a fetch hangs")
		}
		if accepted(t, g, c, rs256(t, k2, fmt.Sprint("other-", i), fmt.Sprint("eve", i), nil)) {
			t.Fatal("an unknown kid accepted")
		}
	}
	if p.hold.CompareAndSwap(&hold, nil) {
		close(hold)
	}
	if <-first {
		t.Fatal("k2, never published, accepted")
	}
}

// TestJWKSOIDCDiscovery: oidc_issuer finds the JWKS through the issuer's
// discovery document, and the issuer becomes the expected "iss"; a
// document naming another issuer is refused (no keys, unready).
func TestJWKSOIDCDiscovery(t *testing.T) {
	t.Parallel()
	t.Run("matching issuer", func(t *testing.T) {
		t.Parallel()
		p := newIdP(t)
		k1 := rsaKeyT(t)
		p.publish(map[string]*rsa.PrivateKey{"k1": k1})
		iss := *p.issuer.Load()
		g, c := jwksGateway(t, p, fmt.Sprintf("oidc_issuer = %q", iss), "1h")
		if rd := readyz(t, g); !rd.Ready || rd.JWKS.Keys != 1 {
			t.Fatalf("/readyz %+v jwks %+v", rd, rd.JWKS)
		}
		if !accepted(t, g, c, rs256(t, k1, "k1", "alice", map[string]any{"iss": iss})) {
			t.Fatal("token of the issuer refused")
		}
		if accepted(t, g, c, rs256(t, k1, "k1", "bob", map[string]any{"iss": nil})) {
			t.Fatal("token without iss accepted")
		}
		if accepted(t, g, c, rs256(t, k1, "k1", "carol", map[string]any{"iss": "https://other.example"})) {
			t.Fatal("token of another issuer accepted")
		}
	})
	t.Run("mismatched issuer", func(t *testing.T) {
		t.Parallel()
		p := newIdP(t)
		k1 := rsaKeyT(t)
		p.publish(map[string]*rsa.PrivateKey{"k1": k1})
		iss := *p.issuer.Load()
		other := "https://impostor.example/realm"
		p.issuer.Store(&other)
		g, c := jwksGateway(t, p, fmt.Sprintf("oidc_issuer = %q", iss), "1h")
		rd := readyz(t, g)
		if rd.Ready || rd.JWKS == nil || rd.JWKS.Keys != 0 || !strings.Contains(rd.JWKS.Error, "is not the configured") {
			t.Fatalf("/readyz ready %v jwks %+v", rd.Ready, rd.JWKS)
		}
		if accepted(t, g, c, rs256(t, k1, "k1", "alice", map[string]any{"iss": iss})) {
			t.Fatal("a token accepted although discovery named another issuer")
		}
		if p.requests.Load() != 0 {
			t.Fatalf("the JWKS of a mismatched issuer was fetched %d times", p.requests.Load())
		}
	})
}

// TestJWKSValidateOffline: `gateway validate` judges a key set's settings
// without the network: a provider nobody can reach is no problem of the
// file, plain http beyond loopback is.
func TestJWKSValidateOffline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, keySource string) string {
		path := filepath.Join(dir, name)
		writeFileAtomic(t, path, renderTemplate(t, "identity_jwks.toml.tmpl", map[string]any{
			"Listen": "127.0.0.1:18080", "Admin": "127.0.0.1:18081", "Upstream": "http://127.0.0.1:9",
			"KeySource": keySource, "Refresh": "5m", "Rate": "1/minute", "Audience": "orders-api", "Issuer": testIssuer}))
		return path
	}
	// Port 9 on loopback (discard) refuses: a fetch would fail.
	if code, _, stderr := runGateway(t, nil, "validate", "--config", write("ok.toml", `jwks_url = "http://127.0.0.1:9/keys"`)); code != 0 {
		t.Fatalf("validate of an unreachable jwks_url: exit %d: %s", code, stderr)
	}
	code, _, stderr := runGateway(t, nil, "validate", "--config", write("bad.toml", `oidc_issuer = "http://idp.example/realm"`))
	if code == 0 || !strings.Contains(stderr, "identity.jwt.oidc_issuer: plain http is accepted only to a loopback host") {
		t.Fatalf("validate of plain http beyond loopback: exit %d: %s", code, stderr)
	}
}

// TestJWKSAudienceRequired: a key set without identity.jwt.audience is
// refused by validate (and so at start and reload). An identity provider's
// keys sign the tokens of every application it serves; without an audience
// the gateway took a token issued to any other client of the provider as
// a verified user. With the audience, such a token is refused.
func TestJWKSAudienceRequired(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, src := range []string{`jwks_url = "https://idp.example/keys"`, `oidc_issuer = "https://idp.example/realm"`} {
		path := filepath.Join(dir, "noaud.toml")
		writeFileAtomic(t, path, renderTemplate(t, "identity_jwks.toml.tmpl", map[string]any{
			"Listen": "127.0.0.1:18080", "Admin": "127.0.0.1:18081", "Upstream": "http://127.0.0.1:9",
			"KeySource": src, "Refresh": "5m", "Rate": "1/minute", "Audience": "", "Issuer": testIssuer}))
		code, _, stderr := runGateway(t, nil, "validate", "--config", path)
		if code == 0 || !strings.Contains(stderr, "identity.jwt.audience: required with jwks_url and oidc_issuer") {
			t.Fatalf("validate of %s without audience: exit %d: %s", src, code, stderr)
		}
	}
	p := newIdP(t)
	k1 := rsaKeyT(t)
	p.publish(map[string]*rsa.PrivateKey{"k1": k1})
	g, c := jwksGateway(t, p, "", "1h")
	spendIP(t, g, c)
	if accepted(t, g, c, rs256(t, k1, "k1", "mallory", map[string]any{"aud": "another-app"})) {
		t.Fatal("a token issued to another application accepted")
	}
	if accepted(t, g, c, rs256(t, k1, "k1", "trent", map[string]any{"aud": nil})) {
		t.Fatal("a token without aud accepted")
	}
	if !accepted(t, g, c, rs256(t, k1, "k1", "alice", nil)) {
		t.Fatal("a token for this audience refused")
	}
}

// TestJWKSProviderTextBounded: a discovery document whose jwks_uri is
// 200 KB of junk is refused, and what /readyz and the log say of it is
// bounded (jwks.MaxErrorLen). Before, the whole jwks_uri was quoted in
// jwks.error on every /readyz and in a log line at each failed fetch (one
// a second while the provider kept answering so).
func TestJWKSProviderTextBounded(t *testing.T) {
	t.Parallel()
	p := newIdP(t)
	long := strings.Repeat("x", 200_000)
	p.jwksURI.Store(&long)
	g, _ := jwksGateway(t, p, fmt.Sprintf("oidc_issuer = %q", *p.issuer.Load()), "1h")
	rd := waitJWKS(t, g, func(rd *readyzBody) bool { return rd.JWKS.Error != "" })
	if rd.Ready || !strings.Contains(rd.JWKS.Error, "jwks_uri: \"xxx") {
		t.Fatalf("/readyz ready %v jwks.error %.200q", rd.Ready, rd.JWKS.Error)
	}
	if n := len(rd.JWKS.Error); n > 600 {
		t.Errorf("/readyz jwks.error of %d bytes", n)
	}
	for line := range strings.SplitSeq(g.output(), "\n") {
		if len(line) > 2000 {
			t.Errorf("a log line of %d bytes: %.200s…", len(line), line)
		}
	}
}

// TestJWKSReloadsLeaveNoConnections: reloads that change jwks_url each
// start a new key set and stop the old one; the stopped sets leave no
// connection (and no goroutines of its) open to the provider. Before,
// each set's client kept its connection alive in its idle pool for 90 s
// after the set stopped: a reload loop held one connection, and two
// goroutines, per reload.
func TestJWKSReloadsLeaveNoConnections(t *testing.T) {
	t.Parallel()
	p := newIdP(t)
	k1 := rsaKeyT(t)
	p.publish(map[string]*rsa.PrivateKey{"k1": k1})
	g, _ := jwksGateway(t, p, "", "1h")
	const reloads = 6
	for i := range reloads {
		at := time.Now()
		g.rewrite(t, map[string]any{"KeySource": fmt.Sprintf("jwks_url = %q", fmt.Sprintf("%s/jwks?v=%d", p.srv.URL, i))})
		g.signal(t, syscall.SIGHUP)
		if rd := waitReload(t, g, at); !rd.LastReload.OK || rd.JWKS == nil || rd.JWKS.Keys != 1 {
			t.Fatalf("reload %d: %+v jwks %+v", i, rd.LastReload, rd.JWKS)
		}
	}
	if n := p.requests.Load(); n < reloads+1 {
		t.Fatalf("%d fetches for %d key sets", n, reloads+1)
	}
	// A hang guard, not a timing: the connections close as each fetch
	// ends; before, they stayed for the idle timeout (90 s).
	deadline := time.Now().Add(30 * time.Second)
	for p.conns.Load() > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still open to the provider after %d reloads", p.conns.Load(), reloads)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestJWKSMaxAgeNeverStretchesRefresh: a provider (or a cache in front of
// it) answering Cache-Control: max-age=86400 does not stretch the
// operator's jwks_refresh: a key the provider withdraws (a compromised
// one) stops verifying at the next refresh. Before, the max-age replaced
// the interval, and the withdrawn key kept verifying for a day.
func TestJWKSMaxAgeNeverStretchesRefresh(t *testing.T) {
	t.Parallel()
	p := newIdP(t)
	day := "public, max-age=86400"
	p.cc.Store(&day)
	k1, k2 := rsaKeyT(t), rsaKeyT(t)
	p.publish(map[string]*rsa.PrivateKey{"k1": k1})
	g, c := jwksGateway(t, p, "", "1s")
	spendIP(t, g, c)
	if !accepted(t, g, c, rs256(t, k1, "k1", "alice", nil)) {
		t.Fatal("token of the published key k1 refused")
	}
	// The provider withdraws k1. A hang guard, not a timing: the next
	// refresh comes after jwks_refresh (1 s); before, after 24 h.
	p.publish(map[string]*rsa.PrivateKey{"k2": k2})
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; accepted(t, g, c, rs256(t, k1, "k1", fmt.Sprintf("mallory-%d", i), nil)); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("the withdrawn key k1 still verifies 30 s after it was withdrawn, with a 1 s jwks_refresh (%d fetches)", p.requests.Load())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !accepted(t, g, c, rs256(t, k2, "k2", "bob", nil)) {
		t.Fatal("token of the new key k2 refused")
	}
}

// TestJWKSTokenWithoutExp: a token the provider signed without exp is
// refused. Before, it was a verified user forever: a leaked one could
// never expire, and a provider signs JWTs that are not access tokens and
// may lack exp (an OpenID Connect back-channel logout token, whose exp is
// optional, carries this API's client as aud and a sub).
func TestJWKSTokenWithoutExp(t *testing.T) {
	t.Parallel()
	p := newIdP(t)
	k1 := rsaKeyT(t)
	p.publish(map[string]*rsa.PrivateKey{"k1": k1})
	g, c := jwksGateway(t, p, "", "1h")
	spendIP(t, g, c)
	if accepted(t, g, c, rs256(t, k1, "k1", "mallory", map[string]any{"exp": nil})) {
		t.Fatal("a token without exp accepted")
	}
	if accepted(t, g, c, rs256(t, k1, "k1", "trent", map[string]any{"exp": nil,
		"events": map[string]any{"http://schemas.openid.net/event/backchannel-logout": map[string]any{}}})) {
		t.Fatal("a logout token (no exp) accepted")
	}
	if !accepted(t, g, c, rs256(t, k1, "k1", "alice", nil)) {
		t.Fatal("a token with exp refused")
	}
}

// TestJWKSIssuerRequired: a jwks_url without identity.jwt.issuer is
// refused by validate (and so at start and reload); with oidc_issuer the
// issuer is implied. Providers share one key set among their tenants (a
// multi-tenant cloud directory publishes one set for all): without an
// expected iss, a token another tenant (the attacker's own) issued for
// this API's audience was a verified user. With the issuer, such a token
// is refused.
func TestJWKSIssuerRequired(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "noiss.toml")
	writeFileAtomic(t, path, renderTemplate(t, "identity_jwks.toml.tmpl", map[string]any{
		"Listen": "127.0.0.1:18080", "Admin": "127.0.0.1:18081", "Upstream": "http://127.0.0.1:9",
		"KeySource": `jwks_url = "https://idp.example/common/keys"`, "Refresh": "5m", "Rate": "1/minute",
		"Audience": "orders-api", "Issuer": ""}))
	code, _, stderr := runGateway(t, nil, "validate", "--config", path)
	if code == 0 || !strings.Contains(stderr, "identity.jwt.issuer: required with jwks_url") {
		t.Fatalf("validate of a jwks_url without issuer: exit %d: %s", code, stderr)
	}
	p := newIdP(t)
	k1 := rsaKeyT(t)
	p.publish(map[string]*rsa.PrivateKey{"k1": k1})
	g, c := jwksGateway(t, p, "", "1h")
	spendIP(t, g, c)
	if accepted(t, g, c, rs256(t, k1, "k1", "mallory", map[string]any{"iss": "https://idp.example/tenant-evil"})) {
		t.Fatal("a token of another tenant accepted")
	}
	if !accepted(t, g, c, rs256(t, k1, "k1", "alice", nil)) {
		t.Fatal("a token of this tenant refused")
	}
}
