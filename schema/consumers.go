package schema

import (
	"reflect"

	"github.com/tollgate/gateway/consumers"
)

// ConsumersFile is the name of consumers.toml's schema in this directory.
const ConsumersFile = "consumers.schema.json"

// Consumers returns the schema of a consumer registry (consumers.toml),
// with descriptions from package consumers' sources in dir.
func Consumers(dir string) ([]byte, error) {
	docs, err := DocsFromSource(dir)
	if err != nil {
		return nil, err
	}
	return Generate(reflect.TypeFor[consumers.File](), Options{
		ID:    "https://tollgate.dev/schema/" + ConsumersFile,
		Title: "Tollgate consumer registry (consumers.toml)",
		Docs:  docs,
	})
}
