package policy

import (
	"os"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

// TestValidateHeaderRules: hostile header rules, each with the exact
// problem it must produce. Owned headers are refused in any spelling
// ('_' for '-', any case), on both sides; values cannot carry a line
// break; templates name only known fields.
func TestValidateHeaderRules(t *testing.T) {
	set := func(k, v string) func(c *config.Config) {
		return func(c *config.Config) {
			c.Routes[0].RequestHeaders = &config.HeaderRulesConfig{Set: map[string]string{k: v}}
		}
	}
	resp := func(rules config.HeaderRulesConfig) func(c *config.Config) {
		return func(c *config.Config) { c.Routes[0].ResponseHeaders = &rules }
	}
	remove := func(names ...string) func(c *config.Config) {
		return func(c *config.Config) {
			c.Routes[0].RequestHeaders = &config.HeaderRulesConfig{Remove: names}
		}
	}
	owned := `is a header the gateway owns: header rules cannot set, add or remove it`
	cases := []problemCase{
		{"plain", set("X-Gateway", "tollgate"), nil},
		{"templates", set("X-Who", "{client}/{consumer}/{plan}/{route}/{request_id}"), nil},
		{"literal braces", set("X-A", "{{json}} }}"), nil},
		{"empty value", set("X-A", ""), nil},
		{"tab", set("X-A", "a\tb"), nil},
		{"user header", func(c *config.Config) {
			c.Identity.UserHeader, c.Identity.TrustedProxies = "X-Auth-User", []string{"10.0.0.1"}
			c.Routes[0].RequestHeaders = &config.HeaderRulesConfig{Set: map[string]string{"x_auth_user": "root"}}
		}, []string{`routes[0].request_headers.set["x_auth_user"]: "x_auth_user" ` + owned}},
		{"consumer forward header", func(c *config.Config) {
			c.Consumers.ForwardHeaders.Plan = "X-Plan"
			c.Routes[0].RequestHeaders = &config.HeaderRulesConfig{Remove: []string{"X-PLAN"}}
		}, []string{`consumers.file: is required`, `routes[0].request_headers.remove["X-PLAN"]: "X-PLAN" ` + owned}},
		{"X-Real-IP", set("X-Real-IP", "1.2.3.4"), []string{`routes[0].request_headers.set["X-Real-IP"]: "X-Real-IP" ` + owned}},
		{"x_real_ip", set("x_real_ip", "1.2.3.4"), []string{`routes[0].request_headers.set["x_real_ip"]: "x_real_ip" ` + owned}},
		{"True-Client-IP", set("True-Client-IP", "1"), []string{`"True-Client-IP" ` + owned}},
		{"CF_Connecting_IP", set("CF_Connecting_IP", "1"), []string{`"CF_Connecting_IP" ` + owned}},
		{"X-Consumer-Id", set("x-consumer-id", "1"), []string{`"x-consumer-id" ` + owned}},
		{"X_Gateway_User", set("X_Gateway_User", "1"), []string{`"X_Gateway_User" ` + owned}},
		{"Forwarded", remove("Forwarded"), []string{`"Forwarded" ` + owned}},
		{"X_Forwarded_For", remove("X_Forwarded_For"), []string{`routes[0].request_headers.remove["X_Forwarded_For"]: "X_Forwarded_For" is a header the gateway owns (x-forwarded-*): header rules cannot set, add or remove it`}},
		{"X-Forwarded-Anything", set("X-Forwarded-Prefix", "/"), []string{`(x-forwarded-*)`}},
		{"X-Request-Id", set("X-Request-ID", "1"), []string{`"X-Request-ID" ` + owned}},
		{"Host", set("host", "internal"), []string{`"host" ` + owned}},
		{"Content-Length", set("Content-Length", "0"), []string{`"Content-Length" ` + owned}},
		{"Connection", set("Connection", "close"), []string{`"Connection" ` + owned}},
		{"Keep-Alive", remove("keep_alive"), []string{`"keep_alive" ` + owned}},
		{"Transfer-Encoding", set("Transfer-Encoding", "chunked"), []string{`"Transfer-Encoding" ` + owned}},
		{"TE", set("TE", "trailers"), []string{`"TE" ` + owned}},
		{"Trailer", set("Trailer", "X"), []string{`"Trailer" ` + owned}},
		{"Upgrade", set("Upgrade", "h2c"), []string{`"Upgrade" ` + owned}},
		{"Proxy-Connection", set("Proxy-Connection", "x"), []string{`(proxy-*)`}},
		{"Proxy-Authorization", remove("Proxy-Authorization"), []string{`(proxy-*)`}},
		{"RateLimit in a request", set("RateLimit", "x"), nil}, // a request's RateLimit is no answer of the gateway
		{"RateLimit in a response", resp(config.HeaderRulesConfig{Set: map[string]string{"RateLimit": "x"}}),
			[]string{`routes[0].response_headers.set["RateLimit"]: "RateLimit" is a rate-limit header the gateway owns: header rules cannot set, add or remove it`}},
		{"Retry_After", resp(config.HeaderRulesConfig{Remove: []string{"Retry_After"}}), []string{`"Retry_After" is a rate-limit header the gateway owns`}},
		{"X-RateLimit-Reset", resp(config.HeaderRulesConfig{Add: map[string]string{"x-ratelimit-reset": "0"}}), []string{`(x-ratelimit-*)`}},
		{"Access-Control without cors", resp(config.HeaderRulesConfig{Set: map[string]string{"Access-Control-Allow-Origin": "*"}}), nil},
		{"Access-Control with cors", func(c *config.Config) {
			c.Routes[0].CORS = &config.CORSConfig{Origins: []string{"https://a.example"}}
			c.Routes[0].ResponseHeaders = &config.HeaderRulesConfig{Set: map[string]string{"access_control_allow_origin": "*"}}
		}, []string{`"access_control_allow_origin" is a CORS header the gateway owns on a route with cors`}},
		{"CRLF", set("X-A", "a\r\nX-Injected: 1"), []string{`routes[0].request_headers.set["X-A"]: value holds the control byte '\r' at 1: a header value cannot hold CR, LF, NUL or other control bytes`}},
		{"LF", set("X-A", "a\nb"), []string{`control byte '\n'`}},
		{"NUL", set("X-A", "a\x00b"), []string{`control byte '\x00'`}},
		{"DEL", set("X-A", "a\x7fb"), []string{`control byte '\x7f'`}},
		{"space in name", set("X A", "v"), []string{`routes[0].request_headers.set["X A"]: invalid header name "X A"`}},
		{"colon in name", set("X-A:", "v"), []string{`invalid header name "X-A:"`}},
		{"CRLF in name", remove("X-A\r\nX-B"), []string{`invalid header name`}},
		{"empty name", remove(""), []string{`invalid header name ""`}},
		{"long name", set(strings.Repeat("x", 257), "v"), []string{`header name longer than 256 bytes`}},
		{"long value", set("X-A", strings.Repeat("v", 4097)), []string{`value longer than 4096 bytes`}},
		{"unknown field", set("X-A", "{api_key}"), []string{`routes[0].request_headers.set["X-A"]: unknown field {api_key}: want {client}, {consumer}, {plan}, {route} or {request_id} ('{{' for a literal brace)`}},
		{"empty field", set("X-A", "{}"), []string{`unknown field {}`}},
		{"unclosed", set("X-A", "{client"), []string{`unclosed '{' at 0`}},
		{"lone close", set("X-A", "a}b"), []string{`unmatched '}' at 1 (write '}}' for a literal brace)`}},
		{"remove twice", remove("X-A", "x-a"), []string{`routes[0].request_headers.remove["x-a"]: "x-a" is named twice (also in remove)`}},
		{"set and remove", func(c *config.Config) {
			c.Routes[0].RequestHeaders = &config.HeaderRulesConfig{Set: map[string]string{"X-A": "1"}, Remove: []string{"X-A"}}
		}, []string{`"X-A" is named twice (also in set)`}},
		{"too many", func(c *config.Config) {
			m := map[string]string{}
			for i := range 65 {
				m["X-"+strings.Repeat("a", i+1)] = "v"
			}
			c.Routes[0].RequestHeaders = &config.HeaderRulesConfig{Add: m}
		}, []string{`routes[0].request_headers.add: at most 64 headers, got 65`}},
		{"too many bytes", func(c *config.Config) {
			m := map[string]string{}
			for i := range 5 {
				m["X-"+strings.Repeat("a", i+1)] = strings.Repeat("v", 4000)
			}
			c.Routes[0].RequestHeaders = &config.HeaderRulesConfig{Set: m}
		}, []string{`routes[0].request_headers: names and values total 20025 bytes, at most 16384`}},
		{"negative body bound", func(c *config.Config) { c.Routes[0].MaxBodyBytes = -1 },
			[]string{`routes[0].max_body_bytes: must not be negative (0: server.max_body_bytes), got -1`}},
		{"negative server body bound", func(c *config.Config) { c.Server.MaxBodyBytes = -5 },
			[]string{`server.max_body_bytes: must not be negative (0: no bound), got -5`}},
	}
	testProblemsContain(t, cases)
}

// testProblemsContain runs each case on base(): validate must accept it
// when want is empty, else report one problem per want, each holding its
// text.
func testProblemsContain(t *testing.T, cases []problemCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.mutate(&c)
			err := validate(&c)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("validate() = nil, want %q", tt.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("%d problems, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("problem %q does not hold %q", lines[i], w)
				}
			}
		})
	}
}

