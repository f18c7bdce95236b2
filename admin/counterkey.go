package admin

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit"
)

// counterKey finds the limit named name in p and the counter key that the
// live path uses for it and the client an operator names, so that the
// admin API reads and resets exactly the counter a client's requests hit.
//
// client is "api_key:VALUE", "user:VALUE", "mtls:SUBJECT", "ip:ADDR" or,
// with a consumer registry, "consumer:NAME" (an API key then names its
// consumer); a bare value is an IP when it parses as one and an API key
// otherwise; "" names no client
// (for limits not keyed by one). q supplies the other key parts a limit
// may use: "route", "method" and "header:<Name>". The limit's on_missing
// rule applies as on the live path: for a limit by ["api_key"] with
// on_missing = "ip", "ip:A" is the counter of A's requests without a key.
// A limit keyed by an expression is named by its value, q's "expr".
func counterKey(p *policy.Policy, name, client string, q url.Values) (*ratelimit.Limit, string, error) {
	l := p.Limit(name)
	if l == nil {
		return nil, "", fmt.Errorf("limit %q: %w", name, ErrNotFound)
	}
	id, err := parseClient(client)
	if err != nil {
		return nil, "", err
	}
	if err := withConsumer(p, client, &id); err != nil {
		return nil, "", err
	}
	if l.Exprs != nil && l.Exprs.Key != nil {
		// A limit keyed by an expression: its counters are named by the
		// expression's value (expr=V; "" names the one shared by requests
		// whose expression failed).
		v := keys.Values{Expr: q.Get("expr")}
		return l.For(&id), string(p.Identity.AppendKey(nil, l.Exprs.KeyExprParts(), &id, &v)), nil
	}
	if i := slices.IndexFunc(l.By, isCredentialPart); i >= 0 && strings.HasPrefix(client, "consumer:") {
		// Each of the consumer's keys (or users, certificates) has a
		// counter of its own here: the consumer's name names none.
		return nil, "", fmt.Errorf("key: limit %q counts each %s apart, so %q names none of its counters; give key=%s:V", name, l.By[i].Kind, client, l.By[i].Kind)
	}
	v := queryValues(q)
	parts, ok := l.KeyParts(&id, v.Header)
	if !ok {
		return nil, "", fmt.Errorf("limit %q answers 401 to requests without %s and counts them nowhere; name the client by those", name, keys.MissingNames(l.By))
	}
	if err := checkParts(name, parts, &id, &v); err != nil {
		return nil, "", err
	}
	// The definition the client's requests are decided by: its plan's or
	// its own rates (Limit.For), so usage reads against those.
	return l.For(&id), string(p.Identity.AppendKey(nil, parts, &id, &v)), nil
}

// parseClient turns the operator's name of a client into the identity the
// live path would resolve for it.
func parseClient(client string) (keys.Identity, error) {
	var id keys.Identity
	if client == "" {
		return id, nil
	}
	kind, value, ok := strings.Cut(client, ":")
	if !ok || (kind != "api_key" && kind != "user" && kind != "ip" && kind != "mtls") {
		kind, value = "api_key", client
		if _, err := netip.ParseAddr(client); err == nil {
			kind = "ip"
		}
	}
	if value == "" {
		return id, fmt.Errorf("key: %q names no client; give api_key:V, user:V or ip:A", client)
	}
	switch kind {
	case "api_key":
		id.Client, id.ClientKind, id.APIKey = value, keys.SourceAPIKey, value
	case "user":
		id.Client, id.ClientKind, id.User = value, keys.SourceUser, value
	case "mtls":
		id.Client, id.ClientKind, id.MTLS = value, keys.SourceMTLS, value
	case "ip":
		ip, err := netip.ParseAddr(value)
		if err != nil {
			return id, fmt.Errorf("key: %q is not an IP address", value)
		}
		ip = ip.WithZone("").Unmap()
		id.Client, id.ClientKind, id.IP = ip.String(), keys.SourceIP, ip
	}
	return id, nil
}

// queryValues are the key parts' values the admin query supplies: route=,
// method= and header:<Name>= (the first value of each).
func queryValues(q url.Values) keys.Values {
	v := keys.Values{Route: q.Get("route"), Method: q.Get("method"), Header: http.Header{}}
	for name, vs := range q {
		if h, ok := strings.CutPrefix(name, "header:"); ok && len(vs) > 0 {
			v.Header.Set(h, vs[0])
		}
	}
	return v
}

// checkParts reports a key part of the limit that the admin query does not
// supply: a counter key built without it would name no client's counter.
func checkParts(name string, parts []keys.Part, id *keys.Identity, v *keys.Values) error {
	for _, part := range parts {
		switch part.Kind {
		case keys.PartClient, keys.PartAPIKey, keys.PartUser, keys.PartMTLS, keys.PartConsumer:
			if id.ClientKind == 0 {
				return fmt.Errorf("key: limit %q is keyed by a client identity; give key=api_key:V, user:V or ip:A", name)
			}
		case keys.PartIP:
			if !id.IP.IsValid() {
				return fmt.Errorf("key: limit %q counts this client by IP address; give key=ip:A", name)
			}
		case keys.PartRoute:
			if v.Route == "" {
				return fmt.Errorf("limit %q is keyed by route: add route=NAME", name)
			}
		case keys.PartMethod:
			if v.Method == "" {
				return fmt.Errorf("limit %q is keyed by method: add method=GET (or another)", name)
			}
		case keys.PartHeader:
			if v.Header.Get(part.Header) == "" {
				return fmt.Errorf("limit %q is keyed by header %s: add header:%s=VALUE", name, part.Header, part.Header)
			}
		}
	}
	return nil
}

// isCredentialPart reports whether p is one credential of a client (an
// API key, a user, a certificate subject) rather than the client.
func isCredentialPart(p keys.Part) bool {
	return p.Kind == keys.PartAPIKey || p.Kind == keys.PartUser || p.Kind == keys.PartMTLS
}
