package keys

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"testing"
	"time"
)

// mapKeySet is a KeySet of fixed keys by kid, each for any alg: the
// verifier, not the set, must refuse a key of the wrong type.
type mapKeySet map[string]crypto.PublicKey

func (m mapKeySet) VerificationKey(_ context.Context, kid, _ string) (crypto.PublicKey, error) {
	if k, ok := m[kid]; ok {
		return k, nil
	}
	return nil, errors.New("unknown kid")
}

// signWith signs header and claims with priv under alg (RS*, ES*, EdDSA),
// with the standard library, not the code under test.
func signWith(alg string, hdr, claims any, priv crypto.Signer) string {
	in := b64(mustJSON(hdr)) + "." + b64(mustJSON(claims))
	var sig []byte
	var err error
	switch alg {
	case "RS256":
		d := sha256.Sum256([]byte(in))
		sig, err = priv.Sign(rand.Reader, d[:], crypto.SHA256)
	case "RS384":
		d := sha512.Sum384([]byte(in))
		sig, err = priv.Sign(rand.Reader, d[:], crypto.SHA384)
	case "RS512":
		d := sha512.Sum512([]byte(in))
		sig, err = priv.Sign(rand.Reader, d[:], crypto.SHA512)
	case "ES256", "ES384":
		k := priv.(*ecdsa.PrivateKey)
		var d []byte
		if alg == "ES256" {
			x := sha256.Sum256([]byte(in))
			d = x[:]
		} else {
			x := sha512.Sum384([]byte(in))
			d = x[:]
		}
		r, s, e := ecdsa.Sign(rand.Reader, k, d)
		size := (k.Curve.Params().BitSize + 7) / 8
		sig = make([]byte, 2*size)
		r.FillBytes(sig[:size])
		s.FillBytes(sig[size:])
		err = e
	case "EdDSA":
		sig, err = priv.Sign(rand.Reader, []byte(in), crypto.Hash(0))
	}
	if err != nil {
		panic(err)
	}
	return in + "." + b64(sig)
}

// TestJWTKeySet: tokens verified with a key set's keys, every algorithm,
// and the hostile tokens a key set must refuse (alg confusion, none, a key
// of the wrong type or curve, an algorithm left out of the allow-list).
func TestJWTKeySet(t *testing.T) {
	rsaPriv, _ := testRSAKeys(t)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	set := mapKeySet{"rsa": &rsaPriv.PublicKey, "p256": &p256.PublicKey, "p384": &p384.PublicKey, "ed": edPriv.Public()}
	now := time.Unix(1_800_000_000, 0)
	claims := map[string]any{"sub": "alice", "exp": now.Unix() + 60}
	hdr := func(alg, kid string) map[string]any { return map[string]any{"alg": alg, "kid": kid} }
	tests := []struct {
		name string
		algs []string
		tok  string
		want string
	}{
		{"RS256", nil, signWith("RS256", hdr("RS256", "rsa"), claims, rsaPriv), "alice"},
		{"RS384", nil, signWith("RS384", hdr("RS384", "rsa"), claims, rsaPriv), "alice"},
		{"RS512", nil, signWith("RS512", hdr("RS512", "rsa"), claims, rsaPriv), "alice"},
		{"ES256", nil, signWith("ES256", hdr("ES256", "p256"), claims, p256), "alice"},
		{"ES384", nil, signWith("ES384", hdr("ES384", "p384"), claims, p384), "alice"},
		{"EdDSA", nil, signWith("EdDSA", hdr("EdDSA", "ed"), claims, edPriv), "alice"},
		{"RS256 allowed by the list", []string{"RS256"}, signWith("RS256", hdr("RS256", "rsa"), claims, rsaPriv), "alice"},
		{"RS384 not in the list", []string{"RS256"}, signWith("RS384", hdr("RS384", "rsa"), claims, rsaPriv), ""},
		{"HS256 keyed with the RSA key's bytes", nil, signHS256(hdr("HS256", "rsa"), claims, rsaPriv.N.Bytes()), ""},
		{"alg none", nil, b64(mustJSON(hdr("none", "rsa"))) + "." + b64(mustJSON(claims)) + ".", ""},
		{"ES256 token, P-384 key", nil, signWith("ES384", hdr("ES256", "p384"), claims, p384), ""},
		{"ES384 token, P-256 key", nil, signWith("ES256", hdr("ES384", "p256"), claims, p256), ""},
		{"RS256 token, EC key", nil, signWith("RS256", hdr("RS256", "p256"), claims, rsaPriv), ""},
		{"EdDSA token, RSA key", nil, signWith("EdDSA", hdr("EdDSA", "rsa"), claims, edPriv), ""},
		{"ES256 token, Ed25519 key", nil, signWith("ES256", hdr("ES256", "ed"), claims, p256), ""},
		{"RS256 signed by the EC key's kid's neighbour", nil, signWith("RS256", hdr("RS256", "rsa"), claims, rsaKey2), ""},
		{"unknown kid", nil, signWith("RS256", hdr("RS256", "gone"), claims, rsaPriv), ""},
		{"kid not a string", nil, signWith("RS256", map[string]any{"alg": "RS256", "kid": 7}, claims, rsaPriv), ""},
		{"kid with odd bytes", nil, signWith("RS256", hdr("RS256", "rsa\x00\xff"), claims, rsaPriv), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := NewExtractor(Config{JWT: &JWTConfig{KeySet: set, Algorithms: tt.algs}})
			if err != nil {
				t.Fatal(err)
			}
			r := newTestRequest("198.51.100.1:1000")
			r.Header.Set("Authorization", "Bearer "+tt.tok)
			id := e.Identify(r, now)
			if id.User != tt.want || id.TokenRejected != (tt.want == "") {
				t.Fatalf("User %q TokenRejected %v, want %q", id.User, id.TokenRejected, tt.want)
			}
		})
	}
}

