package keys

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestParseSource(t *testing.T) {
	for _, s := range []Source{SourceAPIKey, SourceUser, SourceIP} {
		got, err := ParseSource(s.String())
		if err != nil || got != s {
			t.Errorf("ParseSource(%q) = %v, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", "IP", "remote_addr", "client"} {
		if _, err := ParseSource(bad); err == nil {
			t.Errorf("ParseSource(%q) succeeded", bad)
		}
	}
}

func TestParsePart(t *testing.T) {
	tests := []struct{ in, want string }{
		{"client", "client"}, {"ip", "ip"}, {"api_key", "api_key"}, {"user", "user"},
		{"route", "route"}, {"method", "method"},
		{"header:X-Tenant", "header:X-Tenant"}, {"header:x-tenant", "header:X-Tenant"},
	}
	for _, tt := range tests {
		p, err := ParsePart(tt.in)
		if err != nil || p.String() != tt.want {
			t.Errorf("ParsePart(%q) = %v, %v; want %s", tt.in, p, err, tt.want)
		}
	}
	for _, bad := range []string{"", "Client", "header", "header:", "header:X Y", "header:a:b", "path"} {
		if p, err := ParsePart(bad); err == nil {
			t.Errorf("ParsePart(%q) = %v, want an error", bad, p)
		}
	}
}

func TestNewExtractorErrors(t *testing.T) {
	_, err := NewExtractor(Config{
		Sources:        []Source{SourceIP, SourceIP, SourceRemoteAddr},
		APIKeyHeader:   "X API",
		UserHeader:     "X-User",
		IPv6Prefix:     129,
		MaxValueLen:    -1,
		TrustedProxies: []netip.Prefix{{}},
	})
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{"sources[1]: duplicate", "sources[2]: invalid", "api_key_header", "user_header",
		"ipv6_prefix", "max_value_len", "trusted_proxies[0]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := NewExtractor(Config{}); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
}

func TestIdentifySources(t *testing.T) {
	def, err := NewExtractor(Config{APIKeyQuery: "api_key", UserHeader: "X-User", TrustedProxies: testTrusted})
	if err != nil {
		t.Fatal(err)
	}
	apiFirst, err := NewExtractor(Config{Sources: []Source{SourceAPIKey, SourceUser, SourceIP}, UserHeader: "X-User", TrustedProxies: testTrusted})
	if err != nil {
		t.Fatal(err)
	}
	ipFirst, err := NewExtractor(Config{Sources: []Source{SourceIP, SourceAPIKey}})
	if err != nil {
		t.Fatal(err)
	}
	userOnly, err := NewExtractor(Config{Sources: []Source{SourceUser}, UserHeader: "X-User", TrustedProxies: testTrusted})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		e        *Extractor
		remote   string
		url      string
		hdr      map[string]string
		kind     Source
		client   string
		apiKey   string
		oversize bool
	}{
		{"api key header", def, "203.0.113.1:1", "/", map[string]string{"X-API-Key": "k1"}, SourceAPIKey, "k1", "k1", false},
		{"api key header spaces trimmed", def, "203.0.113.1:1", "/", map[string]string{"X-API-Key": "  k1 "}, SourceAPIKey, "k1", "k1", false},
		{"api key header wins over query", def, "203.0.113.1:1", "/?api_key=q", map[string]string{"X-API-Key": "h"}, SourceAPIKey, "h", "h", false},
		{"api key query", def, "203.0.113.1:1", "/?a=1&api_key=q%7B1%7D&api_key=second", nil, SourceAPIKey, "q{1}", "q{1}", false},
		{"api key query escaped name", def, "203.0.113.1:1", "/?api%5Fkey=q2", nil, SourceAPIKey, "q2", "q2", false},
		{"api key query bad escape", def, "203.0.113.1:1", "/?api_key=%zz", nil, SourceIP, "203.0.113.1", "", false},
		{"api key query empty", def, "203.0.113.1:1", "/?api_key=", nil, SourceIP, "203.0.113.1", "", false},
		{"api key too long", def, "203.0.113.1:1", "/", map[string]string{"X-API-Key": strings.Repeat("k", 1025)}, SourceIP, "203.0.113.1", "", true},
		{"api key at the length cap", def, "203.0.113.1:1", "/", map[string]string{"X-API-Key": strings.Repeat("k", 1024)}, SourceAPIKey, strings.Repeat("k", 1024), strings.Repeat("k", 1024), false},
		{"api key query too long", def, "203.0.113.1:1", "/?api_key=" + strings.Repeat("%41", 2000), nil, SourceIP, "203.0.113.1", "", true},
		{"user from trusted proxy", def, "10.0.0.1:1", "/", map[string]string{"X-User": "u1"}, SourceUser, "u1", "", false},
		{"user from untrusted peer ignored", def, "203.0.113.1:1", "/", map[string]string{"X-User": "u1"}, SourceIP, "203.0.113.1", "", false},
		// The default order puts the verified user first: a made-up API key
		// must not turn a known user into a fresh client.
		{"user before api key by default", def, "10.0.0.1:1", "/", map[string]string{"X-User": "u1", "X-API-Key": "k"}, SourceUser, "u1", "k", false},
		{"api key when the user header comes from an untrusted peer", def, "203.0.113.1:1", "/", map[string]string{"X-User": "u1", "X-API-Key": "k"}, SourceAPIKey, "k", "k", false},
		{"api key first when configured so", apiFirst, "10.0.0.1:1", "/", map[string]string{"X-User": "u1", "X-API-Key": "k"}, SourceAPIKey, "k", "k", false},
		{"ip first", ipFirst, "203.0.113.1:1", "/", map[string]string{"X-API-Key": "k"}, SourceIP, "203.0.113.1", "k", false},
		{"only user, none: ip all the same", userOnly, "203.0.113.1:1", "/", nil, SourceIP, "203.0.113.1", "", false},
		{"only user, none, unix socket", userOnly, "@", "/", nil, SourceRemoteAddr, "@", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRequest(tt.remote)
			r.URL.RawQuery = strings.TrimPrefix(tt.url, "/?")
			if tt.url == "/" {
				r.URL.RawQuery = ""
			}
			for k, v := range tt.hdr {
				r.Header.Set(k, v)
			}
			id := tt.e.Identify(r, time.Time{})
			if id.ClientKind != tt.kind || id.Client != tt.client || id.APIKey != tt.apiKey || id.Oversize != tt.oversize {
				t.Fatalf("got %s %.20q apiKey %.20q oversize %v; want %s %.20q %.20q %v",
					id.ClientKind, id.Client, id.APIKey, id.Oversize, tt.kind, tt.client, tt.apiKey, tt.oversize)
			}
		})
	}
}

// checkKey fails unless key has the shape {TAG}HASH with only the
// characters [A-Za-z0-9_{}-].
func checkKey(t testing.TB, key []byte) {
	t.Helper()
	if len(key) != KeyLen || key[0] != '{' || key[23] != '}' {
		t.Fatalf("key %q: not {22}22", key)
	}
	for _, c := range key[1:23] {
		if !isKeyChar(c) {
			t.Fatalf("key %q: character %q", key, c)
		}
	}
	for _, c := range key[24:] {
		if !isKeyChar(c) {
			t.Fatalf("key %q: character %q", key, c)
		}
	}
}

func isKeyChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

func parts(t testing.TB, names ...string) []Part {
	t.Helper()
	ps := make([]Part, len(names))
	for i, n := range names {
		p, err := ParsePart(n)
		if err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	return ps
}

func TestAppendKeyTags(t *testing.T) {
	id := Identity{Client: "k1", ClientKind: SourceAPIKey, APIKey: "k1", IP: netip.MustParseAddr("1.2.3.4")}
	r := newTestRequest("1.2.3.4:1")
	a := appendKey(nil, parts(t, "client"), &id, r, "search")
	b := appendKey(nil, parts(t, "client", "route"), &id, r, "search")
	c := appendKey(nil, parts(t, "route", "client", "method"), &id, r, "search")
	d := appendKey(nil, parts(t, "api_key", "route"), &id, r, "search")
	shared := appendKey(nil, nil, &id, r, "search")
	for _, k := range [][]byte{a, b, c, d, shared} {
		checkKey(t, k)
	}
	if !bytes.Equal(a[:24], b[:24]) || !bytes.Equal(a[:24], c[:24]) {
		t.Errorf("limits of one client do not share a tag: %s %s %s", a, b, c)
	}
	if bytes.Equal(a, b) || bytes.Equal(b, c) {
		t.Errorf("different part lists share a key: %s %s %s", a, b, c)
	}
	if !bytes.Equal(d[1:23], d[24:]) || !bytes.Equal(shared[1:23], shared[24:]) {
		t.Errorf("without client the tag is not the hash: %s %s", d, shared)
	}
	other := Identity{Client: "k2", ClientKind: SourceAPIKey, APIKey: "k2"}
	if bytes.Equal(shared, appendKey(nil, nil, &other, newTestRequest("9.9.9.9:1"), "search")) == false {
		t.Error("no parts: the key is not one shared counter")
	}
	if bytes.Equal(a, appendKey(nil, parts(t, "client"), &other, r, "search")) {
		t.Error("two clients share a key")
	}
	// A client-controlled value cannot choose the tag: it is always ours.
	evil := Identity{Client: "{slot}x", ClientKind: SourceAPIKey, APIKey: "{slot}x"}
	k := appendKey([]byte("prefix:"), parts(t, "client"), &evil, r, "search")
	if !bytes.HasPrefix(k, []byte("prefix:{")) || bytes.Contains(k, []byte("slot")) {
		t.Errorf("key %q", k)
	}
	checkKey(t, k[len("prefix:"):])
}

// TestAppendKeyDistinct lists identities that must never share a key.
func TestAppendKeyDistinct(t *testing.T) {
	ip := netip.MustParseAddr("1.2.3.4")
	r := newTestRequest("1.2.3.4:1")
	keyOf := func(id Identity, by ...string) string {
		return string(appendKey(nil, parts(t, by...), &id, r, "route"))
	}
	pairs := []struct {
		name string
		a, b string
	}{
		{"api key equal to another client's IP text",
			keyOf(Identity{Client: "1.2.3.4", ClientKind: SourceAPIKey, APIKey: "1.2.3.4"}, "client"),
			keyOf(Identity{Client: "1.2.3.4", ClientKind: SourceIP, IP: ip}, "client")},
		{"api key equal to a user",
			keyOf(Identity{Client: "x", ClientKind: SourceAPIKey}, "client"),
			keyOf(Identity{Client: "x", ClientKind: SourceUser}, "client")},
		{"missing api key vs the key \"-\"",
			keyOf(Identity{IP: ip}, "api_key"),
			keyOf(Identity{IP: ip, APIKey: "-"}, "api_key")},
		{"missing api key vs missing user",
			keyOf(Identity{IP: ip}, "api_key"),
			keyOf(Identity{IP: ip}, "user")},
		{"unix-socket peer text vs api key of that text",
			keyOf(Identity{Client: "@", ClientKind: SourceRemoteAddr, Peer: "@"}, "client"),
			keyOf(Identity{Client: "@", ClientKind: SourceAPIKey, APIKey: "@"}, "client")},
		{"shifted boundary",
			keyOf(Identity{APIKey: "a:b", User: "c"}, "api_key", "user"),
			keyOf(Identity{APIKey: "a", User: "b:c"}, "api_key", "user")},
		{"swapped values",
			keyOf(Identity{APIKey: "a", User: "b"}, "api_key", "user"),
			keyOf(Identity{APIKey: "b", User: "a"}, "api_key", "user")},
		{"mapped IPv6 vs IPv4-embedded /64",
			keyOf(Identity{IP: netip.MustParseAddr("1.2.3.4")}, "ip"),
			keyOf(Identity{IP: netip.MustParseAddr("::1.2.3.4")}, "ip")},
	}
	for _, p := range pairs {
		if p.a == p.b {
			t.Errorf("%s: both %s", p.name, p.a)
		}
	}
}

// TestAppendKeyNoCollisions is a property test: random tuples of hostile
// values (separators, braces, NUL, non-UTF-8, empty = missing) map to
// distinct keys exactly when the tuples differ.
func TestAppendKeyNoCollisions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"", "a", "-", ":", "_", "{", "}", "\x00", "\xff", "é", ",", "1.2.3.4"}
	val := func() string {
		var sb strings.Builder
		for n := rng.IntN(4); n > 0; n-- {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return sb.String()
	}
	by := parts(t, "client", "api_key", "user", "route", "method", "header:X-Tenant")
	seen := map[string]string{}
	r := newTestRequest("1.2.3.4:1")
	for range 20000 {
		id := Identity{APIKey: val(), User: val(), ClientKind: Source(1 + rng.IntN(2))}
		if id.ClientKind == SourceAPIKey {
			id.Client = id.APIKey
		} else {
			id.Client = id.User
		}
		route, method, tenant := val(), val(), val()
		r.Method = method
		r.Header.Set("X-Tenant", tenant)
		if tenant == "" {
			r.Header.Del("X-Tenant")
		}
		if method == "" {
			method = "GET"
		}
		tuple := fmt.Sprintf("%q", []string{id.ClientKind.String(), id.Client, id.APIKey, id.User, route, method, tenant})
		key := string(appendKey(nil, by, &id, r, route))
		checkKey(t, []byte(key))
		if prev, ok := seen[key]; ok && prev != tuple {
			t.Fatalf("collision: %s and %s → %s", prev, tuple, key)
		}
		seen[key] = tuple
	}
	if len(seen) < 1000 {
		t.Fatalf("only %d distinct tuples generated", len(seen))
	}
}

func TestHashAPIKey(t *testing.T) {
	// The hash is built in a pooled scratch buffer: a longer key hashed in
	// between must not leak into the next hash of a shorter one.
	first := HashAPIKey("k1")
	_ = HashAPIKey(strings.Repeat("x", 300))
	if again := HashAPIKey("k1"); again != first {
		t.Fatal("HashAPIKey(k1) changed after another key was hashed: it is not a function of the key alone")
	}
	if first == HashAPIKey("k2") || HashAPIKey("") == HashAPIKey("-") {
		t.Fatal("HashAPIKey gives different keys the same hash")
	}
}

// crc16 is Redis Cluster's CRC16 (XMODEM), for slot computations.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slot is the Redis Cluster slot of key, honouring the first {hash tag}.
func slot(key []byte) uint16 {
	if i := bytes.IndexByte(key, '{'); i >= 0 {
		if j := bytes.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % 16384
}

// TestKeySlots checks that every key the builder emits for one
// client under parts that include the client lies in one slot, whatever the
// store prefix and limit suffix and however hostile the values.
func TestKeySlots(t *testing.T) {
	if crc16([]byte("123456789")) != 0x31C3 {
		t.Fatal("crc16 is not CRC16-XMODEM")
	}
	lists := [][]Part{
		parts(t, "client"),
		parts(t, "client", "route"),
		parts(t, "method", "client"),
		parts(t, "client", "ip", "api_key", "user", "header:X-Tenant"),
	}
	for _, client := range []string{"k", "{a}", "}{", "\x00\xff", strings.Repeat("{x}", 100)} {
		id := Identity{Client: client, ClientKind: SourceAPIKey, APIKey: client, IP: netip.MustParseAddr("2001:db8::1")}
		r := newTestRequest("[2001:db8::1]:1")
		r.Header.Set("X-Tenant", "{tenant}")
		want := -1
		for _, by := range lists {
			for _, route := range []string{"a", "{b}", ""} {
				key := appendKey([]byte("tollgate:"), by, &id, r, route)
				key = append(key, ":limitid"...)
				s := int(slot(key))
				if want == -1 {
					want = s
				} else if s != want {
					t.Fatalf("client %q: key %s in slot %d, others in %d", client, key, s, want)
				}
			}
		}
	}
}

// appendKey is AppendKey of an Extractor with the default settings, for the
// values of r and the route name route.
func appendKey(dst []byte, parts []Part, id *Identity, r *http.Request, route string) []byte {
	var e Extractor
	return e.AppendKey(dst, parts, id, &Values{Route: route, Method: r.Method, Header: r.Header})
}

// TestSourceOrderWarnings: an explicit order that lets a made-up API key
// win over a configured, verified user source is accepted but warned
// about; every other order is quiet.
func TestSourceOrderWarnings(t *testing.T) {
	jwt := &JWTConfig{Header: "Authorization", Claim: "sub"}
	tests := []struct {
		name string
		cfg  Config
		warn bool
	}{
		{"default order, user header", Config{UserHeader: "X-User"}, false},
		{"api key first, user header", Config{Sources: []Source{SourceAPIKey, SourceUser}, UserHeader: "X-User"}, true},
		{"api key first, jwt", Config{Sources: []Source{SourceAPIKey, SourceUser, SourceIP}, JWT: jwt}, true},
		{"api key first, user left out, jwt", Config{Sources: []Source{SourceAPIKey, SourceIP}, JWT: jwt}, true},
		{"api key first, no user source configured", Config{Sources: []Source{SourceAPIKey, SourceUser}}, false},
		{"user first", Config{Sources: []Source{SourceUser, SourceAPIKey}, UserHeader: "X-User"}, false},
		{"ip first", Config{Sources: []Source{SourceIP, SourceAPIKey, SourceUser}, UserHeader: "X-User"}, false},
	}
	for _, tt := range tests {
		if got := len(tt.cfg.Warnings()) > 0; got != tt.warn {
			t.Errorf("%s: warning %v, want %v (%q)", tt.name, got, tt.warn, tt.cfg.Warnings())
		}
	}
}

// TestExprPart: a key expression's value keys apart from every other part
// and value, a long value enters as its hash (two long values differ),
// and "expr" is no part a by list can name.
func TestExprPart(t *testing.T) {
	e, err := NewExtractor(Config{})
	if err != nil {
		t.Fatal(err)
	}
	id := &Identity{}
	parts := []Part{{Kind: PartExpr}}
	key := func(v string) string { return e.Key(parts, id, &Values{Expr: v}) }
	if a1, a2 := key("a"), key("a"); key("a") == key("b") || a1 != a2 {
		t.Fatal("values must key apart, and alike when equal")
	}
	long1, long2 := strings.Repeat("x", 100)+"1", strings.Repeat("x", 100)+"2"
	if key(long1) == key(long2) {
		t.Fatal("two long values share a key")
	}
	if e1, e2 := key(""), key(""); e1 != e2 || e1 == key("-") {
		t.Fatal("the empty value is the missing one, apart from a literal -")
	}
	hdr := e.Key([]Part{{Kind: PartHeader, Header: "X"}}, id, &Values{Header: http.Header{"X": {"a"}}})
	if hdr == key("a") {
		t.Fatal("an expression's value keys like a header's")
	}
	if _, err := ParsePart("expr"); err == nil {
		t.Fatal(`ParsePart("expr") = nil error, want unknown`)
	}
}
