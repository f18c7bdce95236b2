package policy

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/rls/envoyconf"
)

// TestCompileRLS: [rls] with its files read through readFile; problems
// named by the entry, the file and the YAML path.
func TestCompileRLS(t *testing.T) {
	files := map[string]string{
		"edge.yaml": "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
		"log.yaml":  "domain: logs\ndescriptors:\n  - key: user\n    algorithm: sliding_window_log\n    rate_limit: {unit: hour, requests_per_unit: 5000}\n",
	}
	big := make([]byte, envoyconf.MaxFileBytes) // one buffer for every big*.yaml
	read := func(name string) ([]byte, error) {
		if strings.HasPrefix(name, "big") {
			return big, nil
		}
		if s, ok := files[name]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	compile := func(mod func(*config.Config)) (*Policy, error) {
		c := config.Default()
		c.RLS = config.RLSConfig{Listen: "127.0.0.1:8081", EnvoyConfig: []string{"edge.yaml"}}
		mod(&c)
		return Compile(c, func(string) string { return "" }, read)
	}
	p, err := compile(func(*config.Config) {})
	if err != nil {
		t.Fatal(err)
	}
	if p.RLS == nil || p.RLS.Config.Domains() != 1 || p.RLSLimit("edge.remote_address") == nil || p.RLSLimit("edge.(request limit)") == nil ||
		len(p.RLSLimitNames()) != 2 || len(p.Routes) != 0 {
		t.Fatalf("compiled %+v", p.RLS)
	}
	cases := []struct {
		name string
		mod  func(*config.Config)
		want string
	}{
		{"no listen", func(c *config.Config) { c.RLS.Listen = "" }, "rls.listen: is required"},
		{"no files", func(c *config.Config) { c.RLS.EnvoyConfig = nil }, "rls.envoy_config: is required"},
		{"same as server", func(c *config.Config) { c.RLS.Listen = c.Server.Listen }, "rls.listen: must differ"},
		{"missing file", func(c *config.Config) { c.RLS.EnvoyConfig = []string{"nope.yaml"} }, "rls.envoy_config[0]: file does not exist"},
		{"bad pattern", func(c *config.Config) { c.RLS.EnvoyConfig = []string{"[.yaml"} }, "rls.envoy_config[0]: bad pattern"},
		{"tls without key", func(c *config.Config) { c.RLS.TLS.CertFile = "c.pem" }, "rls.tls.key_file: is required with cert_file"},
		// A rule's log on Redis is bounded as a limit's: a call decodes
		// the whole log while every other client of that Redis waits.
		{"long log on redis", func(c *config.Config) {
			c.Store.Backend = "redis"
			c.RLS.EnvoyConfig = []string{"log.yaml"}
		}, `rls.envoy_config: rule "logs.user": on the Redis store a sliding_window_log is decoded whole`},
		// 17 files of 4 MiB: reading stops past 64 MiB in all.
		{"64 MiB in all", func(c *config.Config) {
			c.RLS.EnvoyConfig = nil
			for i := range envoyconf.MaxTotalBytes/envoyconf.MaxFileBytes + 1 {
				c.RLS.EnvoyConfig = append(c.RLS.EnvoyConfig, fmt.Sprintf("big%d.yaml", i))
			}
		}, "rls.envoy_config[16]: more than 67108864 bytes in all files"},
	}
	if _, err := compile(func(c *config.Config) { c.RLS.EnvoyConfig = []string{"log.yaml"} }); err != nil {
		t.Fatalf("a long log on the memory store: %v", err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compile(tc.mod)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
