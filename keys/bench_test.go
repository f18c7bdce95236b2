package keys

import (
	"strings"
	"testing"
	"time"
)

func benchIdentify(b *testing.B, cfg Config, setup func(r map[string][]string)) {
	e, err := NewExtractor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	r := newTestRequest("10.1.2.3:4711", "6.6.6.6, 203.0.113.9, 10.0.0.2")
	setup(r.Header)
	now := time.Unix(1_800_000_000, 0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := e.Identify(r, now)
			if id.Client == "" {
				b.Fatal("no client")
			}
		}
	})
}

func BenchmarkIdentify(b *testing.B) {
	priv, _ := testRSAKeys(b)
	claims := map[string]any{"sub": "alice", "exp": 1_800_000_060}
	hsTok := signHS256(map[string]string{"alg": "HS256"}, claims, testSecret)
	rsTok := signRS256(map[string]string{"alg": "RS256"}, claims, priv)
	trustedCfg := Config{TrustedProxies: testTrusted}
	b.Run("ip-xff", func(b *testing.B) {
		benchIdentify(b, trustedCfg, func(map[string][]string) {})
	})
	b.Run("api-key", func(b *testing.B) {
		benchIdentify(b, trustedCfg, func(h map[string][]string) { h["X-Api-Key"] = []string{"k-0123456789"} })
	})
	b.Run("jwt-hs256", func(b *testing.B) {
		cfg := trustedCfg
		cfg.JWT = &JWTConfig{HS256Secret: testSecret}
		benchIdentify(b, cfg, func(h map[string][]string) { h["Authorization"] = []string{"Bearer " + hsTok} })
	})
	b.Run("jwt-rs256", func(b *testing.B) {
		cfg := trustedCfg
		cfg.JWT = &JWTConfig{RS256Key: &priv.PublicKey}
		benchIdentify(b, cfg, func(h map[string][]string) { h["Authorization"] = []string{"Bearer " + rsTok} })
	})
}

func BenchmarkAppendKey(b *testing.B) {
	e, err := NewExtractor(Config{TrustedProxies: testTrusted})
	if err != nil {
		b.Fatal(err)
	}
	r := newTestRequest("[2001:db8:1:2::7]:4711")
	r.Header.Set("X-Tenant", "tenant-42")
	id := e.Identify(r, time.Time{})
	for _, by := range [][]string{{"client"}, {"client", "route", "method", "header:X-Tenant"}, {"route"}} {
		ps := parts(b, by...)
		b.Run(strings.Join(by, "+"), func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]byte, 0, 64)
				for pb.Next() {
					buf = e.AppendKey(buf[:0], ps, &id, &Values{Route: "search", Method: r.Method, Header: r.Header})
				}
			})
		})
	}
	b.Run("HashAPIKey", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = HashAPIKey("k-0123456789")
		}
	})
}

// TestIdentifyAllocs: resolving a client by its API key builds nothing on
// the heap (the token claims, unused without a token, stay on the stack).
func TestIdentifyAllocs(t *testing.T) {
	e, err := NewExtractor(Config{TrustedProxies: testTrusted})
	if err != nil {
		t.Fatal(err)
	}
	r := newTestRequest("10.1.2.3:4711")
	r.Header["X-Api-Key"] = []string{"k-0123456789"}
	now := time.Unix(1_800_000_000, 0)
	if n := testing.AllocsPerRun(100, func() { _ = e.Identify(r, now) }); n != 0 {
		t.Errorf("Identify by API key: %v allocations, want 0", n)
	}
}
