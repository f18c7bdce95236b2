package proxy

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/ratelimit"
)

// ErrUnknownLimit is returned by CounterKey for a limit name that the
// active policy does not define.
var ErrUnknownLimit = errors.New("unknown limit")

// CounterKey builds the counter key that the live path uses for the limit
// named limitName and the client an operator names, so that the admin API
// can read and reset exactly the counter a client's requests hit.
//
// client is "api_key:VALUE", "user:VALUE" or "ip:ADDR"; a bare value is an
// IP when it parses as one and an API key otherwise. q supplies the other
// key parts a limit may use: "route", "method" and "header:<Name>".
func (h *Handler) CounterKey(limitName, client string, q url.Values) (*ratelimit.Limit, string, error) {
	p := h.Policy()
	l := p.Limit(limitName)
	if l == nil {
		return nil, "", fmt.Errorf("%w %q", ErrUnknownLimit, limitName)
	}
	id := keys.Identity{IPv6Prefix: p.Config.Identity.IPv6Prefix}
	kind, value, ok := strings.Cut(client, ":")
	if !ok || (kind != "api_key" && kind != "user" && kind != "ip") {
		kind, value = "api_key", client
		if _, err := netip.ParseAddr(client); err == nil {
			kind = "ip"
		}
	}
	if value == "" {
		return nil, "", errors.New("key: empty client identity")
	}
	switch kind {
	case "api_key":
		id.Client, id.ClientKind, id.APIKey = value, keys.SourceAPIKey, value
	case "user":
		id.Client, id.ClientKind, id.User = value, keys.SourceUser, value
	case "ip":
		ip, err := netip.ParseAddr(value)
		if err != nil {
			return nil, "", fmt.Errorf("key: %q is not an IP address", value)
		}
		ip = ip.WithZone("").Unmap()
		id.Client, id.ClientKind, id.IP = ip.String(), keys.SourceIP, ip
	}
	r := &http.Request{Method: q.Get("method"), Header: http.Header{}, URL: &url.URL{}}
	for _, part := range l.By {
		switch part.Kind {
		case keys.PartRoute:
			if q.Get("route") == "" {
				return nil, "", fmt.Errorf("limit %q is keyed by route: add route=NAME", limitName)
			}
		case keys.PartMethod:
			if r.Method == "" {
				return nil, "", fmt.Errorf("limit %q is keyed by method: add method=GET (or another)", limitName)
			}
		case keys.PartHeader:
			v := q.Get("header:" + part.Header)
			if v == "" {
				return nil, "", fmt.Errorf("limit %q is keyed by header %s: add header:%s=VALUE", limitName, part.Header, part.Header)
			}
			r.Header.Set(part.Header, v)
		}
	}
	return l.Limit, string(keys.AppendKey(nil, l.By, &id, r, q.Get("route"))), nil
}
