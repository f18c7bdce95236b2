package keys_test

import (
	"fmt"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/tollgate/gateway/keys"
)

func Example() {
	e, err := keys.NewExtractor(keys.Config{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	})
	if err != nil {
		panic(err)
	}
	// A request relayed by our proxy at 10.0.0.2: the client forged the
	// left entry, the proxy appended the address it saw.
	r := httptest.NewRequest("GET", "/v1/search?q=go", nil)
	r.RemoteAddr = "10.0.0.2:51234"
	r.Header.Add("X-Forwarded-For", "6.6.6.6, 203.0.113.9")

	id := e.Identify(r, time.Now())
	fmt.Println(id.ClientKind, id.Client)

	by := []keys.Part{{Kind: keys.PartClient}, {Kind: keys.PartRoute}}
	key := e.AppendKey(nil, by, &id, &keys.Values{Route: "search", Method: r.Method, Header: r.Header})
	fmt.Println(len(key), string(key[0]), string(key[23]))

	// An API key is the client when one is sent; its raw value never
	// appears in the key.
	r.Header.Set("X-API-Key", "secret-key")
	id = e.Identify(r, time.Now())
	fmt.Println(id.ClientKind, string(e.AppendKey(nil, by, &id, &keys.Values{Route: "search", Method: r.Method, Header: r.Header})) != string(key))
	// Output:
	// ip 203.0.113.9
	// 46 { }
	// api_key true
}

func ExampleParsePart() {
	for _, s := range []string{"client", "header:x-tenant", "path"} {
		p, err := keys.ParsePart(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(p.Kind, p)
	}
	// Output:
	// client client
	// header header:X-Tenant
	// unknown key part "path" (want client, ip, api_key, user, mtls, route, method, consumer or header:<Name>)
}
