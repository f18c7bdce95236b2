package schema

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tollgate/gateway/consumers"
)

var update = flag.Bool("update", false, "rewrite the generated schema files")

// TestGatewaySchemaUpToDate fails when gateway.schema.json is not what the
// config structs generate: a key added to the gateway without regenerating
// the published schema (go test ./schema -update) would be flagged as
// unknown by every editor.
func TestGatewaySchemaUpToDate(t *testing.T) {
	got, err := Gateway("../policy/config")
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

// TestConsumersSchemaUpToDate is TestGatewaySchemaUpToDate for the
// consumer registry's schema.
func TestConsumersSchemaUpToDate(t *testing.T) {
	got, err := Consumers("../consumers")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(ConsumersFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(ConsumersFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go test ./schema -update", ConsumersFile)
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

// TestConsumersSchemaRejectsWhatParseRejects: every key of a registry
// entry with a value of a wrong TOML type, and an unknown key, is refused
// by consumers.Parse with its path and by the published schema; a
// well-formed registry passes both.
func TestConsumersSchemaRejectsWhatParseRejects(t *testing.T) {
	s := compile(t, ConsumersFile)
	good := "[[consumers]]\nname = \"acme\"\nplan = \"pro\"\n" +
		"api_keys_sha256 = [\"" + strings.Repeat("ab", 32) + "\"]\napi_keys_env = \"ACME_KEYS\"\n" +
		"api_keys_file = \"keys.txt\"\n[consumers.rates]\nper-consumer = [\"500/s\"]\n"
	check := func(t *testing.T, doc, wantPath string) {
		t.Helper()
		_, perr := consumers.Parse("consumers.toml", []byte(doc))
		v, err := TOMLValue([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		serr := s.Validate(v)
		if wantPath == "" {
			if perr != nil || serr != nil {
				t.Fatalf("a good registry is refused: parse %v, schema %v\n%s", perr, serr, doc)
			}
			return
		}
		if perr == nil || !strings.Contains(perr.Error(), wantPath) {
			t.Errorf("Parse: %v, want a problem at %s\n%s", perr, wantPath, doc)
		}
		if serr == nil {
			t.Errorf("the schema accepts what Parse refuses:\n%s", doc)
		}
	}
	check(t, good, "")
	for _, tc := range []struct{ key, bad string }{
		{"name", "name = 7"}, {"plan", "plan = true"}, {"api_keys_sha256", `api_keys_sha256 = "ab"`},
		{"api_keys_sha256", "api_keys_sha256 = [1]"}, {"api_keys_env", "api_keys_env = [\"X\"]"},
		{"api_keys_file", "api_keys_file = 1"}, {"rates", `rates = "1/s"`}, {"no_such_key", `no_such_key = "x"`},
	} {
		t.Run(tc.key, func(t *testing.T) {
			doc := "[[consumers]]\nname = \"acme\"\n"
			if tc.key == "name" {
				doc = "[[consumers]]\n"
			}
			check(t, doc+tc.bad+"\n", "consumers[0]."+tc.key)
		})
	}
	t.Run("rates value", func(t *testing.T) {
		check(t, "[[consumers]]\nname = \"acme\"\n[consumers.rates]\nper-consumer = \"500/s\"\n", "consumers[0].rates.per-consumer")
	})
}
