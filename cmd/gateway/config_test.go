package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestGolden")

const goldenDir = "../../policy/testdata"

// TestGolden loads, validates and compiles every policy/testdata/*.toml and
// compares the outcome (a compile summary or every problem) with the .golden
// file beside it. Lines "# env: NAME=value" at the top of a .toml file are
// its environment. Run `go test ./cmd/gateway -run Golden -update` to
// regenerate the golden files after an intended change.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found %d golden configs in %s, want at least 10", len(files), goldenDir)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".toml")
		t.Run(name, func(t *testing.T) {
			got := goldenOutcome(t, file)
			golden := strings.TrimSuffix(file, ".toml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run: go test ./cmd/gateway -run Golden -update)", err)
			}
			if got != string(want) {
				t.Errorf("%s: outcome differs from %s\n--- got\n%s--- want\n%s", file, golden, got, want)
			}
		})
	}
}

// goldenOutcome runs one config through loadConfig and policy.Compile, as
// loadPolicy does.
func goldenOutcome(t *testing.T, file string) string {
	t.Helper()
	environ := fileEnv(t, file)
	readFile := func(p string) ([]byte, error) {
		if !filepath.IsAbs(p) {
			p = filepath.Join(goldenDir, p)
		}
		return os.ReadFile(p)
	}
	p, err := compileFile(file, environ, readFile)
	if err == nil {
		return "OK\n" + summary(p)
	}
	msg := strings.ReplaceAll(err.Error(), filepath.ToSlash(goldenDir)+"/", "")
	return "ERROR\n" + msg + "\n"
}

// fileEnv reads the "# env: NAME=value" lines at the top of file.
func fileEnv(t *testing.T, file string) []string {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var env []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if kv, ok := strings.CutPrefix(sc.Text(), "# env: "); ok {
			env = append(env, kv)
		}
	}
	return env
}

