package policy

import (
	"net"
	"net/netip"

	"github.com/tollgate/gateway/policy/config"
)

// maxGCMinHeap bounds server.gc_min_heap: 64 GiB, far above any heap a
// gateway needs to leave uncollected, and a typo's ceiling.
const maxGCMinHeap = 64 << 30

func buildServer(c *config.ServerConfig, e *problems) Server {
	s := Server{Listen: c.Listen, AdminListen: c.AdminListen, MaxHeaderBytes: c.MaxHeaderBytes, WatchConfig: c.WatchConfig,
		H2C: c.H2C, HTTP2MaxConcurrentStreams: c.HTTP2MaxConcurrentStreams, GCMinHeap: c.GCMinHeap,
		MaxBodyBytes: c.MaxBodyBytes, RequestID: c.RequestID,
		Resolver: c.Resolver}
	checkAddr(c.Listen, "server.listen", false, e)
	checkAddr(c.AdminListen, "server.admin_listen", true, e)
	s.ReadHeaderTimeout = duration(c.ReadHeaderTimeout, "server.read_header_timeout", true, e)
	s.IdleTimeout = duration(c.IdleTimeout, "server.idle_timeout", false, e)
	s.ShutdownTimeout = duration(c.ShutdownTimeout, "server.shutdown_timeout", false, e)
	if c.MaxHeaderBytes < 1024 || c.MaxHeaderBytes > 16<<20 {
		e.add("server.max_header_bytes", "must be in 1024..16777216, got %d", c.MaxHeaderBytes)
	}
	if c.Listen != "" && c.Listen == c.AdminListen {
		e.add("server.admin_listen", "must differ from server.listen (%s)", c.Listen)
	}
	if c.HTTP2MaxConcurrentStreams < 1 || c.HTTP2MaxConcurrentStreams > 1000 {
		e.add("server.http2_max_concurrent_streams", "must be in 1..1000, got %d", c.HTTP2MaxConcurrentStreams)
	}
	if c.GCMinHeap < 0 || c.GCMinHeap > maxGCMinHeap {
		e.add("server.gc_min_heap", "must be in 0..%d bytes (0: Go's own pacing), got %d", int64(maxGCMinHeap), c.GCMinHeap)
	}
	if c.MaxBodyBytes < 0 {
		e.add("server.max_body_bytes", "must not be negative (0: no bound), got %d", c.MaxBodyBytes)
	}
	if c.Resolver != "" {
		if ap, err := netip.ParseAddrPort(c.Resolver); err != nil || ap.Port() == 0 {
			e.add("server.resolver", "want the DNS server's ip:port (an address, not a name), got %q", c.Resolver)
		}
	}
	if c.TLS.Enabled() {
		s.TLS = buildTLS(&c.TLS, "server.tls", e)
		if c.H2C {
			e.add("server.h2c", "is for a cleartext listener; with server.tls, HTTP/2 is negotiated by ALPN")
		}
	}
	return s
}

func checkAddr(addr, path string, optional bool, e *problems) {
	if addr == "" {
		if !optional {
			e.add(path, "is required")
		}
		return
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		e.add(path, "want host:port, got %q", addr)
	}
}
