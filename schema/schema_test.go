package schema

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

var update = flag.Bool("update", false, "rewrite the generated schema files")

// TestGatewaySchemaUpToDate fails when gateway.schema.json is not what the
// config structs generate: a key added to the gateway without regenerating
// the published schema (go test ./schema -update) would be flagged as
// unknown by every editor.
func TestGatewaySchemaUpToDate(t *testing.T) {
	got, err := Gateway("../policy")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(GatewayFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(GatewayFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go test ./schema -update", GatewayFile)
	}
}

// compile loads a published schema with an independent validator.
func compile(t *testing.T, file string) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(file, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(file)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestShippedExamplesValidate: the annotated gateway.toml and the valid
// configurations in the repository's test data validate against the
// schema, so the schema rejects nothing the gateway accepts there.
func TestShippedExamplesValidate(t *testing.T) {
	s := compile(t, GatewayFile)
	files := []string{"../gateway.toml", "../e2e/testdata/validate/valid.toml"}
	more, _ := filepath.Glob("../policy/testdata/*.toml")
	for _, f := range more {
		if !strings.Contains(filepath.Base(f), "invalid") {
			files = append(files, f)
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		v, err := TOMLValue(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("%s does not validate: %v", f, err)
		}
	}
}
