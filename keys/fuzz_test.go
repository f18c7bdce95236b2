package keys

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// fuzzPeers are the peers FuzzXFF chooses from: trusted and untrusted, IPv4,
// IPv6 and IPv4-mapped, and an unparsable Unix-socket address.
var fuzzPeers = []string{
	"10.1.2.3:1",
	"[2001:db8:ffff::1]:1",
	"[::ffff:192.168.0.7]:1",
	"203.0.113.5:1",
	"[2001:db8:1::1]:1",
	"@",
}

// FuzzXFF checks the client-IP resolution on arbitrary X-Forwarded-For
// values (lines separated by "\n"):
//   - it never panics;
//   - the result is the peer or the address of an entry of the chain, with
//     no zone and no IPv4 mapping;
//   - from an untrusted peer the header never changes the identity;
//   - entries an attacker prepends on the left never change a result that
//     was an untrusted entry of the chain.
func FuzzXFF(f *testing.F) {
	seeds := []string{
		"1.2.3.4",
		"evil, 6.6.6.6",                 // spoofed left entry
		"1.1.1.1\n2.2.2.2, 10.0.0.5",    // several lines, trusted hop
		"[2001:db8::1]:443, 1.2.3.4:80", // ports and brackets
		`"1.2.3.4", unknown,, _hidden`,  // quotes, unknown, empty, obfuscated
		"::ffff:203.0.113.9, fe80::1%eth0",
		"10.0.0.9, 10.0.0.8", // all trusted
		"",
		"\x00\xff{}[]:%",
	}
	for _, s := range seeds {
		for p := range fuzzPeers {
			f.Add(uint8(p), s)
		}
	}
	e, err := NewExtractor(Config{Sources: []Source{SourceIP}, TrustedProxies: testTrusted})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, peerIdx uint8, xff string) {
		remote := fuzzPeers[int(peerIdx)%len(fuzzPeers)]
		peer, _ := ParseIP(remote)
		lines := strings.Split(xff, "\n")
		r := newTestRequest(remote, lines...)
		id := e.Identify(r, time.Time{})
		if id.IP.Zone() != "" || id.IP.Is4In6() {
			t.Fatalf("IP %v has a zone or a mapping", id.IP)
		}
		if !peer.IsValid() || !trusted(peer, e.trusted) {
			if id.IP != peer || id.IPFallback {
				t.Fatalf("untrusted peer %s: XFF %q changed the identity to %v", remote, xff, id.IP)
			}
			return
		}
		if id.IPFallback && id.IP != peer {
			t.Fatalf("XFF %q from %s: fallback to %v, not to the peer", xff, remote, id.IP)
		}
		if id.IP != peer {
			found := false
			for _, item := range strings.Split(strings.Join(lines, ","), ",") {
				if a, ok := ParseIP(item); ok && a == id.IP {
					found = true
					break
				}
			}
			if !found {
				t.Fatalf("XFF %q from %s: %v (fallback %v) is neither the peer nor an entry", xff, remote, id.IP, id.IPFallback)
			}
		}
		if !id.IPFallback && id.IP != peer && !trusted(id.IP, e.trusted) {
			spoofed := append([]string{"6.6.6.6, unknown, " + lines[0]}, lines[1:]...)
			id2 := e.Identify(newTestRequest(remote, spoofed...), time.Time{})
			if id2.IP != id.IP || id2.IPFallback {
				t.Fatalf("spoofed prefix changed %v to %v", id.IP, id2.IP)
			}
		}
	})
}

