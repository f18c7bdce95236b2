package consumers_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/tollgate/gateway/consumers"
)

func Example() {
	sum := sha256.Sum256([]byte("acme-secret-key-1"))
	f, err := consumers.Parse("consumers.toml", []byte(`
[[consumers]]
name = "acme"
plan = "pro"
api_keys_sha256 = ["`+hex.EncodeToString(sum[:])+`"]
`))
	if err != nil {
		panic(err)
	}
	r, err := consumers.Compile("consumers.toml", f, consumers.Options{Plans: []string{"free", "pro"}})
	if err != nil {
		panic(err)
	}
	c := r.ByKey("acme-secret-key-1")
	fmt.Println(c.Name, c.Plan, c.PlanIndex)
	fmt.Println(r.ByKey("made-up") == nil)
	// Output:
	// acme pro 2
	// true
}
