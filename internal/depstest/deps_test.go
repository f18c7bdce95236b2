// Package depstest keeps the module's import graph the shape STYLE.md
// describes ("Shape of the module"), the way the Go tree's
// src/go/build/deps_test.go does: each package's allowed imports are listed
// below as data, and a new edge fails the test until someone adds it here
// on purpose.
//
// Imports point down: cmd/gateway → proxy → (override →) policy → {keys,
// headers, ratelimit}; headers → ratelimit; stores → ratelimit. ratelimit and keys
// import only the standard library. Only cmd/gateway imports viper, the
// OpenTelemetry SDK and exporters, or calls the go-redis client
// constructors.
package depstest

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/tollgate/gateway"

// rule is what one package may import besides the standard library.
type rule struct {
	// allow lists module packages (relative to the module, e.g.
	// "ratelimit") and third-party import paths; an entry ending in "/..."
	// allows that path and everything below it.
	allow []string
	// stdDeny lists standard-library packages (or "/..." trees) this
	// package must not import.
	stdDeny []string
	// any marks the wiring package, which may import anything.
	any bool
}

// rules is the allowed import graph, one row per package of the module
// (non-test files only). A package without a row fails the test: add one.
var rules = map[string]rule{
	// The domain: rates, limits, algorithm math, the Store interface.
	// Standard library only, and nothing of HTTP.
	"ratelimit": {stdDeny: []string{"net/...", "log/..."}},
	// Identity extraction: standard library only.
	"keys": {},
	// The identity provider's key set (JWKS, OpenID Connect discovery):
	// fetched over HTTP and refreshed, so it is not in keys, which stays
	// pure. JWKs are parsed by go-jose (key material is security-sensitive
	// parsing); the fetch policy is its own.
	"jwks": {allow: []string{"keys", "internal/logthrottle", "github.com/go-jose/go-jose/v4"}},
	// Header formatting and problem bodies: pure functions of decisions.
	"headers": {allow: []string{"ratelimit"}},
	// A number at a JSON path read from a body or an event stream as it
	// passes (token budgets' usage and estimates): bytes in, standard
	// library only, nothing of HTTP.
	"costscan": {stdDeny: []string{"net/...", "log/..."}},
	// The consumer registry: its own file (TOML, decoded here because it
	// is not the configuration viper reads), compiled to a key → consumer
	// map. No HTTP.
	"consumers": {allow: []string{"keys", "ratelimit", "internal/tomlbound", "github.com/pelletier/go-toml/v2"}, stdDeny: []string{"net/...", "log/..."}},
	// The configuration file's schema: one struct per TOML table, its
	// defaults, the doc comments the JSON Schema is built from. It
	// declares and does not judge (no validation, no compilation).
	"policy/config": {allow: []string{"keys"}, stdDeny: []string{"net/http/...", "log/..."}},
	// Validation and compilation of a config.Config into the immutable
	// Policy, route matching (no viper: decoding happens in cmd/gateway).
	// policy/expr: limits' CEL expressions (when, key, cost_expr) with
	// cel-go, Google's implementation of the Common Expression Language
	// that Envoy and Kubernetes evaluate requests with: a checked,
	// non-Turing-complete language with a cost model, which a gateway
	// must not write its own of. Only policy (compiles) and proxy
	// (evaluates) import it.
	"policy/expr": {allow: []string{"github.com/google/cel-go/..."}, stdDeny: []string{"log/..."}},
	"policy":      {allow: []string{"policy/config", "policy/expr", "keys", "headers", "ratelimit", "consumers", "upstream", "rls/envoyconf", "adaptive", "costscan"}},
	// envoyproxy/ratelimit's YAML read and matched, its rules compiled to
	// limits: no gRPC, no HTTP. go.yaml.in/yaml/v3 parses the files as
	// node trees (aliases are walked by the package under its own node
	// budget, never expanded by the decoder).
	// structpb: a descriptor's metadata, compiled once into the form
	// dynamic_metadata answers with.
	"rls/envoyconf": {allow: []string{"ratelimit", "go.yaml.in/yaml/v3", "google.golang.org/protobuf/types/known/structpb"}, stdDeny: []string{"net/...", "log/..."}},
	// Envoy's rate limit service: the wire protocol's own protos
	// (go-control-plane), gRPC, the decision counter against the OTel API;
	// headers formats the IETF fields of an answer. Not the proxy.
	"rls": {allow: []string{"ratelimit", "headers", "rls/envoyconf",
		"github.com/envoyproxy/go-control-plane/envoy/config/core/v3",
		"github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3",
		"github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3",
		// the unit of a descriptor's own limit (RateLimitDescriptor.limit)
		"github.com/envoyproxy/go-control-plane/envoy/type/v3",
		"go.opentelemetry.io/otel/attribute", "go.opentelemetry.io/otel/metric",
		"google.golang.org/grpc", "google.golang.org/grpc/codes", "google.golang.org/grpc/status",
		"google.golang.org/protobuf/types/known/durationpb",
		// dynamic_metadata
		"google.golang.org/protobuf/types/known/structpb"}},
	// A route's targets at run time: balancing, health, DNS, retry budget.
	// It forwards nothing itself (package proxy does), so it needs no
	// more than the standard library.
	"upstream": {allow: []string{"internal/logthrottle"}},
	// The request path.
	"proxy": {allow: []string{"policy", "policy/expr", "override", "keys", "headers", "ratelimit", "upstream", "adaptive", "internal/logthrottle", "costscan"}},
	// Stores.
	// The algorithms' window states and the engine that applies them to a
	// key's windows: only stores and the exact-log referee (accuracy) see
	// them. It stays importable (not internal/) because accuracy, outside
	// ratelimit/, runs every algorithm's states; the rows here are what
	// keep everyone else out. A state's per-window math (allow, take,
	// remaining) is unexported: callers go through the engine.
	"ratelimit/window":   {allow: []string{"ratelimit"}, stdDeny: []string{"net/...", "log/..."}},
	"ratelimit/memstore": {allow: []string{"ratelimit", "ratelimit/window", "github.com/hashicorp/golang-lru/v2/..."}},
	"ratelimit/redisstore": {allow: []string{"ratelimit", "ratelimit/window", "github.com/redis/go-redis/v9",
		"github.com/hashicorp/golang-lru/v2/..."}},
	// Batched counting from leases, wrapping any store: no HTTP, no clock.
	"ratelimit/hybrid": {allow: []string{"ratelimit"}, stdDeny: []string{"net/...", "log/..."}},
	// The store conformance suite (linked only into tests).
	"ratelimit/storetest": {allow: []string{"ratelimit"}},
	// The JSON Schema of the configuration, generated from policy/config's
	// structs and checked against the shipped examples (not linked into
	// the gateway).
	"schema": {allow: []string{"policy/config", "ratelimit", "consumers", "github.com/pelletier/go-toml/v2", "github.com/santhosh-tekuri/jsonschema/v6"}},
	// Overrides of limits' numbers as a gateway holds them: its copy of
	// the store's table (Sync) and that table compiled against the policy
	// (Table), which the request path (proxy) and the admin API read.
	"override": {allow: []string{"policy", "keys", "ratelimit"}},
	// Admin API handlers.
	"listener": {allow: []string{"policy", "internal/regularfile"}},
	"admin":    {allow: []string{"policy", "override", "keys", "headers", "ratelimit", "topk"}},
	// Heavy-hitter sketches of limited clients; standard library only.
	"topk": {},
	// The adaptive concurrency limit: one gateway's limit learned from the
	// upstream's latency, priorities and the waiting room. Standard
	// library only, no HTTP, no clock of its own (time is a parameter).
	"adaptive": {stdDeny: []string{"net/...", "log/..."}},
	// Access log writer and parser (for replay).
	"accesslog": {},
	// The usage export: an Observer of the proxy's events aggregating the
	// units counted, posted to an HTTP sink by net/http. Standard library
	// otherwise: the Redis claim of threshold notices is an interface that
	// cmd/gateway implements with its client.
	"usage": {allow: []string{"proxy", "ratelimit", "internal/logthrottle"}},
	// Metrics and tracing against the OpenTelemetry API (the SDK is
	// wired in cmd/gateway).
	"telemetry": {allow: []string{"proxy", "ratelimit", "accesslog", "topk",
		"go.opentelemetry.io/otel/attribute", "go.opentelemetry.io/otel/codes",
		"go.opentelemetry.io/otel/metric", "go.opentelemetry.io/otel/propagation",
		"go.opentelemetry.io/otel/trace", "go.opentelemetry.io/otel/trace/noop"}},
	// SDK glue: telemetry's own histograms handed to the SDK's readers as
	// a metric producer. Imported by cmd/gateway only (and by tests and
	// benchmarks wiring the SDK as it does).
	"telemetry/sdkproducer": {allow: []string{"telemetry", "go.opentelemetry.io/otel/attribute",
		"go.opentelemetry.io/otel/sdk/instrumentation", "go.opentelemetry.io/otel/sdk/metric",
		"go.opentelemetry.io/otel/sdk/metric/metricdata"}},
	// Algorithm accuracy against an exact sliding log (replay, reports);
	// its Log type is the door replay keeps a key's exact log through.
	"accuracy": {allow: []string{"ratelimit", "ratelimit/window"}},
	// The accuracy report command.
	"cmd/accuracy": {allow: []string{"accuracy", "ratelimit"}},
	// Load generator driving gateway processes over HTTP.
	"bench/cmd/peerbench": {},
	// The floor of the gateway's stack, measured beside it: standard
	// library only.
	"bench/floor": {},
	// The cost of active health checks, measured from outside the
	// gateway (/proc): standard library only.
	"bench/healthcost": {},
	// The adaptive limit beside the best static one through the binary,
	// plotted with image/png: standard library only.
	"bench/adaptive": {},
	// The rate limit service's load loop: a gRPC client of the binary
	// (the service's own protos), CPU read from /proc.
	"bench/rlsload": {allow: []string{"github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3",
		"github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3", "google.golang.org/grpc",
		"google.golang.org/grpc/credentials/insecure", "google.golang.org/grpc/health/grpc_health_v1"}},
	// Soak and key-rotation load programs, and their out-of-process probe
	// (/proc and the admin listener).
	"bench/soak":       {allow: []string{"bench/soak/probe", "internal/testupstream"}},
	"bench/soak/probe": {},
	"bench/keyrot":     {allow: []string{"bench/soak/probe"}},
	// `gateway replay`: an access log through the configured limits on a
	// virtual clock, via the real handler and an in-memory store; the
	// log's rate limit service calls through the service's own decision
	// path (rls), rebuilt as the wire protocol's requests.
	"replay": {allow: []string{"accesslog", "accuracy", "consumers", "keys", "policy", "proxy", "ratelimit", "ratelimit/hybrid", "ratelimit/memstore",
		"rls", "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3",
		"github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3", "google.golang.org/protobuf/types/known/wrapperspb"}},
	// `gateway test`: cases files run through the real handler on a
	// memory store.
	"limittest": {allow: []string{"policy", "proxy", "ratelimit/memstore", "internal/tomlbound", "github.com/pelletier/go-toml/v2"}},
	// A candidate configuration beside the live one: its record and admin
	// endpoints (identities hashed as the access log hashes them).
	"candidate": {allow: []string{"accesslog", "policy", "proxy", "ratelimit"}},
	// Test support: compiled policies from the defaults.
	"internal/policytest": {allow: []string{"policy", "policy/config"}},
	// Test support: real redis-server processes.
	"internal/redistest": {allow: []string{"internal/childproc"}},
	// Test support: child processes that die with the test binary.
	"internal/childproc": {},
	// Reading a file a configuration names: regular files only, bounded.
	"internal/regularfile": {},
	// Throttled log lines (the request path's and the Redis client's):
	// standard library only.
	"internal/logthrottle": {},
	// Bounds on a TOML document's shape, checked before any decoder
	// sees it (the configuration, consumer registry and cases files).
	"internal/tomlbound": {allow: []string{"github.com/pelletier/go-toml/v2"}},
	// The collector's minimum heap: standard library only.
	"internal/gcpace": {},
	// Test support: the upstream tests and benchmarks put behind the gateway.
	"internal/testupstream": {},
	"internal/testcerts":    {},
	// Wiring: flags, viper, store construction, OTel SDK, signals.
	"cmd/gateway": {any: true},
}

