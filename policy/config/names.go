package config

// The values of the settings that take one of a few names, in the order
// the JSON Schema lists them. Package policy compiles each name into a
// typed value (its String gives the name back); a test there keeps these
// lists and its own in step.

// BackendNames lists the store.backend values.
func BackendNames() []string { return []string{"memory", "redis"} }

// OnErrorNames lists the store.on_error values.
func OnErrorNames() []string { return []string{"local", "allow", "deny"} }

// LogFormatNames lists the access_log.format values.
func LogFormatNames() []string { return []string{"jsonl", "combined"} }

// BalanceNames are the values of a route's balance.
func BalanceNames() []string { return []string{"round_robin", "least_request", "hash"} }
