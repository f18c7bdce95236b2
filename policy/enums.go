package policy

import "strconv"

// The settings below that take one of a few names are compiled into typed
// values, so that the code using them switches over constants instead of
// comparing strings, and a name misspelled in code does not compile. Each
// marshals as its configuration name, for logs and JSON.

// OnError is what a store failure means for the request.
type OnError uint8

// The store.on_error values.
const (
	// OnErrorLocal decides with this node's own in-memory counters.
	OnErrorLocal OnError = iota + 1
	// OnErrorAllow forwards the request without rate-limit headers.
	OnErrorAllow
	// OnErrorDeny answers 503 with Retry-After.
	OnErrorDeny
)

var onErrorNames = [...]string{OnErrorLocal: "local", OnErrorAllow: "allow", OnErrorDeny: "deny"}

// String returns the configuration name of o ("local", "allow", "deny").
func (o OnError) String() string { return enumName(onErrorNames[:], int(o), "OnError") }

// MarshalText lets logs and JSON show the configuration name.
func (o OnError) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// Backend is the store.backend setting: where counters live.
type Backend uint8

// The store.backend values.
const (
	// BackendMemory keeps counters in this process.
	BackendMemory Backend = iota + 1
	// BackendRedis keeps counters in Redis, shared by a fleet.
	BackendRedis
)

var backendNames = [...]string{BackendMemory: "memory", BackendRedis: "redis"}

// String returns the configuration name of b ("memory", "redis").
func (b Backend) String() string { return enumName(backendNames[:], int(b), "Backend") }

// MarshalText lets logs and JSON show the configuration name.
func (b Backend) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// LogFormat is the access_log.format setting.
type LogFormat uint8

// The access_log.format values.
const (
	// LogJSONL writes one JSON object per line.
	LogJSONL LogFormat = iota + 1
	// LogCombined writes nginx's combined format with Tollgate's fields
	// appended.
	LogCombined
)

var logFormatNames = [...]string{LogJSONL: "jsonl", LogCombined: "combined"}

// String returns the configuration name of f ("jsonl", "combined").
func (f LogFormat) String() string { return enumName(logFormatNames[:], int(f), "LogFormat") }

// MarshalText lets logs and JSON show the configuration name.
func (f LogFormat) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// enumName returns names[i], or type(i) for a value without a name.
func enumName(names []string, i int, typ string) string {
	if i <= 0 || i >= len(names) {
		return typ + "(" + strconv.Itoa(i) + ")"
	}
	return names[i]
}