// wiringOnly are import trees only cmd/gateway may depend on, directly or
// through any other package (sdkGlue excepted).
var wiringOnly = []string{
	"github.com/spf13/viper/...",
	"go.opentelemetry.io/otel/sdk/...",
	"go.opentelemetry.io/otel/exporters/...",
}

// sdkGlue are the packages besides cmd/gateway that may depend on the
// OpenTelemetry SDK: glue between telemetry and the SDK that cmd/gateway
// imports, kept out of it so that tests and benchmarks can wire the SDK as
// the gateway does.
var sdkGlue = []string{"telemetry/sdkproducer"}

// redisConstructors are the go-redis functions that build clients.
var redisConstructors = []string{"NewClient", "NewClusterClient", "NewFailoverClient",
	"NewFailoverClusterClient", "NewUniversalClient", "NewRing", "NewSentinelClient"}

// testOnly are module packages the gateway binary must never link.
var testOnly = []string{"ratelimit/storetest", "internal/redistest", "internal/childproc", "internal/testupstream", "internal/testcerts", "testing"}

// pkg is the part of `go list -json` this test reads.
type pkg struct {
	ImportPath string
	Dir        string
	Name       string
	GoFiles    []string
	Imports    []string
	Deps       []string
	Error      *struct{ Err string }
}

