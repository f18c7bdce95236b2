package keys

import (
	"net/netip"
	"testing"
)

// TestDistinctValueIPPrefix: ip/24 counts networks: addresses of one /24
// hash alike, of two /24s differently, an IPv4-mapped IPv6 address as its
// IPv4 one; plain ip counts addresses; path counts paths.
func TestDistinctValueIPPrefix(t *testing.T) {
	e, err := NewExtractor(Config{})
	if err != nil {
		t.Fatal(err)
	}
	net24, err := ParseDistinct("ip/24")
	if err != nil {
		t.Fatal(err)
	}
	ip, _ := ParseDistinct("ip")
	path, _ := ParseDistinct("path")
	h := func(d Distinct, addr, p string) uint64 {
		id := &Identity{IP: netip.MustParseAddr(addr)}
		v, _ := e.DistinctValue(d, id, &Values{}, p)
		return v
	}
	if h(net24, "10.0.1.5", "") != h(net24, "10.0.1.200", "") {
		t.Error("ip/24: one network, two values")
	}
	if h(net24, "10.0.1.5", "") == h(net24, "10.0.2.5", "") {
		t.Error("ip/24: two networks, one value")
	}
	if h(net24, "10.0.1.5", "") != h(net24, "::ffff:10.0.1.9", "") {
		t.Error("ip/24: an IPv4-mapped address is another network")
	}
	if h(ip, "10.0.1.5", "") == h(ip, "10.0.1.6", "") {
		t.Error("ip: two addresses, one value")
	}
	if h(path, "10.0.1.5", "/a") == h(path, "10.0.1.5", "/b") || h(path, "10.0.1.5", "/a") != h(path, "10.0.9.9", "/a") {
		t.Error("path: values do not follow the path alone")
	}
	if s := net24.String(); s != "ip/24" {
		t.Errorf("String = %q", s)
	}
}
