package policy

import "testing"

// TestLoosePath: the loose reading of normal paths, written out.
func TestLoosePath(t *testing.T) {
	for _, c := range [][2]string{
		{"/v1/orders", "/v1/orders"},
		{"/v1%2Forders", "/v1/orders"},
		{"/v1%2F%2Forders", "/v1/orders"},
		{"/v1;x=1/orders;y", "/v1/orders"},
		{"/V1/ORDERS", "/v1/orders"},
		{"/a%3Fb", "/a?b"},
		{"/%C3%A9", "/\xc3\xa9"},
		{"/", "/"},
	} {
		if got := LoosePath(c[0]); got != c[1] {
			t.Errorf("LoosePath(%q) = %q, want %q", c[0], got, c[1])
		}
	}
}
