package consumers

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/ratelimit"
)

// Options are what a registry is checked against and where its keys come
// from.
type Options struct {
	// Plans are the configured plan names, in order (PlanIndex counts from
	// one in it).
	Plans []string
	// Limits are the configured limit names: a consumer's rates may name
	// only these.
	Limits []string
	// Getenv reads api_keys_env variables.
	Getenv func(string) string
	// ReadFile reads api_keys_file files.
	ReadFile func(string) ([]byte, error)
}

// maxKeyLen bounds a plaintext key from an environment variable or a key
// file, the most identity reads (identity.max_value_len's largest value).
const maxKeyLen = keys.MaxValueLen

// Compile checks f and builds its Registry. Every problem is reported at
// once, prefixed with name and its field path: a missing or repeated
// name, an unknown plan, rates for a limit that does not exist or that do
// not parse, a malformed hash, a key that two consumers (or one twice)
// list, an empty or unreadable key source.
func Compile(name string, f *File, o Options) (*Registry, error) {
	e := problems{file: name}
	plans := make(map[string]int, len(o.Plans))
	for i, p := range o.Plans {
		plans[p] = i + 1
	}
	limits := make(map[string]bool, len(o.Limits))
	for _, l := range o.Limits {
		limits[l] = true
	}
	r := &Registry{
		byKey:  make(map[[sha256.Size]byte]*keys.Consumer, len(f.Consumers)),
		byName: make(map[string]*Consumer, len(f.Consumers)),
		list:   make([]*Consumer, 0, len(f.Consumers)),
	}
	// where names the field that registered each key first, for the
	// message about its second owner.
	where := make(map[[sha256.Size]byte]string, len(f.Consumers))
	for i := range f.Consumers {
		en := &f.Consumers[i]
		path := fmt.Sprintf("consumers[%d]", i)
		c := &Consumer{Consumer: keys.Consumer{Name: en.Name, Plan: en.Plan}, Path: name + ": " + path}
		switch {
		case en.Name == "":
			e.add(path+".name", "is required")
		case !validName(en.Name):
			e.add(path+".name", "invalid name %q (1..64 letters, digits, '-', '_' and '.')", en.Name)
		case r.byName[en.Name] != nil:
			e.add(path+".name", "duplicate consumer name %q (also %s)", en.Name, strings.TrimPrefix(r.byName[en.Name].Path, name+": "))
		default:
			r.byName[en.Name] = c
		}
		if en.Plan != "" {
			c.PlanIndex = plans[en.Plan]
			if c.PlanIndex == 0 {
				e.add(path+".plan", "unknown plan %q (want one of the [[plans]]: %s)", en.Plan, strings.Join(o.Plans, ", "))
			}
		}
		add := func(sum [sha256.Size]byte, field string) {
			if prev, dup := where[sum]; dup {
				e.add(field, "key already belongs to %s", prev)
				return
			}
			where[sum] = fmt.Sprintf("consumer %q (%s)", en.Name, field)
			r.byKey[sum] = &c.Consumer
		}
		n := 0
		for k, h := range en.APIKeysSHA256 {
			field := fmt.Sprintf("%s.api_keys_sha256[%d]", path, k)
			sum, err := parseSum(h)
			if err != nil {
				e.add(field, "%v", err)
				continue
			}
			add(sum, field)
			n++
		}
		if en.APIKeysEnv != "" {
			field := path + ".api_keys_env"
			ks, err := envKeys(en.APIKeysEnv, o.Getenv)
			if err != nil {
				e.add(field, "%v", err)
			}
			for _, k := range ks {
				add(sha256.Sum256([]byte(k)), field)
				n++
			}
		}
		if en.APIKeysFile != "" {
			field := path + ".api_keys_file"
			kf := en.APIKeysFile
			if !filepath.IsAbs(kf) {
				kf = filepath.Join(filepath.Dir(name), kf) // beside the registry
			}
			ks, err := fileKeys(kf, o.ReadFile)
			if err != nil {
				e.add(field, "%v", err)
			}
			for _, k := range ks {
				add(sha256.Sum256([]byte(k)), field)
				n++
			}
		}
		if n == 0 && len(en.APIKeysSHA256) == 0 && en.APIKeysEnv == "" && en.APIKeysFile == "" {
			e.add(path, "no keys: set api_keys_sha256, api_keys_env or api_keys_file")
		}
		names := make([]string, 0, len(en.Rates))
		for limit := range en.Rates {
			names = append(names, limit)
		}
		slices.Sort(names) // problems in a stable order
		for _, limit := range names {
			rates := en.Rates[limit]
			field := path + ".rates." + limit
			if !limits[limit] {
				e.add(field, "unknown limit %q", limit)
				continue
			}
			if len(rates) == 0 {
				e.add(field, "at least one rate is required")
				continue
			}
			var rs []ratelimit.Rate
			for k, s := range rates {
				rt, err := ratelimit.ParseRate(s)
				if err != nil {
					e.add(fmt.Sprintf("%s[%d]", field, k), "%v", err)
					continue
				}
				rs = append(rs, rt)
			}
			if len(rs) == len(rates) {
				if c.Rates == nil {
					c.Rates = make(map[string][]ratelimit.Rate, len(en.Rates))
				}
				c.Rates[limit] = rs
			}
		}
		c.Custom = len(c.Rates) > 0
		r.list = append(r.list, c)
	}
	if len(e.errs) > 0 {
		return nil, errors.Join(e.errs...)
	}
	return r, nil
}

// parseSum parses a hex SHA-256 digest.
func parseSum(h string) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	if len(h) != 2*sha256.Size {
		return sum, fmt.Errorf("malformed SHA-256 %q: want 64 hex digits, got %d characters", clip(h), len(h))
	}
	if _, err := hex.Decode(sum[:], []byte(h)); err != nil {
		return sum, fmt.Errorf("malformed SHA-256 %q: not hex", clip(h))
	}
	return sum, nil
}

// clip bounds a value quoted in a message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// validName reports whether s is 1..64 letters, digits, '-', '_' or '.':
// a consumer's name goes into logs and headers as it is.
func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
