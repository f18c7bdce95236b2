package main

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/schema"
)

// TestReadmeDocumentsEveryKey: every key of gateway.toml's schema is in
// the README's configuration reference, so that a key added to the
// configuration cannot go undocumented. A key is documented by a row of
// its own (its path in backticks), or named in the row of its table
// (`routes[].cors` listing `origins = [...]`, a `identity.jwt.*` row
// listing `claim`, or `a` / `b` rows). Tables of keys (a struct, a list
// of structs) need no row of their own.
func TestReadmeDocumentsEveryKey(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i := strings.Index(readme, "## Configuration reference")
	if i < 0 {
		t.Fatal("README has no configuration reference")
	}
	var rows []string
	for _, l := range strings.Split(readme[i:], "\n") {
		if strings.HasPrefix(l, "|") {
			rows = append(rows, l)
		}
	}
	root := reflect.TypeFor[config.Config]()
	for _, k := range schema.Keys(root) {
		if isTable(root, k) {
			continue
		}
		if !documented(rows, k) {
			t.Errorf("README's configuration reference does not name `%s`", k)
		}
	}
}

// documented reports whether some row names key k: in its first cell, or
// in the row of its table (first cell `parent`, `parent.*` or
// `parent[]`) as `leaf` or "leaf =", or in a first cell listing keys of
// one table ("`t.a` / `b`").
func documented(rows []string, k string) bool {
	parent, leaf := "", k
	if j := strings.LastIndexByte(k, '.'); j >= 0 {
		parent, leaf = k[:j], k[j+1:]
	}
	bare := strings.TrimSuffix(parent, "[]")
	for _, r := range rows {
		cell := r
		if f := strings.Split(r, "|"); len(f) > 2 {
			cell = f[1]
		}
		if strings.Contains(cell, "`"+k+"`") {
			return true
		}
		if parent == "" {
			continue
		}
		named := strings.Contains(r, "`"+leaf+"`") || strings.Contains(r, leaf+" =")
		for _, p := range []string{"`" + bare + "`", "`" + bare + ".*`", "`" + bare + "[]`"} {
			if strings.Contains(cell, p) && named {
				return true
			}
		}
		if strings.Contains(cell, "`"+parent+".") && strings.Contains(cell, "`"+leaf+"`") {
			return true
		}
	}
	return false
}

// isTable reports whether the key at path is a table or a list of tables.
func isTable(t reflect.Type, path string) bool {
	for _, p := range strings.Split(path, ".") {
		p = strings.TrimSuffix(p, "[]")
		for t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		found := false
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
			if name == p {
				t, found = f.Type, true
				break
			}
		}
		if !found {
			return false
		}
	}
	for t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}
