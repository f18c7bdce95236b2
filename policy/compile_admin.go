package policy

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/tollgate/gateway/policy/config"
)

// buildAdmin checks the [admin] table and returns admin.allowed_hosts
// normalised. An admin listener beyond loopback needs a token (or an
// explicit admin.insecure): without one, whoever reaches the port can
// replace the live configuration. Whether a token is set is known here
// from its source alone: Compile refuses a source that reads empty.
func buildAdmin(c *config.Config, p *Policy, e *problems) []string {
	a := &c.Admin
	src := tokenSource(*a)
	src.check(e)
	if a.TopK < 0 || a.TopK > 1000 {
		e.add("admin.top_k", "%d out of range (0 for the default 100, at most 1000)", a.TopK)
	}
	if addr := c.Server.AdminListen; addr != "" {
		switch {
		case src.set():
			if a.Insecure {
				p.Warnings = append(p.Warnings, "admin.insecure = true has no effect: a token is set (admin.token_env or admin.token_file) and every admin request needs it")
			}
		case !loopback(addr) && !a.Insecure:
			e.add("server.admin_listen", "%q is not a loopback address and the admin API has no token, so anyone who reaches the port could replace the configuration: set admin.token_env or admin.token_file, bind loopback (127.0.0.1), or accept the risk with admin.insecure = true", addr)
		case !loopback(addr):
			p.Warnings = append(p.Warnings, fmt.Sprintf("INSECURE: admin.insecure = true and no token: the admin API on %s answers anyone who can reach it, who may replace the live configuration and remove every limit; set admin.token_env or admin.token_file", addr))
		default:
			p.Warnings = append(p.Warnings, fmt.Sprintf("the admin API on %s has no token: any local user or process may change the configuration; set admin.token_env or admin.token_file", addr))
		}
	}
	var hosts []string
	for i, h := range a.AllowedHosts {
		n, err := hostName(h)
		if err != "" {
			e.add(fmt.Sprintf("admin.allowed_hosts[%d]", i), "%q: %s", h, err)
			continue
		}
		hosts = append(hosts, n)
	}
	return hosts
}

// loopback reports whether the listen address addr binds loopback only:
// 127.0.0.0/8, ::1 (an IPv4-mapped form included) or "localhost". An empty
// host (":9090"), 0.0.0.0 and :: bind every interface; any other name is
// not known to be loopback.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// maxHostName is the longest DNS name, without its trailing dot.
const maxHostName = 253

// hostName returns an admin.allowed_hosts entry as a Host header is
// compared with it (lower case, no trailing dot), or why it is no host
// name.
func hostName(h string) (string, string) {
	n := strings.TrimSuffix(strings.ToLower(h), ".")
	switch {
	case n == "":
		return "", "empty host name"
	case strings.Contains(n, "*"):
		return "", "wildcards are not supported; list each name"
	case strings.ContainsAny(n, ":/[]@"):
		if _, err := netip.ParseAddr(strings.Trim(n, "[]")); err == nil {
			return "", "an IP literal, which is always allowed; list host names only"
		}
		return "", "want a host name alone, without scheme, port or path"
	case len(n) > maxHostName:
		return "", fmt.Sprintf("longer than %d bytes", maxHostName)
	}
	if _, err := netip.ParseAddr(n); err == nil {
		return "", "an IP literal, which is always allowed; list host names only"
	}
	for _, label := range strings.Split(n, ".") {
		if label == "" || len(label) > 63 {
			return "", "each dot-separated label must be 1 to 63 bytes"
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return "", "a host name has letters, digits, '-', '_' and dots only"
			}
		}
	}
	return n, ""
}

// checkAdminToken refuses a token no client can send: one that is blank
// or has leading or trailing white space (a header value is trimmed).
func checkAdminToken(src secretSource, tok string, e *problems) {
	if !src.set() || tok == "" || strings.TrimSpace(tok) == tok {
		return // unset, or empty: read reported it
	}
	field := src.field("_env")
	if src.env == "" {
		field = src.field("_file")
	}
	if strings.TrimSpace(tok) == "" {
		e.add(field, "the token is blank")
		return
	}
	e.add(field, "the token has leading or trailing white space, which no client can send in a header")
}
