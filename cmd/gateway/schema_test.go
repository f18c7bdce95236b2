package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/schema"
)

// schemaBase is a small valid configuration the type cases start from.
func schemaBase() map[string]any {
	return map[string]any{
		"limits": []any{map[string]any{"name": "l", "rates": []any{"1/s"}}},
		"routes": []any{map[string]any{"name": "r", "path_prefix": "/", "upstream": "http://127.0.0.1:1", "limits": []any{"l"}}},
	}
}

// setPath sets the value at a schema key path ("limits[].cost": the first
// list entry), creating tables on the way.
func setPath(doc map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	cur := doc
	for i, p := range parts {
		list := strings.HasSuffix(p, "[]")
		p = strings.TrimSuffix(p, "[]")
		if i == len(parts)-1 {
			cur[p] = v
			return
		}
		if list {
			l, _ := cur[p].([]any)
			if len(l) == 0 {
				l = []any{map[string]any{}}
				cur[p] = l
			}
			cur = l[0].(map[string]any)
			continue
		}
		next, ok := cur[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[p] = next
		}
		cur = next
	}
}

// kindAt returns the Go kind of the config field at path.
func kindAt(t reflect.Type, path string) reflect.Kind {
	for _, p := range strings.Split(path, ".") {
		p = strings.TrimSuffix(p, "[]")
		for t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		for i := range t.NumField() {
			if name, _, _ := strings.Cut(t.Field(i).Tag.Get("mapstructure"), ","); name == p {
				t = t.Field(i).Type
				break
			}
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind()
}

// TestSchemaRejectsWhatValidateRejects: for every key of gateway.toml, a
// value of each wrong TOML type is refused by the gateway's loader with
// the key's path and by the published JSON Schema (checked by an
// independent validator), and so is an unknown key in every table: an
// editor flags what `gateway validate` would refuse for a type reason.
func TestSchemaRejectsWhatValidateRejects(t *testing.T) {
	f, err := os.Open("../../schema/" + schema.GatewayFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sdoc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("gateway.schema.json", sdoc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("gateway.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, doc map[string]any, wantPath string, wantOK bool) {
		t.Helper()
		data, err := toml.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "gateway.toml")
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, lerr := loadConfig(file, nil)
		v, err := schema.TOMLValue(data)
		if err != nil {
			t.Fatal(err)
		}
		serr := sch.Validate(v)
		if wantOK {
			if lerr != nil || serr != nil {
				t.Fatalf("valid document refused: loader %v, schema %v\n%s", lerr, serr, data)
			}
			return
		}
		if lerr == nil || !strings.Contains(lerr.Error(), wantPath) {
			t.Errorf("loader: %v, want a problem at %s\n%s", lerr, wantPath, data)
		}
		if serr == nil {
			t.Errorf("schema accepts what the loader refuses:\n%s", data)
		}
	}
	t.Run("base", func(t *testing.T) { check(t, schemaBase(), "", true) })

	cfg := reflect.TypeFor[config.Config]()
	wrong := map[reflect.Kind][]any{
		reflect.String: {int64(7), true, []any{"x"}},
		reflect.Int:    {"7", true, 1.5},
		reflect.Int64:  {"7", true, 1.5},
		reflect.Bool:   {"true", int64(1)},
		reflect.Slice:  {"x", int64(1)},
		reflect.Struct: {"x", int64(1)},
	}
	n := 0
	for _, key := range schema.Keys(cfg) {
		kind := kindAt(cfg, key)
		vals, ok := wrong[kind]
		if !ok {
			continue
		}
		loaderPath := strings.ReplaceAll(key, "[]", "[0]")
		for _, v := range vals {
			n++
			t.Run(key, func(t *testing.T) {
				doc := schemaBase()
				setPath(doc, key, v)
				check(t, doc, loaderPath, false)
			})
		}
		if kind == reflect.Struct {
			t.Run(key+".unknown", func(t *testing.T) {
				doc := schemaBase()
				setPath(doc, key+".no_such_key", "x")
				check(t, doc, loaderPath+".no_such_key", false)
			})
		}
	}
	if n < 100 {
		t.Fatalf("only %d type cases: the key walk found too few keys", n)
	}
}
