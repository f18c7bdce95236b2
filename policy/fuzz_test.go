package policy

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/gateway/policy/config"
)

// fuzzRoutes is the policy FuzzMatch runs against: prefixes that nest,
// differ in case, hold an escape or a sub-delimiter, a GET-only route
// beside an any-method one, and a strip_prefix route with a base path.
var fuzzRoutes = []struct {
	name, prefix string
	methods      []string
	upstream     string
	strip        bool
}{
	{"public", "/", nil, "http://up", false},
	{"api", "/api", nil, "http://up", false},
	{"expensive", "/api/expensive", nil, "http://up", false},
	{"report-get", "/api/report", []string{"GET"}, "http://up", false},
	{"report", "/api/report", nil, "http://up", false},
	{"deep", "/a/b/c", nil, "http://up", false},
	{"upper", "/Admin", nil, "http://up", false},
	{"cafe", "/caf%C3%A9", nil, "http://up", false},
	{"bang", "/x!y", nil, "http://up", false},
	{"tilde", "/%7Euser", nil, "http://up", false},
	{"pub", "/pub", nil, "http://up/public-api", true},
}

// FuzzMatch checks the router against naive models of what upstreams
// serve. Whenever the gateway forwards a path (it may instead reject it),
// every model, reading the path the upstream receives, picks the route the
// gateway picked; with strip_prefix, no model leaves the upstream's base
// path; and the forwarded path is a fixed point of NormalizePath. The
// models are written from the upstreams' documented behaviour, not from
// the gateway's code:
//
//   - decode-all (CGI, WSGI, PHP, nginx): every escape decoded, then
//     split at '/', empty and "." segments dropped, ".." resolved;
//   - segments (Go, Node): split at '/' first, each segment decoded, so
//     "%2F" stays inside its segment;
//   - servlet (Tomcat, Jetty): split at '/', each segment cut at ';',
//     decoded, dots resolved;
//   - caseless (IIS, ASP.NET): decode-all, '\' as '/', letters compared
//     without case.
func FuzzMatch(f *testing.F) {
	for _, s := range []string{
		"/", "/api/expensive", "/api/expensive/x", "/api%2Fexpensive", "/public%3F/../api/expensive",
		"/api/expensive/..%2f..%2fx", "/api/expensive;x", "/api;x/expensive", "/API/Expensive", "/admin",
		"/Admin/x", "/caf%c3%a9/x", "/café", "/x%21y", "/x!y/z", "/~user", "/%7euser", "//api//./expensive",
		"/pub/x%3F/../../internal/admin", "/pub/%2e%2e/secret", "/pub/..;/x", "/pub/a%2Fb", "/a/b%2Fc",
		"/a/b/c;v=1/d", "/a%2Fb%2Fc", "/api/expensive%3B", "/api/report", "/files/%252e%252e", "/x\\y",
		"/%00", "/api/%2e%2e/api/expensive", "/api/expensive/%2e", "/.;/api/expensive", "/api/expensive/a%2F..",
	} {
		f.Add(s, uint8(0))
	}
	f.Add("/api/report", uint8(1))
	c := config.Default()
	for _, r := range fuzzRoutes {
		rc := config.DefaultRoute()
		rc.Name, rc.PathPrefix, rc.Methods, rc.Upstream, rc.StripPrefix = r.name, r.prefix, r.methods, r.upstream, r.strip
		c.Routes = append(c.Routes, rc)
	}
	p, err := Compile(c, noEnv, nil)
	if err != nil {
		f.Fatal(err)
	}
	models := []struct {
		name    string
		resolve func(string) []string
		fold    bool
	}{
		{"decode-all", modelDecodeAll, false},
		{"segments", modelSegments, false},
		{"servlet", modelServlet, false},
		{"caseless", modelDecodeAll, true},
	}
	f.Fuzz(func(t *testing.T, raw string, m uint8) {
		method := [...]string{"GET", "HEAD", "POST"}[m%3]
		rt, path, err := p.Match("gw", method, raw)
		if err != nil {
			var pe *PathError
			if !errors.As(err, &pe) {
				t.Fatalf("Match(%q): error %v is not a *PathError", raw, err)
			}
			return
		}
		if rt == nil {
			t.Fatalf("Match(%q) = no route, but \"/\" takes every path", raw)
		}
		if again, err := NormalizePath(path); err != nil || again != path {
			t.Fatalf("Match(%q) forwards %q, which normalises to %q, %v", raw, path, again, err)
		}
		for _, md := range models {
			segs := md.resolve(path)
			if want := modelRoute(segs, method, md.fold); want != rt.Name {
				t.Errorf("%q: the gateway picks route %q and forwards %q; the %s model of the upstream reads %q and picks %q",
					raw, rt.Name, path, md.name, segs, want)
			}
		}
		if rt.StripPrefix {
			esc, _ := rt.ForwardPath(path)
			up := rt.Upstream.Path + esc
			for _, md := range models {
				segs := md.resolve(up)
				if len(segs) == 0 || !strings.EqualFold(segs[0], "public-api") {
					t.Errorf("%q: forwarded as %q, which the %s model reads as %q, outside /public-api", raw, up, md.name, segs)
				}
			}
		}
	})
}

// modelRoute is the route a naive router picks for the decoded segments
// of a path: the route whose prefix has the most segments, all equal to
// the path's first ones; among equal prefixes, one listing the method
// (GET covers HEAD) beats one taking all.
func modelRoute(segs []string, method string, fold bool) string {
	best, bestLen, bestListed := "", -1, false
	for _, r := range fuzzRoutes {
		if len(r.methods) > 0 && !slices.Contains(r.methods, method) && !(method == "HEAD" && slices.Contains(r.methods, "GET")) {
			continue
		}
		pre := modelDecodeAll(r.prefix)
		if len(pre) > len(segs) {
			continue
		}
		ok := true
		for i := range pre {
			ok = ok && (pre[i] == segs[i] || fold && strings.EqualFold(pre[i], segs[i]))
		}
		listed := len(r.methods) > 0
		if ok && (len(pre) > bestLen || len(pre) == bestLen && listed && !bestListed) {
			best, bestLen, bestListed = r.name, len(pre), listed
		}
	}
	return best
}

// decode decodes every %XX in s (a malformed escape is kept).
func decode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// resolveDots drops empty and "." segments and resolves "..".
func resolveDots(segs []string) []string {
	var out []string
	for _, s := range segs {
		switch s {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
		}
	}
	return out
}

func modelDecodeAll(p string) []string {
	return resolveDots(strings.FieldsFunc(decode(p), func(r rune) bool { return r == '/' || r == '\\' }))
}

func modelSegments(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		out = append(out, decode(s))
	}
	return resolveDots(out)
}

func modelServlet(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		s, _, _ = strings.Cut(s, ";")
		out = append(out, decode(s))
	}
	return resolveDots(out)
}
