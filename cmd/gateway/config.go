package main

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/viper"

	"github.com/tollgate/gateway/internal/tomlbound"
	"github.com/tollgate/gateway/policy"
)

// envPrefix starts every environment override: TOLLGATE_ + the key path in
// upper case with "_" for ".", e.g. TOLLGATE_STORE_REDIS_URL.
const envPrefix = "TOLLGATE_"

// loadConfig reads the TOML file at path (once) and decodes it strictly on
// top of policy.Default(): unknown keys and values of the wrong type are
// problems reported with their field path, and every [[limits]] /
// [[routes]] entry starts from policy.DefaultLimit / policy.DefaultRoute.
// Every scalar or list key outside [[limits]] and [[routes]] may be
// overridden by an environment variable in environ
// (TOLLGATE_SERVER_LISTEN=...; lists are comma separated, an empty value is
// an empty list). The result is not validated; policy.Compile does that.
//
// A file that cannot be read or is not TOML is an error and nothing more.
// Otherwise every key problem is reported at once as a *decodeProblems,
// and the Config returned beside it holds everything that did decode (a
// field with a problem keeps its default), so that the caller can judge
// the rest of the file in the same run.
func loadConfig(path string, environ []string) (policy.Config, error) {
	data, err := readRegular(path)
	if err != nil {
		return policy.Config{}, err
	}
	return loadConfigData(path, data, environ)
}

// loadConfigData is loadConfig of a file's content; path names it in
// problems.
func loadConfigData(path string, data []byte, environ []string) (policy.Config, error) {
	// Bounded before viper and go-toml see it: both take time or memory
	// out of proportion to a deeply nested or huge document.
	if err := tomlbound.Check(data, tomlbound.Limits{}); err != nil {
		return policy.Config{}, tomlError(path, err)
	}
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return policy.Config{}, tomlError(path, err)
	}
	dp := &decodeProblems{}
	for _, o := range envOverrides(environ, dp) {
		v.Set(o.key, o.value)
	}
	var unknown []error
	checkKeys(v.AllSettings(), reflect.TypeFor[policy.Config](), "", &unknown)
	dp.errs = append(dp.errs, unknown...)

	cfg := policy.Default()
	if n := listLen(v.Get("limits")); n > 0 {
		cfg.Limits = make([]policy.LimitConfig, n)
		for i := range cfg.Limits {
			cfg.Limits[i] = policy.DefaultLimit()
		}
	}
	if n := listLen(v.Get("routes")); n > 0 {
		cfg.Routes = make([]policy.RouteConfig, n)
		for i := range cfg.Routes {
			cfg.Routes[i] = policy.DefaultRoute()
		}
	}
	strict := func(c *mapstructure.DecoderConfig) {
		c.WeaklyTypedInput = false  // TOML types are kept; env values are converted below
		c.DecodeHook = noFloatToInt // durations stay strings; no string-to-list splitting
		c.ErrorUnused = false       // unknown keys are reported by checkKeys, with suggestions
	}
	if err := v.Unmarshal(&cfg, strict); err != nil {
		for _, p := range decodeErrors(err) {
			dp.add(p.path, p.msg)
		}
	}
	if len(dp.errs) > 0 {
		return cfg, dp
	}
	return cfg, nil
}

// decodeProblems are the key problems of a configuration file: unknown
// keys, values of the wrong type, environment overrides that do not parse.
type decodeProblems struct {
	errs []error
	// paths are the field paths whose value could not be decoded: their
	// default stands in, so a later check of that field would judge a value
	// the file does not hold.
	paths []string
}

func (d *decodeProblems) add(path, msg string) {
	if path == "" {
		d.errs = append(d.errs, errors.New(msg))
		return
	}
	d.errs = append(d.errs, fmt.Errorf("%s: %s", path, msg))
	d.paths = append(d.paths, path)
}

func (d *decodeProblems) Error() string   { return errors.Join(d.errs...).Error() }
func (d *decodeProblems) Unwrap() []error { return d.errs }

// covers reports whether a problem at path is about a field whose value
// could not be decoded: the field itself, inside it, or an enclosing entry
// judged as a whole (limits[0] when limits[0].rates had the wrong type).
func (d *decodeProblems) covers(path string) bool {
	for _, p := range d.paths {
		if within(path, p) || within(p, path) {
			return true
		}
	}
	return false
}

