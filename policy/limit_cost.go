package policy

import (
	"errors"
	"net/http"
	"net/netip"
	"strconv"

	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

// maxCostHeaderLen bounds the cost header value parsed: longer text is no
// integer in range anyway, and is not worth scanning.
const maxCostHeaderLen = 20

// RequestCost returns what a request with headers h from the direct peer
// (its RemoteAddr, "ip:port") costs under l: the static cost, or the
// value of l's cost header when the request sends one that is believed.
// The header is believed from every peer unless l lists trusted peers;
// from another peer it is ignored (not even parsed). A believed value must
// be one field of ASCII digits naming an integer in 1..2^53, else it is an
// error for the client (400); a value below l.CostMin is raised to it.
func (l *Limit) RequestCost(h http.Header, peer string) (int64, error) {
	if l.CostHeader == "" {
		return l.Cost, nil
	}
	vs := h[l.CostHeader]
	if len(vs) == 0 || (len(vs) == 1 && vs[0] == "") {
		return l.Cost, nil
	}
	if len(l.CostTrustedFrom) > 0 && !l.costTrusted(peer) {
		return l.Cost, nil
	}
	if len(vs) > 1 {
		// Which copy counts would depend on the reader: a client could
		// send a cheap one ahead of the one a proxy adds.
		return 0, errors.New("header " + l.CostHeader + " is sent more than once")
	}
	n, ok := parseCost(vs[0])
	if !ok {
		return 0, errors.New("header " + l.CostHeader + " must be an integer in 1.." + strconv.FormatInt(ratelimit.MaxLimit, 10) + ", got " + strconv.Quote(truncate(vs[0], maxCostHeaderLen)))
	}
	return max(n, l.CostMin), nil
}

// parseCost parses a cost: 1 to maxCostHeaderLen ASCII digits (no sign,
// no spaces, no base prefix, no exponent) naming 1..MaxLimit.
func parseCost(v string) (int64, bool) {
	if v == "" || len(v) > maxCostHeaderLen {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0') // n ≤ 2^53 before: no overflow
		if n > uint64(ratelimit.MaxLimit) {
			return 0, false
		}
	}
	return int64(n), n >= 1
}

// costTrusted reports whether peer, a RemoteAddr, is in l.CostTrustedFrom.
func (l *Limit) costTrusted(peer string) bool {
	ap, err := netip.ParseAddrPort(peer)
	var a netip.Addr
	if err == nil {
		a = ap.Addr()
	} else if a, err = netip.ParseAddr(peer); err != nil {
		return false
	}
	a = a.Unmap().WithZone("")
	for _, p := range l.CostTrustedFrom {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// truncate bounds a client-supplied value before it is echoed in an error.
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// compileCostTrust fills l's cost floor and trusted peers from c: the
// floor defaults to the static cost (a client that names a cost can pay
// more than the operator's cost, never less), and both settings need a
// cost header.
func compileCostTrust(l *Limit, c *config.LimitConfig, path string, e *problems) {
	l.CostMin = c.CostMin
	if l.CostMin == 0 {
		l.CostMin = c.Cost
	}
	if c.CostHeader == "" {
		if c.CostMin != 0 {
			e.add(path+".cost_min", "applies only with cost_header")
		}
		if len(c.CostHeaderTrustedFrom) > 0 {
			e.add(path+".cost_header_trusted_from", "applies only with cost_header")
		}
		return
	}
	if c.CostMin < 0 || c.CostMin > c.Cost {
		e.add(path+".cost_min", "must be in 1..cost (%d), got %d: a request without the header would pay less than the floor", c.Cost, c.CostMin)
	}
	l.CostTrustedFrom = prefixes(c.CostHeaderTrustedFrom, path+".cost_header_trusted_from", e)
}
