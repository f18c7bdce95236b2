package costscan_test

import (
	"fmt"

	"github.com/tollgate/gateway/costscan"
)

// A stream's usage is read from its last event that carries the path,
// whatever the chunks the bytes arrive in.
func Example() {
	path, err := costscan.ParsePath("usage.total_tokens")
	if err != nil {
		panic(err)
	}
	var s costscan.Scanner
	s.Reset(&path, true, 64<<20)
	stream := "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"total_tokens\":12}}\n\ndata: [DONE]\n\n"
	for i := 0; i < len(stream); i += 7 {
		s.Write([]byte(stream[i:min(i+7, len(stream))]))
	}
	fmt.Println(s.Result())

	r, v, isJSON := costscan.Find(&path, []byte(`{"usage":{"total_tokens":"12"}}`))
	fmt.Println(r, v, isJSON)
	// Output:
	// valid 12
	// invalid 0 true
}
