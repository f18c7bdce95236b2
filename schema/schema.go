// Package schema generates the JSON Schema of Tollgate's configuration
// files from the Go structs the gateway decodes them into, so that the
// schema cannot drift from what the gateway accepts: a key the gateway
// knows is in the schema with its TOML type, a key it does not know is an
// error in both. Editors (Taplo, Even Better TOML) point at the generated
// files to complete and check a configuration as it is typed.
//
// The schema checks types and key names, and the values of closed sets
// (algorithm names, store backends); `gateway validate` remains the
// authority on everything else (rates, addresses, cross-references).
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// Options are what the Go types do not say about a configuration.
type Options struct {
	// ID is the schema's $id.
	ID string
	// Title is the schema's title.
	Title string
	// Docs maps "TypeName.FieldName" to the field's doc comment, which
	// becomes its description.
	Docs map[string]string
	// Enums maps a key's path ("store.backend", "limits[].algorithm") to
	// its allowed values.
	Enums map[string][]string
	// OrString lists the paths of tables that a string may stand in for
	// (a route's upstreams[]: a URL or `{ url, weight }`).
	OrString map[string]bool
}

// node is one JSON Schema node. Field order is the output order.
type node struct {
	Schema               string           `json:"$schema,omitempty"`
	ID                   string           `json:"$id,omitempty"`
	Title                string           `json:"title,omitempty"`
	Description          string           `json:"description,omitempty"`
	Type                 string           `json:"type,omitempty"`
	Enum                 []string         `json:"enum,omitempty"`
	Properties           map[string]*node `json:"properties,omitempty"`
	AdditionalProperties any              `json:"additionalProperties,omitempty"`
	Items                *node            `json:"items,omitempty"`
	AnyOf                []*node          `json:"anyOf,omitempty"`
}

// Generate returns the JSON Schema (draft 2020-12) of the TOML document
// that decodes into root, a struct type whose fields carry mapstructure
// (or toml) tags, as indented JSON ending in a newline.
func Generate(root reflect.Type, opts Options) ([]byte, error) {
	g := generator{opts: opts}
	n, err := g.node(root, "", "")
	if err != nil {
		return nil, err
	}
	n.Schema = "https://json-schema.org/draft/2020-12/schema"
	n.ID, n.Title = opts.ID, opts.Title
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

type generator struct {
	opts Options
}

// node returns the schema of t at path (dotted, "[]" for list items);
// doc is the description of the field holding it.
func (g *generator) node(t reflect.Type, path, doc string) (*node, error) {
	n := &node{Description: doc}
	if vs, ok := g.opts.Enums[path]; ok {
		n.Enum = vs
	}
	switch t.Kind() {
	case reflect.String:
		n.Type = "string"
	case reflect.Bool:
		n.Type = "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n.Type = "integer"
	case reflect.Float32, reflect.Float64:
		n.Type = "number"
	case reflect.Slice, reflect.Array:
		n.Type = "array"
		items, err := g.node(t.Elem(), path+"[]", "")
		if err != nil {
			return nil, err
		}
		n.Items = items
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map key %s is not a string", path, t.Key())
		}
		n.Type = "object"
		v, err := g.node(t.Elem(), path+".*", "")
		if err != nil {
			return nil, err
		}
		n.AdditionalProperties = v
	case reflect.Pointer:
		return g.node(t.Elem(), path, doc)
	case reflect.Struct:
		n.Type = "object"
		n.Properties = map[string]*node{}
		// A key the gateway does not know is an error, as in validate.
		n.AdditionalProperties = false
		if err := g.fields(t, path, n); err != nil {
			return nil, err
		}
		if g.opts.OrString[path] {
			n.Description = ""
			return &node{Description: doc, AnyOf: []*node{{Type: "string"}, n}}, nil
		}
	default:
		return nil, fmt.Errorf("%s: unsupported type %s", path, t)
	}
	return n, nil
}

func (g *generator) fields(t reflect.Type, path string, n *node) error {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opt, _ := strings.Cut(keyTag(f), ",")
		if opt == "squash" {
			if err := g.fields(f.Type, path, n); err != nil {
				return err
			}
			continue
		}
		if name == "-" {
			continue
		}
		if name == "" {
			return fmt.Errorf("%s.%s: no mapstructure or toml tag", t.Name(), f.Name)
		}
		p := name
		if path != "" {
			p = path + "." + name
		}
		c, err := g.node(f.Type, p, describe(g.opts.Docs[t.Name()+"."+f.Name], f.Name, name))
		if err != nil {
			return err
		}
		n.Properties[name] = c
	}
	return nil
}

// describe turns a Go doc comment into a description: one paragraph,
// with the Go field name it starts with replaced by the TOML key.
func describe(doc, field, key string) string {
	s := strings.Join(strings.Fields(doc), " ")
	if rest, ok := strings.CutPrefix(s, field+" "); ok {
		s = "`" + key + "` " + rest
	}
	return s
}

// keyTag is the field's mapstructure tag (the gateway's configuration,
// decoded by viper) or else its toml tag (files decoded with go-toml).
func keyTag(f reflect.StructField) string {
	if t, ok := f.Tag.Lookup("mapstructure"); ok {
		return t
	}
	return f.Tag.Get("toml")
}

// Keys returns every key path of the schema of root, sorted: the leaves
// and tables a configuration may set ("limits[].rates").
func Keys(root reflect.Type) []string {
	var out []string
	var walk func(t reflect.Type, path string)
	walk = func(t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				name, opt, _ := strings.Cut(keyTag(f), ",")
				if !f.IsExported() || name == "-" {
					continue
				}
				if opt == "squash" {
					walk(f.Type, path)
					continue
				}
				p := name
				if path != "" {
					p = path + "." + name
				}
				out = append(out, p)
				walk(f.Type, p)
			}
		case reflect.Slice, reflect.Array:
			if e := t.Elem(); e.Kind() == reflect.Struct {
				walk(e, path+"[]")
			}
		}
	}
	walk(root, "")
	sort.Strings(out)
	return out
}
