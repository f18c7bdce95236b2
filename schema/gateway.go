package schema

import (
	"reflect"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// GatewayFile is the name of gateway.toml's schema in this directory.
const GatewayFile = "gateway.schema.json"

// Gateway returns the schema of gateway.toml, with descriptions from the
// doc comments of package config's sources in configDir (policy/config).
func Gateway(configDir string) ([]byte, error) {
	docs, err := DocsFromSource(configDir)
	if err != nil {
		return nil, err
	}
	var algs []string
	for _, a := range ratelimit.Algorithms() {
		algs = append(algs, a.String())
	}
	return Generate(reflect.TypeFor[config.Config](), Options{
		ID:    "https://tollgate.dev/schema/" + GatewayFile,
		Title: "Tollgate gateway configuration (gateway.toml)",
		Docs:  docs,
		Enums: map[string][]string{
			"limits[].algorithm": algs,
			"limits[].count":     {"request", "response"},
			"limits[].on_limit":  {"reject", "delay"},
			"store.backend":      config.BackendNames(),
			"store.on_error":     config.OnErrorNames(),
			"access_log.format":  config.LogFormatNames(),
			"routes[].balance":   config.BalanceNames(),
		},
		OrString: map[string]bool{"routes[].upstreams[]": true},
	})
}
