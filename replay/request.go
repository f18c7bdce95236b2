package replay

import (
	"context"
	"math/bits"
	"net"
	"net/http"
	"net/netip"
	"net/url"

	"github.com/tollgate/gateway/accesslog"
	"github.com/tollgate/gateway/policy"
)

// builder turns log entries into requests.
type builder struct {
	hosts      map[string]string // route name → host
	apiHeader  string
	userHeader string
	proxyAddr  string // RemoteAddr of a trusted proxy, "" when none
	synthetic  map[string]string
	// byResponse is set when a limit counts by response: requests then
	// carry their line's status to the upstream stand-in.
	byResponse bool
}

func newBuilder(p *policy.Policy) *builder {
	b := &builder{
		hosts:      make(map[string]string, len(p.Routes)),
		apiHeader:  p.Identity.APIKeyHeader(),
		userHeader: p.Identity.UserHeader(),
		synthetic:  make(map[string]string),
	}
	if a, ok := p.Identity.TrustedPeer(); ok {
		b.proxyAddr = netip.AddrPortFrom(a, 0).String()
	}
	for _, rt := range p.Routes {
		b.hosts[rt.Name] = rt.Host
		for _, l := range rt.Limits {
			b.byResponse = b.byResponse || l.Response != nil
		}
	}
	return b
}

// anonymous is the address of entries that carry neither IP nor client.
const anonymous = "192.0.2.1"

// ip returns the address text a request of e comes from.
func (b *builder) ip(e *accesslog.Entry) string {
	v := e.IP
	if v == "" && (e.ClientKind == "ip" || e.ClientKind == "remote_addr") {
		v = e.Client
	}
	if v == "" {
		return anonymous
	}
	if a, err := netip.ParseAddr(v); err == nil {
		return a.String()
	}
	if s, ok := b.synthetic[v]; ok {
		return s
	}
	// The n-th distinct hash gets fd00::/8 plus n bit-reversed, so the
	// distinguishing bits come first and survive prefix masking.
	n := uint64(len(b.synthetic) + 1)
	r := bits.Reverse64(n) >> 8
	var a [16]byte
	a[0] = 0xfd
	for i := 1; i < 8; i++ {
		a[i] = byte(r >> (8 * (7 - i)))
	}
	s := netip.AddrFrom16(a).String()
	b.synthetic[v] = s
	return s
}

// request builds the synthetic request of e.
func (b *builder) request(ctx context.Context, e *accesslog.Entry) *http.Request {
	path := e.Path
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	// The log holds the path as the gateway matched it: escaped (nginx
	// logs the escaped request line too). Read it as the client's raw path.
	u := &url.URL{Path: path}
	if p, err := url.PathUnescape(path); err == nil {
		u.Path, u.RawPath = p, path
	}
	r := &http.Request{
		Method:     e.Method,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     make(http.Header, 2),
		Body:       http.NoBody,
		Host:       b.hosts[e.Route],
	}
	ip := b.ip(e)
	if e.APIKey != "" {
		r.Header[b.apiHeader] = []string{e.APIKey}
	}
	if e.Consumer != "" {
		r.Header[b.apiHeader] = []string{consumerKeyPrefix + e.Consumer}
	}
	if e.ClientKind == "user" && e.Client != "" && b.userHeader != "" && b.proxyAddr != "" {
		r.Header[b.userHeader] = []string{e.Client}
		r.Header["X-Forwarded-For"] = []string{ip}
		r.RemoteAddr = b.proxyAddr
	} else {
		r.RemoteAddr = net.JoinHostPort(ip, "0")
	}
	if b.byResponse && e.Status >= 100 && e.Status <= 599 {
		ctx = context.WithValue(ctx, loggedStatus{}, e.Status)
	}
	if b.byResponse && len(e.Units) > 0 {
		// A token budget counts the usage the line logged (usage.go).
		ctx = context.WithValue(ctx, loggedUnits{}, e.Units)
	}
	return r.WithContext(ctx)
}