// summary renders a compiled policy as stable text.
func summary(p *policy.Policy) string {
	var b strings.Builder
	s := p.Server
	fmt.Fprintf(&b, "server listen=%s admin=%q read_header_timeout=%s idle=%s shutdown=%s max_header_bytes=%d\n",
		s.Listen, s.AdminListen, s.ReadHeaderTimeout, s.IdleTimeout, s.ShutdownTimeout, s.MaxHeaderBytes)
	st := p.Store
	fmt.Fprintf(&b, "store backend=%s on_error=%s timeout=%s clock=%s memory.max_keys=%d\n",
		st.Backend, st.OnError, st.Timeout, st.Clock, st.MemoryMaxKeys)
	if st.Backend == policy.BackendRedis {
		r := st.Redis
		fmt.Fprintf(&b, "  redis url=%q cluster=%v sentinel=%q%v prefix=%q username=%q password_set=%v\n",
			p.Config.Store.Redis.URL, r.Cluster, r.SentinelMaster, r.SentinelAddrs, r.Prefix, r.Username, r.Password != "")
	}
	id := p.Config.Identity
	fmt.Fprintf(&b, "identity sources=%v api_key_header=%s api_key_query=%q user_header=%q trusted_proxies=%v ipv6_prefix=%d jwt=%v\n",
		id.Sources, id.APIKeyHeader, id.APIKeyQuery, id.UserHeader, id.TrustedProxies, id.IPv6Prefix, id.JWT.Enabled())
	fmt.Fprintf(&b, "headers %v\n", p.Headers)
	for _, l := range p.Limits {
		mode := "enforce"
		if l.Shadow {
			mode = "shadow"
		}
		fmt.Fprintf(&b, "limit %s %s rates=%v burst=%d precision=%s max_in_flight=%d by=%v cost=%d cost_header=%q %s exempt_ips=%v exempt_keys=%d id=%s\n",
			l.Name, l.Algorithm, l.Rates, l.Burst, l.Precision, l.MaxInFlight, l.By, l.Cost, l.CostHeader, mode, l.ExemptIPs, l.ExemptKeys(), l.ID)
	}
	for _, rt := range p.Routes {
		target := "respond"
		if rt.Respond != nil {
			target = fmt.Sprintf("respond %d %q %q", rt.Respond.Status, rt.Respond.ContentType, rt.Respond.Body)
		} else {
			target = "upstream " + rt.Upstream.String()
		}
		names := make([]string, len(rt.Limits))
		for i, l := range rt.Limits {
			names[i] = l.Name
		}
		fmt.Fprintf(&b, "route %s host=%q prefix=%s methods=%v strip=%v timeout=%s %s limits=%v\n",
			rt.Name, rt.Host, rt.PathPrefix, rt.Methods, rt.StripPrefix, rt.Timeout, target, names)
		fmt.Fprintf(&b, "  RateLimit-Policy: %s\n", rt.RateLimitPolicy)
	}
	return b.String()
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gateway.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfigDefaults(t *testing.T) {
	path := writeConfig(t, `
[[limits]]
name = "l"
rates = ["1/s"]

[[routes]]
name = "r"
respond = { body = "x" }
`)
	cfg, err := loadConfig(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	l := config.DefaultLimit()
	l.Name, l.Rates = "l", []string{"1/s"}
	r := config.DefaultRoute()
	r.Name, r.Respond = "r", &config.RespondConfig{Body: "x"}
	want.Limits, want.Routes = []config.LimitConfig{l}, []config.RouteConfig{r}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("loadConfig =\n%+v\nwant\n%+v", cfg, want)
	}
}

func TestLoadConfigEnv(t *testing.T) {
	path := writeConfig(t, `
[server]
listen = "127.0.0.1:1"
[identity]
sources = ["api_key", "ip"]
`)
	environ := []string{
		"TOLLGATE_SERVER_LISTEN=0.0.0.0:8080",
		"TOLLGATE_SERVER_ADMIN_LISTEN=", // present and empty: disables
		"TOLLGATE_SERVER_MAX_HEADER_BYTES=4096",
		"TOLLGATE_STORE_BACKEND=redis",
		"TOLLGATE_STORE_REDIS_URL=redis://10.0.0.5:6379/0",
		"TOLLGATE_STORE_REDIS_SENTINEL_MASTER=m",
		"TOLLGATE_IDENTITY_SOURCES= ip , user ",
		"TOLLGATE_IDENTITY_JWT_CLAIM=uid",
		"TOLLGATE_HEADERS_EMIT=",
		"TOLLGATE_GATEWAY_LIMITS=a,b",
		"TOLLGATE_UNRELATED=1",
		"OTHER=2",
	}
	cfg, err := loadConfig(path, environ)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"server.listen", cfg.Server.Listen, "0.0.0.0:8080"},
		{"server.admin_listen", cfg.Server.AdminListen, ""},
		{"server.max_header_bytes", cfg.Server.MaxHeaderBytes, 4096},
		{"store.backend", cfg.Store.Backend, "redis"},
		{"store.redis.url", cfg.Store.Redis.URL.Reveal(), "redis://10.0.0.5:6379/0"},
		{"store.redis.sentinel.master", cfg.Store.Redis.Sentinel.Master, "m"},
		{"identity.sources", cfg.Identity.Sources, []string{"ip", "user"}},
		{"identity.jwt.claim", cfg.Identity.JWT.Claim, "uid"},
		{"identity.jwt.header", cfg.Identity.JWT.Header, "Authorization"},
		{"headers.emit", cfg.Headers.Emit, []string{}},
		{"gateway.limits", cfg.Gateway.Limits, []string{"a", "b"}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

// TestEnvLeaves checks that every scalar key outside the table arrays has
// an environment name, so that no key silently lacks an override.
func TestEnvLeaves(t *testing.T) {
	leaves := envLeaves(reflect.TypeFor[config.Config](), "")
	names := map[string]bool{}
	for _, l := range leaves {
		names[envName(l.key)] = true
	}
	for _, want := range []string{"TOLLGATE_STORE_BACKEND", "TOLLGATE_STORE_REDIS_URL", "TOLLGATE_SERVER_LISTEN",
		"TOLLGATE_STORE_MEMORY_MAX_KEYS", "TOLLGATE_STORE_REDIS_CLUSTER", "TOLLGATE_STORE_REDIS_SENTINEL_ADDRS",
		"TOLLGATE_IDENTITY_JWT_HS256_SECRET_ENV", "TOLLGATE_IDENTITY_TRUSTED_PROXIES", "TOLLGATE_HEADERS_EMIT",
		"TOLLGATE_GATEWAY_LIMITS", "TOLLGATE_STORE_REDIS_PASSWORD_ENV"} {
		if !names[want] {
			t.Errorf("no environment override %s", want)
		}
	}
	if len(leaves) < 30 {
		t.Errorf("only %d overridable keys", len(leaves))
	}
}

func TestLoadConfigErrors(t *testing.T) {
	tests := []struct {
		name, text string
		environ    []string
		want       string
	}{
		{"syntax", "[server\nlisten = 1", nil, ":1:"},
		{"unknown top-level", "[servr]\nlisten = \"x\"", nil, `servr: unknown key (did you mean "server"?)`},
		{"unknown in entry", "[[limits]]\nname = \"a\"\nrates = [\"1/s\"]\nalgoritm = \"gcra\"", nil, `limits[0].algoritm: unknown key (did you mean "algorithm"?)`},
		{"unknown in inline table", "[[routes]]\nname = \"a\"\nrespond = { stauts = 200 }", nil, `routes[0].respond.stauts: unknown key (did you mean "status"?)`},
		{"wrong type", "[server]\nmax_header_bytes = \"big\"", nil, `server.max_header_bytes: expected type 'int'`},
		{"bad env", "", []string{"TOLLGATE_STORE_MEMORY_MAX_KEYS=many"}, `store.memory.max_keys: invalid value "many" (environment TOLLGATE_STORE_MEMORY_MAX_KEYS)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(writeConfig(t, tt.text), tt.environ)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("loadConfig error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, err := loadConfig(filepath.Join(t.TempDir(), "missing.toml"), nil); err == nil {
		t.Error("missing file: no error")
	}
}

// TestUnknownEnvHostile: what the environment can hold, and what the
// warnings say. A known key is silent; an unknown TOLLGATE_* name is one
// warning however often it repeats, naming the key probably meant when one
// is close; a value (a password someone put in the wrong variable) is
// never echoed; names without the exact prefix are not ours.
func TestUnknownEnvHostile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		environ []string
		want    []string // one substring per expected warning, in order
	}{
		{"known key", []string{"TOLLGATE_SERVER_LISTEN=:1"}, nil},
		{"known key, empty value", []string{"TOLLGATE_SERVER_ADMIN_LISTEN="}, nil},
		{"guessed secret key", []string{"TOLLGATE_STORE_REDIS_PASSWORD=hunter2"},
			[]string{"TOLLGATE_STORE_REDIS_PASSWORD names no configuration key; ignored (did you mean TOLLGATE_STORE_REDIS_PASSWORD_ENV?)"}},
		{"typo", []string{"TOLLGATE_STORE_BAKCEND=redis"}, []string{"(did you mean TOLLGATE_STORE_BACKEND?)"}},
		{"nothing close", []string{"TOLLGATE_DEPLOYMENT_COLOR=blue"}, []string{"TOLLGATE_DEPLOYMENT_COLOR names no configuration key; ignored\n"}},
		{"repeated", []string{"TOLLGATE_X=1", "TOLLGATE_X=2", "TOLLGATE_X=3"}, []string{"TOLLGATE_X names"}},
		{"the bare prefix", []string{"TOLLGATE_=1"}, []string{"TOLLGATE_ names"}},
		{"table-array keys have no override", []string{"TOLLGATE_LIMITS_0_NAME=x"}, []string{"TOLLGATE_LIMITS_0_NAME names"}},
		{"other prefixes are not ours", []string{"tollgate_server_listen=:1", "TOLLGATEX=1", "XTOLLGATE_A=1", "OTHER=1"}, nil},
		{"no '=' at all", []string{"TOLLGATE_NOVALUE"}, []string{"TOLLGATE_NOVALUE names"}},
		{"a value with '=' and newlines", []string{"TOLLGATE_BOGUS=a=b\nc"}, []string{"TOLLGATE_BOGUS names"}},
		{"a very long name", []string{"TOLLGATE_" + strings.Repeat("A", 10000) + "=1"}, []string{"names no configuration key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := unknownEnv(tc.environ, nil)
			if len(got) != len(tc.want) {
				t.Fatalf("unknownEnv(%q) = %q, want %d warnings", tc.environ, got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i]+"\n", w) {
					t.Errorf("warning %q does not contain %q", got[i], w)
				}
			}
			for _, g := range got {
				for _, kv := range tc.environ {
					if _, v, ok := strings.Cut(kv, "="); ok && len(v) > 2 && strings.Contains(g, v) {
						t.Errorf("warning %q echoes the value %q", g, v)
					}
				}
			}
		})
	}
}