// TestTemplateHostile: a field's value cannot end the header value or
// start another: whatever a JWT claim, a user header or a consumer name
// holds, the expansion is printable ASCII, with '%' escaped so that the
// escape is unambiguous.
func TestTemplateHostile(t *testing.T) {
	tpl, problem := parseTemplate("u={client};c={consumer};p={plan};id={request_id};r={route};{{}}", "api")
	if problem != "" {
		t.Fatal(problem)
	}
	for _, tc := range []struct{ value, want string }{
		{"alice", "alice"},
		{"a\r\nX-Injected: 1", "a%0D%0AX-Injected: 1"},
		{"nul\x00", "nul%00"},
		{"100%", "100%25"},
		{"caf\xc3\xa9", "caf%C3%A9"},
		{"del\x7f", "del%7F"},
		{"", ""},
	} {
		got := tpl.Expand(&TemplateValues{Client: tc.value, Consumer: tc.value, Plan: tc.value, RequestID: tc.value})
		want := "u=" + tc.want + ";c=" + tc.want + ";p=" + tc.want + ";id=" + tc.want + ";r=api;{}"
		if got != want {
			t.Errorf("value %q expanded to %q, want %q", tc.value, got, want)
		}
		for i := 0; i < len(got); i++ {
			if got[i] < 0x20 || got[i] >= 0x7f {
				t.Errorf("value %q: expansion holds byte %#x", tc.value, got[i])
			}
		}
	}
	static, _ := parseTemplate("{{route}} is {route}", "api")
	if static.Static == nil || static.Static[0] != "{route} is api" {
		t.Errorf("a template without per-request fields is not static: %+v", static)
	}
}

// TestCompileMaxBodyBytes: a route's own bound wins, else the server's.
func TestCompileMaxBodyBytes(t *testing.T) {
	c := base()
	c.Server.MaxBodyBytes = 1000
	c.Routes[0].MaxBodyBytes = 10
	p, err := Compile(c, noEnv, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	if p.Routes[0].MaxBodyBytes != 10 || p.Routes[1].MaxBodyBytes != 1000 {
		t.Fatalf("bounds %d, %d; want 10 (own), 1000 (server's)", p.Routes[0].MaxBodyBytes, p.Routes[1].MaxBodyBytes)
	}
}
