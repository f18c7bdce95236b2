package main

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/policy/config"
)

// envPrefix starts every environment override: TOLLGATE_ + the key path in
// upper case with "_" for ".", e.g. TOLLGATE_STORE_REDIS_URL.
const envPrefix = "TOLLGATE_"

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

// envOverride is one configuration key set by a TOLLGATE_* variable.
type envOverride struct {
	key   string
	value any
}

// envOverrides converts the TOLLGATE_* variables of environ into typed
// values for their keys; a value that does not parse is an error naming
// the variable. Unknown TOLLGATE_* names are left to unknownEnv.
func envOverrides(environ []string, dp *decodeProblems) []envOverride {
	env := map[string]string{}
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, envPrefix) {
			env[k] = val // later entries win, as in the process environment
		}
	}
	if len(env) == 0 {
		return nil
	}
	var out []envOverride
	for _, l := range envLeaves(reflect.TypeFor[config.Config](), "") {
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
		out = append(out, envOverride{l.key, val})
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
	for _, l := range envLeaves(reflect.TypeFor[config.Config](), "") {
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