// within reports whether path is p or lies inside it ("a.b[1].c" is within
// "a.b[1]" and "a.b", not within "a.bc").
func within(path, p string) bool {
	if !strings.HasPrefix(path, p) {
		return false
	}
	return len(path) == len(p) || path[len(p)] == '.' || path[len(p)] == '['
}

// noFloatToInt rejects a TOML float where an integer is expected, which
// mapstructure would otherwise truncate (cost = 1.5 becoming 1).
func noFloatToInt(from, to reflect.Type, data any) (any, error) {
	if from.Kind() == reflect.Float64 || from.Kind() == reflect.Float32 {
		switch to.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			return nil, fmt.Errorf("expected an integer, got %v", data)
		}
	}
	return data, nil
}

// tomlError formats a TOML syntax error as "path:line:column: message".
func tomlError(path string, err error) error {
	// go-toml's DecodeError, or tomlbound's refusal of the document.
	var de interface{ Position() (int, int) }
	if errors.As(err, &de) {
		row, col := de.Position()
		return fmt.Errorf("%s:%d:%d: %s", path, row, col, err.Error())
	}
	var se *toml.StrictMissingError
	if errors.As(err, &se) {
		return fmt.Errorf("%s: %s", path, se.Error())
	}
	return fmt.Errorf("%s: %w", path, err)
}

func listLen(x any) int {
	if l, ok := x.([]any); ok {
		return len(l)
	}
	if l, ok := x.([]map[string]any); ok {
		return len(l)
	}
	return 0
}

// leaf is a configuration key that an environment variable may set.
type leaf struct {
	key string
	typ reflect.Type
}

// envLeaves lists every scalar and scalar-list key of t under prefix;
// entries of table arrays ([[limits]], [[routes]]) have no fixed key and
// are left out.
func envLeaves(t reflect.Type, prefix string) []leaf {
	var out []leaf
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key := prefix + f.Tag.Get("mapstructure")
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Struct:
			out = append(out, envLeaves(ft, key+".")...)
		case ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			// per-entry tables: no environment override
		default:
			out = append(out, leaf{key, ft})
		}
	}
	return out
}

// envName is the environment variable that overrides key.
func envName(key string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// envValue is a configuration key's value given by its TOLLGATE_*
// variable.
type envValue struct {
	key   string
	value any
}

// envOverrides converts the TOLLGATE_* variables of environ into typed
// values for their keys; a value that does not parse is an error naming
// the variable. Unknown TOLLGATE_* names are left to unknownEnv.
func envOverrides(environ []string, dp *decodeProblems) []envValue {
	env := map[string]string{}
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, envPrefix) {
			env[k] = val // later entries win, as in the process environment
		}
	}
	if len(env) == 0 {
		return nil
	}
	var out []envValue
	for _, l := range envLeaves(reflect.TypeFor[policy.Config](), "") {
		name := envName(l.key)
		s, ok := env[name]
		if !ok {
			continue
		}
		var val any
		var err error
		switch l.typ.Kind() {
		case reflect.String:
			val = s
		case reflect.Int, reflect.Int64:
			val, err = strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		case reflect.Bool:
			val, err = strconv.ParseBool(strings.TrimSpace(s))
		case reflect.Slice:
			list := []any{}
			for _, item := range strings.Split(s, ",") {
				if item = strings.TrimSpace(item); item != "" {
					list = append(list, item)
				}
			}
			val = list
		default:
			err = fmt.Errorf("unsupported type %s", l.typ)
		}
		if err != nil {
			dp.add(l.key, fmt.Sprintf("invalid value %q (environment %s)", s, name))
			continue
		}
		out = append(out, envValue{l.key, val})
	}
	return out
}

// unknownEnv returns a warning for every TOLLGATE_* variable of environ
// that names no configuration key, with the name probably meant. They are
// warnings, not errors: the prefix is short enough that a deployment may
// set an unrelated TOLLGATE_* variable, and refusing to start over it would
// be worse than saying so; but a typo or a guessed key
// (TOLLGATE_STORE_REDIS_PASSWORD for password_env) must not pass in silence.
// A variable in named (see envNamed) holds a secret a setting names, such
// as token_env = "TOLLGATE_ADMIN_TOKEN", and is no typo.
func unknownEnv(environ []string, named map[string]bool) []string {
	known := map[string]bool{}
	for k := range named {
		known[k] = true
	}
	var names []string
	for _, l := range envLeaves(reflect.TypeFor[policy.Config](), "") {
		known[envName(l.key)] = true
		names = append(names, envName(l.key))
	}
	var out []string
	seen := map[string]bool{}
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, envPrefix) || known[k] || seen[k] {
			continue
		}
		seen[k] = true
		msg := fmt.Sprintf("environment %s names no configuration key; ignored", k)
		if s := closestEnv(k, names); s != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", s)
		}
		out = append(out, msg)
	}
	slices.Sort(out)
	return out
}

