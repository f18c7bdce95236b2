package envoyconf

import (
	"bytes"
	"testing"
)

const matchConfig = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 10.0.0.1
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: path
    value: /api/*
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: path
    value: /api/v2*
    rate_limit: {unit: hour, requests_per_unit: 7}
  - key: generic_key
    value: tenant
    descriptors:
      - key: user
        rate_limit: {unit: day, requests_per_unit: 3}
  - key: header
    value: a*b*c
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: file
    value: img*
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 1}
`

// TestMatch is a table of the reference service's lookups
// (rateLimitConfigImpl.GetLimit), worked out by hand from its rules:
// key_value first, then the first matching wildcard in file order, then
// the key alone; a rule only at the descriptor's last entry.
func TestMatch(t *testing.T) {
	c, err := Load([]File{{Name: "m.yaml", Data: []byte(matchConfig)}})
	if err != nil {
		t.Fatal(err)
	}
	e := func(kv ...string) []Entry {
		var out []Entry
		for i := 0; i < len(kv); i += 2 {
			out = append(out, Entry{kv[i], kv[i+1]})
		}
		return out
	}
	cases := []struct {
		name    string
		domain  string
		entries []Entry
		want    string // the rule's path, "" for none
	}{
		{"key only default", "edge", e("remote_address", "1.2.3.4"), "edge.remote_address"},
		{"key and value over default", "edge", e("remote_address", "10.0.0.1"), "edge.remote_address_10.0.0.1"},
		{"empty value falls back to key", "edge", e("remote_address", ""), "edge.remote_address"},
		{"unknown domain", "other", e("remote_address", "1.2.3.4"), ""},
		{"unknown key", "edge", e("unknown", "x"), ""},
		{"wildcard prefix", "edge", e("path", "/api/users"), "edge.path_/api/*"},
		{"first wildcard in file order", "edge", e("path", "/api/v2/x"), "edge.path_/api/*"},
		{"wildcard matches empty rest", "edge", e("path", "/api/"), "edge.path_/api/*"},
		{"no wildcard match, no default", "edge", e("path", "/other"), ""},
		{"rule only at the last level", "edge", e("generic_key", "tenant"), ""},
		{"nested", "edge", e("generic_key", "tenant", "user", "bob"), "edge.generic_key_tenant.user"},
		{"nested, other parent value", "edge", e("generic_key", "other", "user", "bob"), ""},
		{"request deeper than config", "edge", e("remote_address", "1.2.3.4", "extra", "1"), ""},
		{"request deeper than nested config", "edge", e("generic_key", "tenant", "user", "bob", "x", "y"), ""},
		{"middle wildcards", "edge", e("header", "axxbyyc"), "edge.header_a*b*c"},
		{"middle wildcards, minimal", "edge", e("header", "abc"), "edge.header_a*b*c"},
		{"middle wildcards, wrong order", "edge", e("header", "acb"), ""},
		{"no entries", "edge", nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := c.Match(tc.domain, tc.entries, nil)
			got := ""
			if m.Rule != nil {
				got = m.Rule.Path
			}
			if got != tc.want {
				t.Fatalf("matched %q, want %q", got, tc.want)
			}
		})
	}
}

// TestKeys: a descriptor's counter key depends on every entry's value,
// except an entry matched by a share_threshold wildcard, whose values
// share one counter; no raw value appears in it.
func TestKeys(t *testing.T) {
	c, err := Load([]File{{Name: "m.yaml", Data: []byte(matchConfig)}})
	if err != nil {
		t.Fatal(err)
	}
	key := func(k, v string) string {
		es := []Entry{{k, v}}
		m, _ := c.Match("edge", es, nil)
		if m.Rule == nil {
			t.Fatalf("%s=%s matched nothing", k, v)
		}
		b, _ := m.AppendKey(nil, "edge", es, nil)
		if len(b) != KeyLen || bytes.Contains(b, []byte(v)) {
			t.Fatalf("key %q", b)
		}
		return string(b)
	}
	if key("path", "/api/a") == key("path", "/api/b") {
		t.Fatal("two values of a plain wildcard share a counter")
	}
	if key("file", "img1") != key("file", "img2") {
		t.Fatal("share_threshold values count apart")
	}
	// Injective: key "ab" value "c" is not key "a" value "bc".
	m := Match{}
	k1, _ := m.AppendKey(nil, "d", []Entry{{"ab", "c"}}, nil)
	k2, _ := m.AppendKey(nil, "d", []Entry{{"a", "bc"}}, nil)
	if bytes.Equal(k1, k2) {
		t.Fatal("encoding not injective")
	}
}

// TestByValue: an entry is matched by value when a key_value or a
// wildcard names it, not when the key's default or nothing does.
func TestByValue(t *testing.T) {
	c, err := Load([]File{{Name: "m.yaml", Data: []byte(matchConfig)}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		entries []Entry
		want    []bool
	}{
		{[]Entry{{"remote_address", "1.2.3.4"}}, []bool{false}},
		{[]Entry{{"remote_address", "10.0.0.1"}}, []bool{true}},
		{[]Entry{{"path", "/api/x"}}, []bool{true}},
		{[]Entry{{"generic_key", "tenant"}, {"user", "bob"}}, []bool{true, false}},
		{[]Entry{{"unknown", "x"}, {"user", "bob"}}, []bool{false, false}},
	}
	for _, tc := range cases {
		m, _ := c.Match("edge", tc.entries, nil)
		for i, want := range tc.want {
			if got := m.ByValue(i); got != want {
				t.Errorf("%v entry %d: ByValue %v, want %v", tc.entries, i, got, want)
			}
		}
		if m.ByValue(-1) || m.ByValue(64) {
			t.Errorf("%v: ByValue out of range", tc.entries)
		}
	}
}
