// Command gateway is Tollgate: a reverse proxy with built-in rate limiting.
//
//	gateway [--config PATH]          serve (default PATH: ./gateway.toml)
//	gateway validate [--config PATH] check a config; exit 0 with a summary, or 2 with every problem
//	gateway version
//
// main only wires: it parses flags, loads the configuration, builds the
// store and the handler, and runs the servers until a signal stops them.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitInvalid = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

// run executes one command line and returns the process exit code.
func run(args, environ []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serveCommand(args, environ, stdout, stderr)
	case "validate":
		return validateCommand(args, environ, stdout, stderr)
	case "replay":
		return replayCommand(args, environ, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "gateway", versionString())
		return exitOK
	case "help":
		usage(stdout)
		return exitOK
	default:
		fmt.Fprintf(stderr, "gateway: unknown command %q\n", cmd)
		usage(stderr)
		return exitInvalid
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage:
  gateway [--config PATH]            serve (default PATH: ./gateway.toml)
  gateway validate [--config PATH]   check a config and print a summary or every problem
  gateway replay [--config PATH] --log FILE [--format combined|jsonl]   replay an access log through the limits
  gateway version                    print the version
`)
}

func versionString() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
		v += " " + bi.GoVersion
	}
	return v
}

// commonFlags are the flags every command that reads a config takes.
type commonFlags struct {
	config     string
	logLevel   string
	logFormat  string
	allowEmpty bool // serve and validate only; see addAllowEmpty
}

// addAllowEmpty registers --allow-empty, which accepts a configuration
// without routes (see requireRoutes).
func (f *commonFlags) addAllowEmpty(fs *flag.FlagSet) {
	fs.BoolVar(&f.allowEmpty, "allow-empty", false, "accept a configuration without routes (every request gets 404)")
}

// errNoRoutes is the problem of a configuration without routes.
var errNoRoutes = errors.New("routes: none defined, so every request would get 404 " +
	"(an empty or truncated file?); pass --allow-empty if that is intended")

// requireRoutes refuses a policy without routes unless allowEmpty: such a
// file is far more often an empty or cut-short write than an intent, and
// swapping it in would answer 404 to everything while /readyz says ready.
func requireRoutes(p *policy.Policy, allowEmpty bool) error {
	if len(p.Routes) == 0 && !allowEmpty {
		return errNoRoutes
	}
	return nil
}

func newFlagSet(name string, stderr io.Writer, f *commonFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.config, "config", "gateway.toml", "path of the TOML configuration")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&f.logFormat, "log-format", "json", "log format: json or text")
	return fs
}

func newLogger(w io.Writer, f *commonFlags) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f.logFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format: want json or text, got %q", f.logFormat)
	}
}

// validateCommand implements `gateway validate`.
func validateCommand(args, environ []string, stdout, stderr io.Writer) int {
	var f commonFlags
	fs := newFlagSet("validate", stderr, &f)
	f.addAllowEmpty(fs)
	if err := fs.Parse(args); err != nil {
		return exitInvalid
	}
	for _, w := range unknownEnv(environ) {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	p, err := loadPolicy(f.config, environ)
	if err == nil {
		err = requireRoutes(p, f.allowEmpty)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: invalid configuration:\n", f.config)
		for _, line := range problems(err) {
			fmt.Fprintf(stderr, "  %s\n", line)
		}
		return exitInvalid
	}
	fmt.Fprintf(stdout, "%s: OK: %d routes, %d limits, store %s\n", f.config, len(p.Routes), len(p.Limits), p.Store.Backend)
	for _, rt := range p.Routes {
		target := "respond"
		if rt.Respond == nil {
			target = rt.Upstream.Redacted()
		}
		names := make([]string, 0, len(rt.Limits))
		for _, l := range rt.Limits {
			names = append(names, l.Name)
		}
		fmt.Fprintf(stdout, "  route %q %s → %s limits=[%s]\n", rt.Name, rt.PathPrefix, target, strings.Join(names, ", "))
	}
	printMemory(stdout, p)
	return exitOK
}

// printMemory prints the memory store's bounds and, per limit, the most
// memory one key can take there, so an operator sees before starting
// what max_keys alone would hide (a fine-grained sliding counter or a
// large log takes kilobytes a key).
func printMemory(w io.Writer, p *policy.Policy) {
	maxBytes, how := p.Store.MemoryMaxBytes, ""
	if maxBytes == 0 {
		maxBytes, how = memstore.DefaultMaxBytes(), " (derived from this machine's memory)"
	}
	fmt.Fprintf(w, "  memory store: at most %d keys and %d bytes%s\n", p.Store.MemoryMaxKeys, maxBytes, how)
	for _, l := range p.Limits {
		kb := memstore.KeyBytes(l.Limit)
		fmt.Fprintf(w, "  limit %q %s: up to %d bytes a key at worst; max_bytes holds %d such keys\n",
			l.Name, l.Algorithm, kb, maxBytes/kb)
	}
}

// problems splits a joined error into one line per problem.
func problems(err error) []string {
	var lines []string
	for _, e := range flatten(err) {
		for _, l := range strings.Split(e.Error(), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) == 0 && err != nil {
		lines = append(lines, err.Error())
	}
	return lines
}

// loadPolicy reads, validates and compiles the configuration at path. Every
// problem is reported in one run: unknown keys, values of the wrong type
// and what the rest of the file means, except checks of a value that could
// not be decoded (its default stood in for it).
func loadPolicy(path string, environ []string) (*policy.Policy, error) {
	return compileFile(path, environ, os.ReadFile)
}

// compileFile is loadPolicy with the reader of the files a configuration
// names (key files) as a parameter.
func compileFile(path string, environ []string, readFile func(string) ([]byte, error)) (*policy.Policy, error) {
	cfg, err := loadConfig(path, environ)
	var dp *decodeProblems
	if err != nil && !errors.As(err, &dp) {
		return nil, err // unreadable, or not TOML
	}
	getenv := func(k string) string { return lookupEnv(environ, k) }
	p, cerr := policy.Compile(cfg, getenv, readFile)
	if dp == nil {
		if cerr != nil {
			return nil, cerr
		}
		return p, nil
	}
	errs := dp.errs
	for _, e := range flatten(cerr) {
		if path, _, ok := strings.Cut(e.Error(), ": "); !ok || !dp.covers(path) {
			errs = append(errs, e)
		}
	}
	return nil, errors.Join(errs...)
}

// flatten returns the leaves of a tree of joined errors, in order.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func lookupEnv(environ []string, key string) string {
	for i := len(environ) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(environ[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}
