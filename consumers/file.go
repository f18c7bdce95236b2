package consumers

import (
	"errors"
	"fmt"
	"slices"

	"github.com/pelletier/go-toml/v2"

	"github.com/tollgate/gateway/internal/tomlbound"
)

// File is a registry file as written: every [[consumers]] entry, in order.
// The toml tags name the keys for the registry's JSON Schema; Parse reads
// the same keys by hand to report every problem with its path.
type File struct {
	// Consumers are the [[consumers]] entries.
	Consumers []Entry `toml:"consumers"`
}

// Entry is one [[consumers]] entry of a registry file.
type Entry struct {
	// Name identifies the consumer in counter keys, logs and the admin
	// API: 1..64 letters, digits, '-', '_' and '.'. Required, unique.
	Name string `toml:"name"`
	// Plan is one of the configuration's [[plans]]; "" for none (the
	// limits' own rates).
	Plan string `toml:"plan"`
	// APIKeysSHA256 are the lower- or upper-case hex SHA-256 digests of
	// the consumer's API keys, so that no plaintext key sits in the file.
	APIKeysSHA256 []string `toml:"api_keys_sha256"`
	// APIKeysEnv names an environment variable holding keys, comma
	// separated.
	APIKeysEnv string `toml:"api_keys_env"`
	// APIKeysFile names a file holding keys, one a line (a mounted
	// Kubernetes secret); blank lines and lines starting with '#' are
	// skipped.
	APIKeysFile string `toml:"api_keys_file"`
	// Rates are the consumer's own rates per limit name, which beat its
	// plan's.
	Rates map[string][]string `toml:"rates"`
}

// MaxEntries bounds the key/value pairs, tables and array elements of a
// registry file: a million consumers with a few keys each. Its nesting
// depth and keys per table have the bounds of every TOML file the gateway
// reads (package internal/tomlbound).
const MaxEntries = 5_000_000

// entryKeys are the keys of an entry, for the unknown-key message.
var entryKeys = []string{"name", "plan", "api_keys_sha256", "api_keys_env", "api_keys_file", "rates"}

// Parse decodes a registry file. name prefixes every problem, which are
// all reported at once with their field paths, e.g.
// `consumers.toml: consumers[2].plan: must be a string`.
func Parse(name string, data []byte) (*File, error) {
	var doc map[string]any
	err := tomlbound.Check(data, tomlbound.Limits{Entries: MaxEntries})
	if err == nil {
		err = toml.Unmarshal(data, &doc)
	}
	if err != nil {
		var pe interface{ Position() (int, int) }
		if errors.As(err, &pe) {
			row, col := pe.Position()
			return nil, fmt.Errorf("%s:%d:%d: %s", name, row, col, err.Error())
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var e problems
	e.file = name
	f := &File{}
	for k, v := range doc {
		if k != "consumers" {
			e.add(k, "unknown key (the file holds [[consumers]] entries)")
			continue
		}
		list, ok := v.([]any)
		if !ok {
			e.add("consumers", "must be an array of tables ([[consumers]])")
			continue
		}
		for i, item := range list {
			f.Consumers = append(f.Consumers, parseEntry(item, fmt.Sprintf("consumers[%d]", i), &e))
		}
	}
	if len(e.errs) > 0 {
		return nil, errors.Join(e.errs...)
	}
	return f, nil
}

func parseEntry(item any, path string, e *problems) Entry {
	var en Entry
	m, ok := item.(map[string]any)
	if !ok {
		e.add(path, "must be a table")
		return en
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // problems in a stable order
	for _, k := range keys {
		v := m[k]
		p := path + "." + k
		switch k {
		case "name":
			en.Name = str(v, p, e)
		case "plan":
			en.Plan = str(v, p, e)
		case "api_keys_env":
			en.APIKeysEnv = str(v, p, e)
		case "api_keys_file":
			en.APIKeysFile = str(v, p, e)
		case "api_keys_sha256":
			en.APIKeysSHA256 = strs(v, p, e)
		case "rates":
			t, ok := v.(map[string]any)
			if !ok {
				e.add(p, "must be a table of limit names to rate lists")
				continue
			}
			en.Rates = make(map[string][]string, len(t))
			for name, rv := range t {
				en.Rates[name] = strs(rv, p+"."+name, e)
			}
		default:
			e.add(p, "unknown key (want one of %v)", entryKeys)
		}
	}
	return en
}

func str(v any, path string, e *problems) string {
	s, ok := v.(string)
	if !ok {
		e.add(path, "must be a string")
	}
	return s
}

func strs(v any, path string, e *problems) []string {
	list, ok := v.([]any)
	if !ok {
		e.add(path, "must be an array of strings")
		return nil
	}
	out := make([]string, 0, len(list))
	for i, x := range list {
		s, ok := x.(string)
		if !ok {
			e.add(fmt.Sprintf("%s[%d]", path, i), "must be a string")
			continue
		}
		out = append(out, s)
	}
	return out
}

// problems collects a registry's problems, each prefixed with the file's
// name and the field path.
type problems struct {
	file string
	errs []error
}

func (e *problems) add(path, format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf("%s: %s: %s", e.file, path, fmt.Sprintf(format, args...)))
}
