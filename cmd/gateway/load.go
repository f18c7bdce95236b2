package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
)

// errNoRoutes is the problem of a configuration without routes.
var errNoRoutes = errors.New("routes: none defined, so every request would get 404 " +
	"(an empty or truncated file?); pass --allow-empty if that is intended")

// errNoConsumers is the problem of a consumer registry without consumers.
var errNoConsumers = errors.New("consumers.file: the registry holds no consumer, so every API key would be unknown " +
	"(an empty or truncated file?); pass --allow-empty if that is intended")

// requireRoutes refuses a policy without routes unless allowEmpty: such a
// file is far more often an empty or cut-short write than an intent, and
// swapping it in would answer 404 to everything while /readyz says ready.
// An empty consumer registry is refused alike: with unknown_api_key =
// "reject" it would answer 401 to every client with a key, and a registry
// written by a deploy pipeline or a secret manager is rewritten often.
func requireRoutes(p *policy.Policy, allowEmpty bool) error {
	if allowEmpty {
		return nil
	}
	if len(p.Routes) == 0 && p.RLS == nil {
		// A rate limit service alone is a deployment of its own.
		return errNoRoutes
	}
	if p.Consumers.Enabled() && p.Consumers.Registry != nil && p.Consumers.Registry.Len() == 0 {
		return errNoConsumers
	}
	return nil
}

// printProblems prints the problems of the invalid configuration at path,
// one a line, the way validate and replay report them.
func printProblems(w io.Writer, path string, err error) {
	fmt.Fprintf(w, "%s: invalid configuration:\n", path)
	for _, line := range problems(err) {
		fmt.Fprintf(w, "  %s\n", line)
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
	p, _, err := loadPolicyFiles(path, environ)
	return p, err
}

// loadPolicyFiles is loadPolicy that also returns the files the
// configuration named and its compile read (see fileReader).
func loadPolicyFiles(path string, environ []string) (*policy.Policy, map[string]bool, error) {
	var r fileReader
	p, err := compileFile(path, environ, r.ReadFile)
	return p, r.files(), err
}

// loadOfflinePolicy is loadPolicy for the commands that decide on a
// memory store of their own and serve nothing (test, replay): they read
// no admin token and no Redis password, so neither need be set where
// they run. Every secret that changes a decision (JWT keys, consumer and
// exempt API keys, the access log's salt) is read as serve reads it.
func loadOfflinePolicy(path string, environ []string) (*policy.Policy, error) {
	var r fileReader
	data, err := readRegular(path)
	if err != nil {
		return nil, err
	}
	return compileData(path, data, environ, r.ReadFile, offline)
}

// offline drops from a configuration what only a serving gateway uses:
// the admin listener and its token, and the Redis password (test and
// replay decide on a memory store of their own).
func offline(c *config.Config) {
	c.Server.AdminListen = ""
	c.Admin.TokenEnv, c.Admin.TokenFile = "", ""
	c.Store.Redis.PasswordEnv, c.Store.Redis.PasswordFile = "", ""
}

// compileFile is loadPolicy with the reader of the files a configuration
// names (key files) as a parameter.
func compileFile(path string, environ []string, readFile func(string) ([]byte, error)) (*policy.Policy, error) {
	data, err := readRegular(path)
	if err != nil {
		return nil, err
	}
	return compileData(path, data, environ, readFile, nil)
}

// compileData is compileFile of a file's content (a candidate posted to
// the admin API); path names it in problems and locates the files it
// names. adjust, when not nil, changes the decoded configuration before
// it is compiled.
func compileData(path string, data []byte, environ []string, readFile func(string) ([]byte, error), adjust func(*config.Config)) (*policy.Policy, error) {
	cfg, err := loadConfigData(path, data, environ)
	var dp *decodeProblems
	if err != nil && !errors.As(err, &dp) {
		return nil, err // unreadable, or not TOML
	}
	if adjust != nil {
		adjust(&cfg)
	}
	if f := cfg.Consumers.File; f != "" && !filepath.IsAbs(f) {
		// The registry sits beside the configuration that names it,
		// wherever the gateway was started from.
		cfg.Consumers.File = filepath.Join(filepath.Dir(path), f)
	}
	for i, f := range cfg.RLS.EnvoyConfig {
		if f != "" && !filepath.IsAbs(f) {
			cfg.RLS.EnvoyConfig[i] = filepath.Join(filepath.Dir(path), f)
		}
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
