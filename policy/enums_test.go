package policy

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

// TestEnumNamesMatchConfig: every name package config lists for the JSON
// Schema compiles, to a value whose String is that name, and every value
// policy has a name for is listed, in the same order (the schema's).
func TestEnumNamesMatchConfig(t *testing.T) {
	for _, tc := range []struct {
		setting string
		listed  []string
		table   []string
		set     func(c *config.Config, name string)
		got     func(p *Policy) fmt.Stringer
	}{
		{"store.backend", config.BackendNames(), backendNames[:],
			func(c *config.Config, n string) { c.Store.Backend = n },
			func(p *Policy) fmt.Stringer { return p.Store.Backend }},
		{"store.on_error", config.OnErrorNames(), onErrorNames[:],
			func(c *config.Config, n string) { c.Store.OnError = n },
			func(p *Policy) fmt.Stringer { return p.Store.OnError }},
		{"access_log.format", config.LogFormatNames(), logFormatNames[:],
			func(c *config.Config, n string) { c.AccessLog.Format = n },
			func(p *Policy) fmt.Stringer { return p.AccessLog.Format }},
	} {
		for _, n := range tc.listed {
			c := base()
			tc.set(&c, n)
			p, err := Compile(c, noEnv, os.ReadFile)
			if err != nil {
				t.Errorf("%s = %q: %v", tc.setting, n, err)
				continue
			}
			if got := tc.got(p).String(); got != n {
				t.Errorf("%s = %q compiles to %q", tc.setting, n, got)
			}
		}
		var named []string
		for _, n := range tc.table {
			if n != "" {
				named = append(named, n)
			}
		}
		if !slices.Equal(named, tc.listed) {
			t.Errorf("%s: policy names %q, config lists %q", tc.setting, named, tc.listed)
		}
	}
}
