package consumers

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestParseProblems: a registry file that decodes as TOML but not as a
// registry names each problem with the file and field path.
func TestParseProblems(t *testing.T) {
	for _, tc := range []struct{ name, file, want string }{
		{"not TOML", "[[consumers]\n", "c.toml:1:"},
		{"unknown top-level key", "plans = []\n", `c.toml: plans: unknown key`},
		{"consumers not a table array", "consumers = 3\n", `c.toml: consumers: must be an array of tables`},
		{"unknown entry key", "[[consumers]]\nname = \"a\"\nkeys = []\n", `c.toml: consumers[0].keys: unknown key`},
		{"name not a string", "[[consumers]]\nname = 7\n", `c.toml: consumers[0].name: must be a string`},
		{"hashes not a list", "[[consumers]]\napi_keys_sha256 = \"ab\"\n", `c.toml: consumers[0].api_keys_sha256: must be an array of strings`},
		{"a hash not a string", "[[consumers]]\napi_keys_sha256 = [1]\n", `c.toml: consumers[0].api_keys_sha256[0]: must be a string`},
		{"rates not a table", "[[consumers]]\nrates = 1\n", `c.toml: consumers[0].rates: must be a table`},
		{"a rate list not a list", "[[consumers]]\n[consumers.rates]\nx = \"1/s\"\n", `c.toml: consumers[0].rates.x: must be an array of strings`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.toml", []byte(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestKeySources: keys from an environment variable and from a key file
// (beside the registry) are hashed and found; empty or unreadable sources
// are problems.
func TestKeySources(t *testing.T) {
	f, err := Parse("/etc/tollgate/consumers.toml", []byte(`
[[consumers]]
name = "env"
api_keys_env = "ENV_KEYS"
[[consumers]]
name = "file"
api_keys_file = "file.keys"
`))
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) ([]byte, error) {
		if name == "/etc/tollgate/file.keys" {
			return []byte("# issued 2026-11\nf1\n\n  f2  \n"), nil
		}
		return nil, errors.New("no such file")
	}
	getenv := func(k string) string {
		if k == "ENV_KEYS" {
			return "e1, e2,,"
		}
		return ""
	}
	r, err := Compile("/etc/tollgate/consumers.toml", f, Options{Getenv: getenv, ReadFile: read})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"e1": "env", "e2": "env", "f1": "file", "f2": "file", "# issued 2026-11": "", "": "", " f2": ""} {
		got := ""
		if c := r.ByKey(key); c != nil {
			got = c.Name
		}
		if got != want {
			t.Errorf("ByKey(%q) = %q, want %q", key, got, want)
		}
	}
	if r.Len() != 2 || r.Keys() != 4 {
		t.Errorf("Len %d, Keys %d; want 2 and 4", r.Len(), r.Keys())
	}
	_, err = Compile("/etc/tollgate/consumers.toml", f, Options{Getenv: func(string) string { return "" },
		ReadFile: func(string) ([]byte, error) { return []byte("# none yet\n"), nil }})
	for _, want := range []string{
		"consumers[0].api_keys_env: environment variable ENV_KEYS is empty or unset",
		"consumers[1].api_keys_file: /etc/tollgate/file.keys: no keys",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("empty sources: %v, want %q", err, want)
		}
	}
}

// TestByKeyRemembersOnlyKnownKeys: the memory of presented keys holds
// registered keys only, so rotating random keys grows nothing, and a
// remembered key answers as the digest map does.
func TestByKeyRemembersOnlyKnownKeys(t *testing.T) {
	r := registryOf(t, 100, func(i int) string { return fmt.Sprintf("key-%d", i) })
	for i := range 10000 {
		if c := r.ByKey(fmt.Sprintf("random-%d", i)); c != nil {
			t.Fatalf("random key %d found %q", i, c.Name)
		}
	}
	for range 3 {
		for i := range 100 {
			if c := r.ByKey(fmt.Sprintf("key-%d", i)); c == nil || c.Name != fmt.Sprintf("c%d", i) {
				t.Fatalf("key-%d: %v", i, c)
			}
		}
	}
	n := 0
	r.known.Range(func(k, v any) bool {
		n++
		if r.byDigest(k.(string)) != v {
			t.Errorf("remembered %q as %v, the digest map says %v", k, v, r.byDigest(k.(string)))
		}
		return true
	})
	if n != 100 {
		t.Errorf("%d keys remembered, want the 100 registered ones", n)
	}
}

// TestValidEnvName: the one rule for settings that name an environment
// variable, by hand-picked cases.
func TestValidEnvName(t *testing.T) {
	for s, want := range map[string]bool{
		"TOKEN": true, "api_keys_2": true, "_X": true, "A1": true,
		"": false, "1A": false, "A-B": false, "A B": false, "A=B": false,
		"Ä": false, "A.B": false, "$A": false, "A\x00": false,
	} {
		if got := ValidEnvName(s); got != want {
			t.Errorf("ValidEnvName(%q) = %v, want %v", s, got, want)
		}
	}
}
