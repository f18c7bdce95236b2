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

// TestDropH2CUpgrade: a request to switch to h2c, however spelled, loses
// its Upgrade and Connection headers before it is forwarded (a tunnel to
// an upstream speaking HTTP/2 would bypass every route and limit); other
// upgrades are kept.
func TestDropH2CUpgrade(t *testing.T) {
	for _, tc := range []struct {
		upgrade []string
		dropped bool
	}{
		{[]string{"h2c"}, true},
		{[]string{"H2C"}, true},
		{[]string{" h2c "}, true},
		{[]string{"websocket, h2c"}, true},
		{[]string{"websocket", "h2c"}, true},
		{[]string{"websocket"}, false},
		{[]string{"h2c-14"}, false},
		{[]string{"h2"}, false},
		{nil, false},
	} {
		h := http.Header{"Connection": {"Upgrade"}}
		if tc.upgrade != nil {
			h["Upgrade"] = tc.upgrade
		}
		dropH2CUpgrade(h)
		_, up := h["Upgrade"]
		_, conn := h["Connection"]
		if tc.dropped && (up || conn) {
			t.Errorf("Upgrade %q: kept %v", tc.upgrade, h)
		}
		if !tc.dropped && (!conn || up != (tc.upgrade != nil)) {
			t.Errorf("Upgrade %q: dropped, %v left", tc.upgrade, h)
		}
	}
}
