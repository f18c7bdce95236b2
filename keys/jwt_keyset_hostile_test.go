package keys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/asn1"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestJWTKeySetHostileTokens: tokens a client crafts against a key set's
// verification, each with the outcome it must get. Signatures are made
// with the standard library over the exact header bytes written here
// (duplicate members, odd encodings), not by the code under test.
func TestJWTKeySetHostileTokens(t *testing.T) {
	rsaPriv, attacker := testRSAKeys(t)
	p256, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	set := mapKeySet{"rsa": &rsaPriv.PublicKey, "p256": &p256.PublicKey}
	now := time.Unix(1_800_000_000, 0)
	exp := now.Unix() + 60
	claims := mustJSON(map[string]any{"sub": "alice", "aud": "api", "exp": exp})
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	// rs signs the exact bytes of hdr and c with RS256.
	rs := func(hdr string, c []byte, k *rsa.PrivateKey) string {
		in := b64([]byte(hdr)) + "." + b64(c)
		d := sha256.Sum256([]byte(in))
		sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
		if err != nil {
			t.Fatal(err)
		}
		return in + "." + b64(sig)
	}
	cl := func(s string) []byte { return []byte(s) }

	// A provider's key URL the token points at: it must never be asked.
	var fetched atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fetched.Add(1) }))
	defer srv.Close()
	attackerJWK := `{"kty":"RSA","n":"` + b64(attacker.N.Bytes()) + `","e":"AQAB"}`

	// ES256 signatures: a valid one, and variants of its R and S.
	es := signWith("ES256", raw(`{"alg":"ES256","kid":"p256"}`), raw(string(claims)), p256)
	signed, sig64, _ := strings.Cut(es[strings.IndexByte(es, '.')+1:], ".")
	signed = es[:strings.IndexByte(es, '.')] + "." + signed
	sig, _ := base64.RawURLEncoding.DecodeString(sig64)
	r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	n := elliptic.P256().Params().N
	esSig := func(r, s *big.Int) string {
		b := make([]byte, 64)
		r.FillBytes(b[:32])
		s.FillBytes(b[32:])
		return signed + "." + b64(b)
	}
	der, _ := asn1.Marshal(struct{ R, S *big.Int }{r, s})

	rsTok := rs(`{"alg":"RS256","kid":"rsa"}`, claims, rsaPriv)
	rsSigned, rsSig := rsTok[:strings.LastIndexByte(rsTok, '.')], rsTok[strings.LastIndexByte(rsTok, '.')+1:]
	rsSigBytes, _ := base64.RawURLEncoding.DecodeString(rsSig)

	tests := []struct {
		name, tok, want string
	}{
		// RFC 7515 §4: duplicate header members are refused or the last
		// one wins; here the last wins, and the signature covers the
		// header bytes as sent, so a client cannot add one.
		{"duplicate alg, none then RS256, signed", rs(`{"alg":"none","alg":"RS256","kid":"rsa"}`, claims, rsaPriv), "alice"},
		{"duplicate alg, RS256 then HS256, HMAC keyed with the RSA modulus",
			signHS256(raw(`{"alg":"RS256","alg":"HS256","kid":"rsa"}`), raw(string(claims)), rsaPriv.N.Bytes()), ""},
		{"alg None", rs(`{"alg":"None","kid":"rsa"}`, claims, rsaPriv), ""},
		{"alg nOnE", rs(`{"alg":"nOnE","kid":"rsa"}`, claims, rsaPriv), ""},
		{"alg missing", rs(`{"kid":"rsa"}`, claims, rsaPriv), ""},
		{"alg an array", rs(`{"alg":["RS256"],"kid":"rsa"}`, claims, rsaPriv), ""},
		{"alg with a JSON escape (it is RS256)", rs(`{"alg":"RS\u0032\u00356","kid":"rsa"}`, claims, rsaPriv), "alice"},
		{"ALG in capitals", rs(`{"ALG":"RS256","kid":"rsa"}`, claims, rsaPriv), ""},
		{"header not an object", rs(`["RS256"]`, claims, rsaPriv), ""},
		{"crit", rs(`{"alg":"RS256","kid":"rsa","crit":["exp"],"exp":1}`, claims, rsaPriv), ""},
		// Keys named by the token itself are never fetched nor trusted.
		{"jwk header with the attacker's key", rs(`{"alg":"RS256","kid":"rsa","jwk":`+attackerJWK+`}`, claims, attacker), ""},
		{"jku to the attacker's set", rs(`{"alg":"RS256","kid":"rsa","jku":"`+srv.URL+`"}`, claims, attacker), ""},
		{"x5u to the attacker's certificate", rs(`{"alg":"RS256","kid":"rsa","x5u":"`+srv.URL+`"}`, claims, attacker), ""},
		{"jku and kid unknown", rs(`{"alg":"RS256","kid":"evil","jku":"`+srv.URL+`"}`, claims, attacker), ""},
		{"kid with path traversal", rs(`{"alg":"RS256","kid":"../../../../etc/passwd"}`, claims, rsaPriv), ""},
		{"kid of 100 KB", rs(`{"alg":"RS256","kid":"`+strings.Repeat("k", 100_000)+`"}`, claims, rsaPriv), ""},
		// Signature encodings.
		{"RS256 signature with a leading zero byte added", rsSigned + "." + b64(append([]byte{0}, rsSigBytes...)), ""},
		{"RS256 signature in standard base64 with padding", rsSigned + "." + base64.StdEncoding.EncodeToString(rsSigBytes), ""},
		{"RS256 signature with a space", rsSigned + "." + rsSig[:10] + " " + rsSig[10:], ""},
		{"header with padding", strings.Replace(rsTok, ".", "=.", 1), ""},
		{"ES256 valid", es, "alice"},
		// High S (n − s) verifies as ECDSA does: a second valid encoding of
		// the same signature. Nothing is keyed on a token's bytes.
		{"ES256 high S", esSig(r, new(big.Int).Sub(n, s)), "alice"},
		{"ES256 r = 0", esSig(big.NewInt(0), s), ""},
		{"ES256 s = 0", esSig(r, big.NewInt(0)), ""},
		{"ES256 r = n", esSig(n, s), ""},
		{"ES256 r + n (does not fit 32 bytes, r mod n)", signed + "." + b64(append(new(big.Int).Add(r, n).Bytes(), sig[32:]...)), ""},
		{"ES256 signature in DER", signed + "." + b64(der), ""},
		{"ES256 signature truncated", signed + "." + b64(sig[:63]), ""},
		// Claims (signed by the provider's key: only the claims' meaning
		// is tested).
		{"duplicate sub, the last wins", rs(`{"alg":"RS256","kid":"rsa"}`, cl(`{"sub":"alice","sub":"admin","aud":"api","exp":`+itoa(exp)+`}`), rsaPriv), "admin"},
		{"exp 1e309", rs(`{"alg":"RS256","kid":"rsa"}`, cl(`{"sub":"alice","aud":"api","exp":1e309}`), rsaPriv), ""},
		{"exp a string", rs(`{"alg":"RS256","kid":"rsa"}`, cl(`{"sub":"alice","aud":"api","exp":"`+itoa(exp)+`"}`), rsaPriv), ""},
		{"exp negative", rs(`{"alg":"RS256","kid":"rsa"}`, cl(`{"sub":"alice","aud":"api","exp":-1}`), rsaPriv), ""},
		{"exp with a fraction", rs(`{"alg":"RS256","kid":"rsa"}`, cl(`{"sub":"alice","aud":"api","exp":`+itoa(exp)+`.5}`), rsaPriv), "alice"},
		{"exp -1e300", rs(`{"alg":"RS256","kid":"rsa"}`, cl(`{"sub":"alice","aud":"api","exp":-1e300}`), rsaPriv), ""},
		{"nbf a minute ahead", rs(`{"alg":"RS256","kid":"rsa"}`, cl(`{"sub":"alice","aud":"api","nbf":`+itoa(now.Unix()+60)+`}`), rsaPriv), ""},
		{"aud of mixed types", rs(`{"alg":"RS256","kid":"rsa"}`, cl(`{"sub":"alice","aud":["api",1]}`), rsaPriv), ""},
		{"aud null", rs(`{"alg":"RS256","kid":"rsa"}`, cl(`{"sub":"alice","aud":null}`), rsaPriv), ""},
		{"aud in an array", rs(`{"alg":"RS256","kid":"rsa"}`, cl(`{"sub":"alice","aud":["other","api"],"exp":`+itoa(exp)+`}`), rsaPriv), "alice"},
		{"no exp", rs(`{"alg":"RS256","kid":"rsa"}`, cl(`{"sub":"alice","aud":"api"}`), rsaPriv), ""},
		{"exp null", rs(`{"alg":"RS256","kid":"rsa"}`, cl(`{"sub":"alice","aud":"api","exp":null}`), rsaPriv), ""},
		// Depth is bounded by the token's length (MaxTokenLen, 8192 by
		// default; raised here) and the decoder's own limit.
		{"claims nested 5000 deep", rs(`{"alg":"RS256","kid":"rsa"}`, cl(`{"sub":"alice","aud":"api","exp":`+itoa(exp)+`,"x":`+strings.Repeat("[", 5000)+strings.Repeat("]", 5000)+`}`), rsaPriv), "alice"},
		{"claims nested 20000 deep", rs(`{"alg":"RS256","kid":"rsa"}`, cl(`{"sub":"alice","aud":"api","x":`+strings.Repeat("[", 20000)+strings.Repeat("]", 20000)+`}`), rsaPriv), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := NewExtractor(Config{JWT: &JWTConfig{KeySet: set, Audience: "api", MaxTokenLen: 1 << 20}})
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
	if n := fetched.Load(); n != 0 {
		t.Errorf("a URL named by a token was fetched %d times", n)
	}
}

func itoa(n int64) string { return big.NewInt(n).String() }
