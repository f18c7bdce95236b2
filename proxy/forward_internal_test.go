package proxy

import (
	"net/http"
	"testing"
)

// TestOwnedHeadersCanonical: the Rewrite deletes the owned headers, and
// the observer reads Referer and User-Agent, by map key, which only finds
// them when their names are canonical.
func TestOwnedHeadersCanonical(t *testing.T) {
	for _, name := range append(append([]string(nil), gatewayOwned...), "Referer", "User-Agent") {
		if c := http.CanonicalHeaderKey(name); c != name {
			t.Errorf("%q is not canonical (%q)", name, c)
		}
	}
}
