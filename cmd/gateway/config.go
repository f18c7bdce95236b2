package main

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/viper"

	"github.com/tollgate/gateway/internal/tomlbound"
	"github.com/tollgate/gateway/policy/config"
)

// loadConfig reads the TOML file at path (once) and decodes it strictly on
// top of config.Default(): unknown keys and values of the wrong type are
// problems reported with their field path, and every [[limits]] /
// [[routes]] entry starts from config.DefaultLimit / config.DefaultRoute.
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
func loadConfig(path string, environ []string) (config.Config, error) {
	data, err := readRegular(path)
	if err != nil {
		return config.Config{}, err
	}
	return loadConfigData(path, data, environ)
}

// loadConfigData is loadConfig of a file's content; path names it in
// problems.
func loadConfigData(path string, data []byte, environ []string) (config.Config, error) {
	// Bounded before viper and go-toml see it: both take time or memory
	// out of proportion to a deeply nested or huge document.
	if err := tomlbound.Check(data, tomlbound.Limits{}); err != nil {
		return config.Config{}, tomlError(path, err)
	}
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return config.Config{}, tomlError(path, err)
	}
	dp := &decodeProblems{}
	for _, o := range envOverrides(environ, dp) {
		v.Set(o.key, o.value)
	}
	var unknown []error
	checkKeys(v.AllSettings(), reflect.TypeFor[config.Config](), "", &unknown)
	dp.errs = append(dp.errs, unknown...)

	cfg := config.Default()
	if n := listLen(v.Get("limits")); n > 0 {
		cfg.Limits = make([]config.LimitConfig, n)
		for i := range cfg.Limits {
			cfg.Limits[i] = config.DefaultLimit()
		}
	}
	if n := listLen(v.Get("routes")); n > 0 {
		cfg.Routes = make([]config.RouteConfig, n)
		for i := range cfg.Routes {
			cfg.Routes[i] = config.DefaultRoute()
		}
	}
	strict := func(c *mapstructure.DecoderConfig) {
		c.WeaklyTypedInput = false // TOML types are kept; env values are converted below
		// Durations stay strings; no string-to-list splitting.
		c.DecodeHook = mapstructure.ComposeDecodeHookFunc(noFloatToInt, targetHook)
		c.ErrorUnused = false // unknown keys are reported by checkKeys, with suggestions
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

func (d *decodeProblems) Error() string { return errors.Join(d.errs...).Error() }

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

// targetHook decodes an entry of a route's upstreams: a URL string is the
// table { url = "...", weight = 1 }, and a table without a weight has
// weight 1 (so that an explicit weight = 0 is refused, not taken for 1).
func targetHook(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[config.TargetConfig]() {
		return data, nil
	}
	switch v := data.(type) {
	case string:
		return map[string]any{"url": v, "weight": 1}, nil
	case map[string]any:
		if _, ok := v["weight"]; !ok {
			m := make(map[string]any, len(v)+1)
			for k, x := range v {
				m[k] = x
			}
			m["weight"] = 1
			return m, nil
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
			msg := de.Unwrap().Error()
			if strings.Contains(msg, "expected type 'string'") && strings.Contains(msg, "type 'map[string]interface {}'") {
				// X.Foo = "1" among header rules: TOML reads an unquoted
				// dotted key as nested tables, which says nothing to
				// someone who wrote a header name.
				msg = "a table where a string was expected: a key holding '.' must be quoted (\"X.Foo\" = \"…\"), since TOML reads each unquoted '.' as a nested table"
			}
			out = append(out, pathProblem{de.Name(), msg})
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
