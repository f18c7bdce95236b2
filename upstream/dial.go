package upstream

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// GuardedDial returns d's DialContext refusing, when the address to dial
// is a name, each address the name resolves to that no upstream is at
// (unusable: 0.0.0.0/8, link-local such as the cloud metadata service's
// 169.254.169.254, multicast, broadcast); the dial goes on with the
// name's other addresses. It is the dial of every name the Pools have not
// turned into addresses (a single upstream, a name before its first
// lookup), whose answers resolve.go's filter never sees. An address
// written as an IP literal is the operator's own choice, and dialled as
// it is.
func GuardedDial(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	guarded := *d
	guarded.ControlContext = func(_ context.Context, _, address string, _ syscall.RawConn) error {
		if ap, err := netip.ParseAddrPort(address); err == nil && unusable(ap.Addr().Unmap().WithZone("")) {
			return fmt.Errorf("refusing to connect to %s: a name resolved to an address no upstream is at", address)
		}
		return nil
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			if _, err := netip.ParseAddr(host); err == nil {
				return d.DialContext(ctx, network, addr)
			}
		}
		return guarded.DialContext(ctx, network, addr)
	}
}
