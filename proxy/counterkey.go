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
		if needsIdentity(l.By) {
			return nil, "", fmt.Errorf("key: limit %q is keyed by a client identity; give key=api_key:V, user:V or ip:A", limitName)
		}
		// A shared limit (by = [], or route/method/header parts only):
		// the identity is not part of the key.
		if err := checkParts(limitName, l.By, q); err != nil {
			return nil, "", err
		}
		return l.Limit, string(keys.AppendKey(nil, l.By, &id, buildRequest(q), q.Get("route"))), nil
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
	if err := checkParts(limitName, l.By, q); err != nil {
		return nil, "", err
	}
	r := buildRequest(q)
	return l.Limit, string(keys.AppendKey(nil, l.By, &id, r, q.Get("route"))), nil
}

// needsIdentity reports whether a key built from parts depends on the
// client's identity.
func needsIdentity(parts []keys.Part) bool {
	for _, p := range parts {
		switch p.Kind {
		case keys.PartClient, keys.PartIP, keys.PartAPIKey, keys.PartUser:
			return true
		}
	}
	return false
}

// checkParts reports a key part of the limit that the admin query does not
// supply.
func checkParts(limitName string, parts []keys.Part, q url.Values) error {
	for _, part := range parts {
		switch part.Kind {
		case keys.PartRoute:
			if q.Get("route") == "" {
				return fmt.Errorf("limit %q is keyed by route: add route=NAME", limitName)
			}
		case keys.PartMethod:
			if q.Get("method") == "" {
				return fmt.Errorf("limit %q is keyed by method: add method=GET (or another)", limitName)
			}
		case keys.PartHeader:
			if q.Get("header:"+part.Header) == "" {
				return fmt.Errorf("limit %q is keyed by header %s: add header:%s=VALUE", limitName, part.Header, part.Header)
			}
		}
	}
	return nil
}

// buildRequest is the request the admin query describes, for the key
// parts that read one (method, headers).
func buildRequest(q url.Values) *http.Request {
	r := &http.Request{Method: q.Get("method"), Header: http.Header{}, URL: &url.URL{}}
	for name, vs := range q {
		if h, ok := strings.CutPrefix(name, "header:"); ok && len(vs) > 0 {
			r.Header.Set(h, vs[0])
		}
	}
	return r
}