func matches(pattern, path string) bool {
	if p, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == p || strings.HasPrefix(path, p+"/")
	}
	return pattern == path
}

func matchesAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return matches(p, path) })
}

// isStd reports whether path is a standard-library import path: its first
// element has no dot.
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// rel is path relative to the module ("" for the module root), or path
// itself for a third-party import.
func rel(path string) string {
	if path == module {
		return ""
	}
	if r, ok := strings.CutPrefix(path, module+"/"); ok {
		return r
	}
	return path
}

func goList(t *testing.T, args ...string) []pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH (install Go from https://go.dev/dl/): %v", err)
	}
	cmd := exec.Command(goBin, append([]string{"list", "-e", "-json"}, args...)...)
	cmd.Dir = moduleRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}

// TestImports checks every direct import of every package against rules.
func TestImports(t *testing.T) {
	for _, p := range goList(t, "./...") {
		name := rel(p.ImportPath)
		if len(p.GoFiles) == 0 {
			continue // test-only directories (e2e, this one)
		}
		r, ok := rules[name]
		if !ok {
			t.Errorf("package %s has no row in rules; add one listing what it may import (imports: %s)",
				name, strings.Join(p.Imports, " "))
			continue
		}
		if r.any {
			continue
		}
		for _, imp := range p.Imports {
			if isStd(imp) {
				if matchesAny(r.stdDeny, imp) {
					t.Errorf("%s imports %s, which it must not (standard library denied: %v)", name, imp, r.stdDeny)
				}
				continue
			}
			if !matchesAny(r.allow, rel(imp)) {
				t.Errorf("new import edge %s → %s; allowed: %v (add it to rules only if it fits STYLE.md's shape)",
					name, rel(imp), r.allow)
			}
		}
	}
}