// TestJWTKeySetConfig: a key set excludes the other key sources, and its
// allow-list names only asymmetric algorithms.
func TestJWTKeySetConfig(t *testing.T) {
	set := mapKeySet{}
	for _, c := range []JWTConfig{
		{KeySet: set, HS256Secret: testSecret},
		{KeySet: set, Algorithms: []string{"HS256"}},
		{KeySet: set, Algorithms: []string{"none"}},
		{HS256Secret: testSecret, Algorithms: []string{"RS256"}},
	} {
		if _, err := NewExtractor(Config{JWT: &c}); err == nil {
			t.Errorf("%+v: accepted", c)
		}
	}
	e, err := NewExtractor(Config{JWT: &JWTConfig{HS256Secret: testSecret}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.WithKeySet(set); err == nil {
		t.Error("WithKeySet on a secret's extractor succeeded")
	}
}

func TestCheckKeySetURL(t *testing.T) {
	for u, ok := range map[string]bool{
		"https://idp.example/keys":          true,
		"http://127.0.0.1:8080/keys":        true,
		"http://[::1]:8080/keys":            true,
		"http://localhost/keys":             true,
		"http://idp.example/keys":           false,
		"http://10.0.0.1/keys":              false,
		"ftp://idp.example/keys":            false,
		"https://user:pw@idp.example/keys":  false,
		"https:///keys":                     false,
		"https://idp.example/keys#frag":     false,
		"/keys":                             false,
		"http://127.0.0.1.idp.example/keys": false,
	} {
		if err := CheckKeySetURL("f", u); (err == nil) != ok {
			t.Errorf("CheckKeySetURL(%q) = %v, want ok %v", u, err, ok)
		}
	}
}

func TestJSONString(t *testing.T) {
	for raw, want := range map[string]struct {
		s  string
		ok bool
	}{
		``:             {"", true},
		`"k1"`:         {"k1", true},
		`"k\u0031"`:    {"k1", true},
		`"a\"b"`:       {`a"b`, true},
		`""`:           {"", true},
		`7`:            {"", false},
		`["k1"]`:       {"", false},
		`{"kid":"k1"}`: {"", false},
	} {
		var r []byte
		if raw != "" {
			r = []byte(raw)
		}
		if s, ok := jsonString(r); s != want.s || ok != want.ok {
			t.Errorf("jsonString(%s) = %q, %v; want %q, %v", raw, s, ok, want.s, want.ok)
		}
	}
}
