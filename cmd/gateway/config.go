package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/viper"

	"github.com/tollgate/gateway/policy"
)

// envPrefix starts every environment override: TOLLGATE_ + the key path in
// upper case with "_" for ".", e.g. TOLLGATE_STORE_REDIS_URL.
const envPrefix = "TOLLGATE_"

// loadConfig reads the TOML file at path (once) and decodes it strictly on
// top of policy.Default(): unknown keys and values of the wrong type are
// errors reported with their field path, and every [[limits]] / [[routes]]
// entry starts from policy.DefaultLimit / policy.DefaultRoute. Every scalar
// or list key outside [[limits]] and [[routes]] may be overridden by an
// environment variable in environ (TOLLGATE_SERVER_LISTEN=...; lists are
// comma separated, an empty value is an empty list). The result is not
// validated; policy.Compile does that.
func loadConfig(path string, environ []string) (policy.Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return policy.Config{}, err
	}
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return policy.Config{}, tomlError(path, err)
	}
	var errs []error
	for _, o := range envOverrides(environ, &errs) {
		v.Set(o.key, o.value)
	}
	checkKeys(v.AllSettings(), reflect.TypeFor[policy.Config](), "", &errs)
	if len(errs) > 0 {
		return policy.Config{}, errors.Join(errs...)
	}

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
	}
	if err := v.UnmarshalExact(&cfg, strict); err != nil {
		return policy.Config{}, decodeErrors(err)
	}
	return cfg, nil
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
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		return fmt.Errorf("%s:%d:%d: %s", path, row, col, de.Error())
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

type override struct {
	key   string
	value any
}

// envOverrides converts the TOLLGATE_* variables of environ into typed
// values for their keys; a value that does not parse is an error naming
// the variable. Unknown TOLLGATE_* names are ignored (other tools may share
// the prefix).
func envOverrides(environ []string, errs *[]error) []override {
	env := map[string]string{}
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, envPrefix) {
			env[k] = val // later entries win, as in the process environment
		}
	}
	if len(env) == 0 {
		return nil
	}
	var out []override
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
			*errs = append(*errs, fmt.Errorf("%s (environment %s): invalid value %q", l.key, name, s))
			continue
		}
		out = append(out, override{l.key, val})
	}
	return out
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

// decodeErrors rewrites mapstructure's errors ("'limits[0].cost' expected
// type 'int64', got 'string'") as one "path: message" problem each.
func decodeErrors(err error) error {
	var lines []error
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, x := range j.Unwrap() {
				walk(x)
			}
			return
		}
		if de, ok := e.(*mapstructure.DecodeError); ok {
			lines = append(lines, fmt.Errorf("%s: %v", de.Name(), de.Unwrap()))
			return
		}
		if u := errors.Unwrap(e); u != nil {
			walk(u) // mapstructure's "decoding failed" header around the list
			return
		}
		for _, l := range strings.Split(e.Error(), "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "decoding failed") || strings.HasSuffix(l, "error(s):") {
				continue
			}
			if name, rest, ok := strings.Cut(strings.TrimPrefix(l, "* "), "' "); ok && strings.HasPrefix(name, "'") {
				l = strings.TrimPrefix(name, "'") + ": " + rest
			}
			lines = append(lines, errors.New(l))
		}
	}
	walk(err)
	if len(lines) == 0 {
		return err
	}
	slices.SortFunc(lines, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(lines...)
}
