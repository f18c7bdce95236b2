package accesslog

import (
	"strings"
	"testing"
)

// TestPlainCombined: a combined line without Tollgate's identity fields is
// read as nginx and Apache write it — the first field is the client
// address — while a Tollgate line keeps the identity its fields name,
// whatever its first field says.
func TestPlainCombined(t *testing.T) {
	tests := []struct {
		name, line       string
		ip, client, path string
		kind             string
	}{
		{"nginx default", `10.0.0.1 - - [24/Nov/2026:22:12:00 +0000] "GET /api/items/7 HTTP/1.1" 200 3 "https://example.com/" "curl/7.88.1"`,
			"10.0.0.1", "10.0.0.1", "/api/items/7", ""},
		{"nginx IPv6 and \\x22 escapes", `2001:db8::7 - bob [24/Nov/2026:22:12:00 +0000] "GET /a HTTP/1.1" 200 3 "-" "Mozilla \x22x\x22"`,
			"2001:db8::7", "2001:db8::7", "/a", ""},
		{"query left out of the path", `10.0.0.2 - - [24/Nov/2026:22:11:59 +0000] "GET /api/items?page=1&k=v HTTP/1.1" 200 3 "-" "-"`,
			"10.0.0.2", "10.0.0.2", "/api/items", ""},
		{"escaped ? stays in the path", `10.0.0.2 - - [24/Nov/2026:22:11:59 +0000] "GET /a%3Fb?q HTTP/1.1" 200 3 "-" "-"`,
			"10.0.0.2", "10.0.0.2", "/a?b", ""},
		{"Apache common, no referer or agent", `192.0.2.5 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326`,
			"192.0.2.5", "192.0.2.5", "/apache_pb.gif", ""},
		{"hostname as client (HostnameLookups)", `client.example.net - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 1`,
			"client.example.net", "client.example.net", "/", ""},
		{"Tollgate fields other than identity", `10.0.0.3 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 1 "-" "-" route=r latency=0.5`,
			"10.0.0.3", "10.0.0.3", "/", ""},
		// Tollgate lines: the first field is the (hashed) client, never an address.
		{"Tollgate line, hashed", `AAAAAAAAAAAAAAAA - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 1 "-" "-" route=r kind=ip key=- ip=AAAAAAAAAAAAAAAA`,
			"AAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAA", "/", "ip"},
		{"Tollgate line, API key client, no IP", `k-1 - - [10/Oct/2000:13:55:36 -0700] "GET /x?y HTTP/1.0" 200 1 "-" "-" kind=api_key key=HHHH ip=-`,
			"", "k-1", "/x?y", "api_key"},
		{"Tollgate line, anonymous", `- - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 1 "-" "-" kind=- key=- ip=-`,
			"", "", "/", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewParser(strings.NewReader(tc.line+"\n"), Combined)
			if !p.Next() {
				t.Fatalf("line not read: %v", p.Malformed())
			}
			e := p.Entry()
			if e.IP != tc.ip || e.Client != tc.client || e.Path != tc.path || e.ClientKind != tc.kind {
				t.Errorf("ip %q client %q path %q kind %q, want %q %q %q %q",
					e.IP, e.Client, e.Path, e.ClientKind, tc.ip, tc.client, tc.path, tc.kind)
			}
		})
	}
}