// envNamed returns the environment variables that the *_env settings of
// cfg (a configuration struct, walked through its structs, pointers,
// slices and maps) name: token_env, password_env, hs256_secret_env and the
// rest. Nil cfg names none.
func envNamed(cfg any) map[string]bool {
	named := map[string]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Slice, reflect.Array:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				walk(it.Value())
			}
		case reflect.Struct:
			t := v.Type()
			for i := 0; i < t.NumField(); i++ {
				f := t.Field(i)
				if !f.IsExported() {
					continue
				}
				tag, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
				if f.Type.Kind() == reflect.String && strings.HasSuffix(tag, "_env") {
					if s := v.Field(i).String(); s != "" {
						named[s] = true
					}
					continue
				}
				walk(v.Field(i))
			}
		}
	}
	if cfg != nil {
		walk(reflect.ValueOf(cfg))
	}
	return named
}

// policyEnvNamed is envNamed of p's configuration; none for a nil p (a
// configuration that did not load).
func policyEnvNamed(p *policy.Policy) map[string]bool {
	if p == nil {
		return nil
	}
	return envNamed(&p.Config)
}

// closestEnv returns the known variable name probably meant by k: within
// edit distance 3, or one that k starts (TOLLGATE_STORE_REDIS_PASSWORD for
// TOLLGATE_STORE_REDIS_PASSWORD_ENV); "" when none is close.
func closestEnv(k string, names []string) string {
	best, bestD := "", 4
	for _, n := range names {
		d := editDistance(k, n)
		if strings.HasPrefix(n, k+"_") {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// checkKeys reports every key of m that t has no field for, with its path
// and, when one is close, the key that was probably meant.
func checkKeys(m map[string]any, t reflect.Type, path string, errs *[]error) {
	fields := map[string]reflect.Type{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		tag := t.Field(i).Tag.Get("mapstructure")
		fields[tag] = t.Field(i).Type
		names = append(names, tag)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := k
		if path != "" {
			p = path + "." + k
		}
		ft, ok := fields[k]
		if !ok {
			msg := fmt.Sprintf("%s: unknown key", p)
			if s := closest(k, names); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			*errs = append(*errs, errors.New(msg))
			continue
		}
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch val := m[k].(type) {
		case map[string]any:
			if ft.Kind() == reflect.Struct {
				checkKeys(val, ft, p, errs)
			}
		case []any:
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
				for i, e := range val {
					if em, ok := e.(map[string]any); ok {
						checkKeys(em, ft.Elem(), fmt.Sprintf("%s[%d]", p, i), errs)
					}
				}
			}
		case []map[string]any:
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
				for i, em := range val {
					checkKeys(em, ft.Elem(), fmt.Sprintf("%s[%d]", p, i), errs)
				}
			}
		}
	}
}

// closest returns the name within edit distance 2 of s, or "".
func closest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// pathProblem is one problem with its field path.
type pathProblem struct{ path, msg string }

// decodeErrors rewrites mapstructure's errors ("'limits[0].cost' expected
// type 'int64', got 'string'") as one problem each, sorted by path.
func decodeErrors(err error) []pathProblem {
	var out []pathProblem
	for _, e := range flatten(err) {
		if de, ok := e.(*mapstructure.DecodeError); ok {
			out = append(out, pathProblem{de.Name(), de.Unwrap().Error()})
			continue
		}
		if u := errors.Unwrap(e); u != nil {
			out = append(out, decodeErrors(u)...) // mapstructure's "decoding failed" header around the list
			continue
		}
		for _, l := range strings.Split(e.Error(), "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "decoding failed") || strings.HasSuffix(l, "error(s):") {
				continue
			}
			p := pathProblem{msg: l}
			if name, rest, ok := strings.Cut(strings.TrimPrefix(l, "* "), "' "); ok && strings.HasPrefix(name, "'") {
				p = pathProblem{strings.TrimPrefix(name, "'"), rest}
			}
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		out = append(out, pathProblem{msg: err.Error()})
	}
	slices.SortFunc(out, func(a, b pathProblem) int { return strings.Compare(a.path, b.path) })
	return out
}