// TestWiringOnlyDependencies checks that no package but cmd/gateway
// depends on viper or the OpenTelemetry SDK, directly or transitively.
func TestWiringOnlyDependencies(t *testing.T) {
	for _, p := range goList(t, "./...") {
		name := rel(p.ImportPath)
		if name == "cmd/gateway" || len(p.GoFiles) == 0 {
			continue
		}
		for _, w := range wiringOnly {
			if slices.Contains(sdkGlue, name) && matches("go.opentelemetry.io/otel/sdk/...", w) {
				continue
			}
			for _, d := range p.Deps {
				if matches(w, d) {
					t.Errorf("%s depends on %s (%s); only cmd/gateway may (STYLE.md)", name, d, w)
					break
				}
			}
		}
	}
}

// TestBinaryLinksNoTestCode checks that the gateway binary links neither
// the testing package nor test-support packages.
func TestBinaryLinksNoTestCode(t *testing.T) {
	pkgs := goList(t, "./cmd/gateway")
	if len(pkgs) != 1 {
		t.Fatalf("go list ./cmd/gateway: %d packages", len(pkgs))
	}
	for _, d := range pkgs[0].Deps {
		if matchesAny(testOnly, rel(d)) {
			t.Errorf("cmd/gateway links %s", rel(d))
		}
	}
}

// TestRedisClientsBuiltOnlyInMain checks that only cmd/gateway calls the
// go-redis client constructors (outside test files): stores take a client
// they are given.
func TestRedisClientsBuiltOnlyInMain(t *testing.T) {
	fset := token.NewFileSet()
	for _, p := range goList(t, "./...") {
		name := rel(p.ImportPath)
		if name == "cmd/gateway" {
			continue
		}
		for _, f := range p.GoFiles {
			path := filepath.Join(p.Dir, f)
			file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Errorf("%s: %v", path, err)
				continue
			}
			local := ""
			for _, imp := range file.Imports {
				if ip, _ := strconv.Unquote(imp.Path.Value); ip == "github.com/redis/go-redis/v9" {
					local = "redis"
					if imp.Name != nil {
						local = imp.Name.Name
					}
				}
			}
			if local == "" {
				continue
			}
			ast.Inspect(file, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == local && slices.Contains(redisConstructors, sel.Sel.Name) {
					t.Errorf("%s: %s.%s: only cmd/gateway builds go-redis clients", fset.Position(sel.Pos()), local, sel.Sel.Name)
				}
				return true
			})
		}
	}
}

// TestRulesNotStale reports rows for packages that no longer exist, so the
// table stays true.
func TestRulesNotStale(t *testing.T) {
	have := map[string]bool{}
	for _, p := range goList(t, "./...") {
		if len(p.GoFiles) > 0 {
			have[rel(p.ImportPath)] = true
		}
	}
	var stale []string
	for name := range rules {
		if !have[name] {
			stale = append(stale, name)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("rules has rows for packages that do not exist: %v; remove them", stale)
	}
}