// FuzzAppendKey checks that distinct tuples of (api key, user, header
// value, route) get distinct keys, equal tuples equal keys, and that keys
// hold only [A-Za-z0-9_{}-].
func FuzzAppendKey(f *testing.F) {
	f.Add("k", "u", "t", "r", "k", "u", "t", "r")
	f.Add("a:b", "c", "", "r", "a", "b:c", "", "r")             // shifted separator
	f.Add("-", "", "", "r", "", "-", "", "r")                   // literal "-" vs missing
	f.Add("{x}", "\x00", "\xff", "", "{x}", "\x00", "\xfe", "") // braces, NUL, non-UTF-8
	f.Add("1.2.3.4", "", "", "r", "", "1.2.3.4", "", "r")
	by := []Part{{Kind: PartClient}, {Kind: PartAPIKey}, {Kind: PartUser}, {Kind: PartHeader, Header: "X-Tenant"}, {Kind: PartRoute}}
	key := func(apiKey, user, tenant, route string) []byte {
		id := Identity{APIKey: apiKey, User: user, IP: netip.MustParseAddr("1.2.3.4"), ClientKind: SourceIP}
		if apiKey != "" {
			id.Client, id.ClientKind = apiKey, SourceAPIKey
		}
		r := newTestRequest("1.2.3.4:1")
		if tenant != "" {
			r.Header["X-Tenant"] = []string{tenant}
		}
		return appendKey(nil, by, &id, r, route)
	}
	f.Fuzz(func(t *testing.T, a1, u1, t1, r1, a2, u2, t2, r2 string) {
		k1, k2 := key(a1, u1, t1, r1), key(a2, u2, t2, r2)
		checkKey(t, k1)
		checkKey(t, k2)
		same := a1 == a2 && u1 == u2 && t1 == t2 && r1 == r2
		if bytes.Equal(k1, k2) != same {
			t.Fatalf("(%q %q %q %q) → %s, (%q %q %q %q) → %s", a1, u1, t1, r1, k1, a2, u2, t2, r2, k2)
		}
	})
}

// FuzzJWT checks the token verifier on arbitrary tokens: it never panics,
// and no token other than the one signed by the test verifies (so no
// rewriting of header, claims or signature — alg none, padding, re-encoded
// JSON — is accepted).
func FuzzJWT(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	good := signHS256(map[string]string{"alg": "HS256", "typ": "JWT"}, map[string]any{"sub": "alice", "exp": now.Unix() + 60}, testSecret)
	p := strings.Split(good, ".")
	f.Add(good)
	f.Add(b64([]byte(`{"alg":"none"}`)) + "." + p[1] + ".")                      // alg none
	f.Add(b64([]byte(`{"alg":"HS256","crit":["x"]}`)) + "." + p[1] + "." + p[2]) // crit
	f.Add(p[0] + "=." + p[1] + "." + p[2])                                       // padding
	f.Add(p[0] + "." + p[1] + "." + p[2] + "A")                                  // signature bits
	f.Add("..")
	f.Add("\x00.\xff.{}")
	v, err := newJWTVerifier(&JWTConfig{HS256Secret: testSecret}, "", "")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		var c tokenClaims
		err := v.verify(context.Background(), tok, now, &c)
		user := c.user
		if err == nil && tok != good {
			t.Fatalf("forged token %q verified as %q", tok, user)
		}
		if tok == good && (err != nil || user != "alice") {
			t.Fatalf("valid token: %q, %v", user, err)
		}
	})
}

// FuzzJWTKeySet is FuzzJWT with keys from a key set: an RSA and an
// Ed25519 key under their kids (both have one valid signature per
// message; ECDSA's are malleable, so it is left to TestJWTKeySet). No token
// but the two signed here verifies: not under another kid, alg or key.
func FuzzJWTKeySet(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	rsaPriv, _ := testRSAKeys(f)
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	set := mapKeySet{"r": &rsaPriv.PublicKey, "e": edPriv.Public()}
	claims := map[string]any{"sub": "alice", "exp": now.Unix() + 60}
	good := map[string]bool{
		signWith("RS256", map[string]string{"alg": "RS256", "kid": "r"}, claims, rsaPriv): true,
		signWith("EdDSA", map[string]string{"alg": "EdDSA", "kid": "e"}, claims, edPriv):  true,
	}
	for tok := range good {
		p := strings.Split(tok, ".")
		f.Add(tok)
		f.Add(b64([]byte(`{"alg":"HS256","kid":"r"}`)) + "." + p[1] + "." + p[2])
		f.Add(b64([]byte(`{"alg":"none","kid":"r"}`)) + "." + p[1] + ".")
		f.Add(b64([]byte(`{"alg":"RS256","kid":"e"}`)) + "." + p[1] + "." + p[2])
		f.Add(b64([]byte(`{"alg":"RS256"}`)) + "." + p[1] + "." + p[2])
	}
	v, err := newJWTVerifier(&JWTConfig{KeySet: set}, "", "")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		var c tokenClaims
		err := v.verify(context.Background(), tok, now, &c)
		if err == nil && !good[tok] {
			t.Fatalf("forged token %q verified as %q", tok, c.user)
		}
		if good[tok] && (err != nil || c.user != "alice") {
			t.Fatalf("valid token: %q, %v", c.user, err)
		}
	})
}
