package policy

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
)

// maxCORSMaxAge bounds cors.max_age: browsers cap a preflight's cache
// lifetime (two hours in Chromium, a day in Firefox) anyway.
const maxCORSMaxAge = 24 * time.Hour

// maxCORSEntries bounds each list of a cors table.
const maxCORSEntries = 256

// CORS is a route's compiled cors table. Its header values are built
// once, shared read-only.
type CORS struct {
	// AnyOrigin is origins = ["*"].
	AnyOrigin bool
	// Credentials sends Access-Control-Allow-Credentials: true.
	Credentials bool
	// origins are the allowed origins, lower case, default ports
	// dropped ("https://example.com").
	origins map[string]struct{}
	// methods are the methods a preflight may ask for (exact, as sent).
	methods map[string]struct{}
	// anyHeader allows every request header a preflight asks for.
	anyHeader bool
	// headers are the allowed request headers, lower case.
	headers map[string]struct{}
	// AllowMethods, MaxAge and Expose are the header values of a
	// preflight's answer and of actual answers (nil: not sent).
	AllowMethods, MaxAge, Expose []string
}

// corsSimpleMethods are the methods a browser sends without asking, so a
// preflight naming one is allowed whatever methods says.
var corsSimpleMethods = []string{"GET", "HEAD", "POST"}

// alwaysExposed are the response headers a page may always read from a
// CORS route's answers: the rate-limit headers and Retry-After (so that a
// page can back off) and the request id (so that it can report it).
var alwaysExposed = []string{"RateLimit", "RateLimit-Policy", "Retry-After", "X-RateLimit-Limit",
	"X-RateLimit-Remaining", "X-RateLimit-Reset", "X-Request-Id"}

// AllowsOrigin reports whether origin, a request's Origin header, is
// allowed: exactly one of the configured origins (scheme and host compared
// without case; "null" and anything else never match unless origins is
// ["*"]).
func (c *CORS) AllowsOrigin(origin string) bool {
	if c.AnyOrigin {
		return true
	}
	if _, ok := c.origins[origin]; ok {
		return true
	}
	if !hasUpper(origin) {
		return false
	}
	_, ok := c.origins[strings.ToLower(origin)]
	return ok
}

// AllowsMethod reports whether a preflight may ask for method.
func (c *CORS) AllowsMethod(method string) bool {
	if _, ok := c.methods[method]; ok {
		return true
	}
	for _, m := range corsSimpleMethods {
		if m == method {
			return true
		}
	}
	return false
}

// AllowsHeaders reports whether every header of a preflight's
// Access-Control-Request-Headers list is allowed.
func (c *CORS) AllowsHeaders(list string) bool {
	if len(list) > 4096 {
		return false
	}
	for list != "" {
		var h string
		h, list, _ = strings.Cut(list, ",")
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if !keys.IsToken(h) {
			return false
		}
		if c.anyHeader {
			continue
		}
		if _, ok := c.headers[strings.ToLower(h)]; !ok {
			return false
		}
	}
	return true
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

func buildCORS(c *config.CORSConfig, path string, e *problems) *CORS {
	if c == nil {
		return nil
	}
	cors := &CORS{Credentials: c.Credentials, origins: map[string]struct{}{}, methods: map[string]struct{}{}, headers: map[string]struct{}{}}
	if len(c.Origins) == 0 {
		e.add(path+".origins", "is required: the origins allowed, or [\"*\"] for any")
	}
	for _, list := range []struct {
		name string
		n    int
	}{{"origins", len(c.Origins)}, {"methods", len(c.Methods)}, {"headers", len(c.Headers)}, {"expose_headers", len(c.ExposeHeaders)}} {
		if list.n > maxCORSEntries {
			e.add(path+"."+list.name, "at most %d entries, got %d", maxCORSEntries, list.n)
			return cors
		}
	}
	for i, o := range c.Origins {
		p := fmt.Sprintf("%s.origins[%d]", path, i)
		if o == "*" {
			if len(c.Origins) > 1 {
				e.add(p, "\"*\" allows every origin: list it alone")
			}
			cors.AnyOrigin = true
			continue
		}
		n, err := normalOrigin(o)
		if err != "" {
			e.add(p, "%q: %s", o, err)
			continue
		}
		cors.origins[n] = struct{}{}
	}
	if cors.AnyOrigin && c.Credentials {
		e.add(path+".credentials", "cannot be true with origins = [\"*\"]: any site could then read answers with the user's cookies; list the origins")
	}
	methods := c.Methods
	if len(methods) == 0 {
		methods = corsSimpleMethods
	}
	for i, m := range methods {
		if !keys.IsToken(m) {
			e.add(fmt.Sprintf("%s.methods[%d]", path, i), "invalid method %q", m)
			continue
		}
		m = strings.ToUpper(m)
		cors.methods[m] = struct{}{}
	}
	cors.AllowMethods = []string{strings.ToUpper(strings.Join(methods, ", "))}
	for i, h := range c.Headers {
		if h == "*" {
			cors.anyHeader = true
			continue
		}
		if !keys.IsToken(h) || len(h) > maxHeaderNameLen {
			e.add(fmt.Sprintf("%s.headers[%d]", path, i), "invalid header name %q", h)
			continue
		}
		cors.headers[strings.ToLower(h)] = struct{}{}
	}
	expose := append([]string(nil), alwaysExposed...)
	for i, h := range c.ExposeHeaders {
		if !keys.IsToken(h) || h == "*" || len(h) > maxHeaderNameLen {
			e.add(fmt.Sprintf("%s.expose_headers[%d]", path, i), "invalid header name %q (name each header)", h)
			continue
		}
		expose = append(expose, h)
	}
	cors.Expose = []string{strings.Join(expose, ", ")}
	if c.MaxAge != "" {
		d := duration(c.MaxAge, path+".max_age", false, e)
		if d > maxCORSMaxAge {
			e.add(path+".max_age", "at most %s, got %s", maxCORSMaxAge, c.MaxAge)
		}
		cors.MaxAge = []string{strconv.FormatInt(int64(d/time.Second), 10)}
	}
	return cors
}

// normalOrigin checks an origin (scheme://host[:port]) and returns it
// lower case with a default port dropped, as browsers send it; or a
// problem's text.
func normalOrigin(o string) (string, string) {
	if o == "null" {
		return "", "\"null\" is the origin of sandboxed frames, files and data: URLs, which any page can make: not allowed"
	}
	if strings.Contains(o, "*") {
		return "", "wildcards are not supported: list each origin (a pattern like https://*.example.com is easy to get wrong)"
	}
	u, err := url.Parse(o)
	switch {
	case err != nil || u.Scheme == "" || u.Opaque != "":
		return "", "want scheme://host[:port]"
	case u.Host == "" || u.User != nil:
		return "", "want scheme://host[:port], with a host and no user"
	case u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#"):
		return "", "an origin has no path, query or fragment (not even a trailing '/')"
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			// Browsers send an internationalized host in its ASCII
			// form: this spelling would never match.
			return "", "write the host in its ASCII (punycode) form, as browsers send it (xn--…)"
		}
	}
	if strings.HasSuffix(host, ".") {
		return "", "a trailing dot makes a different origin: drop it"
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return "", "invalid port"
		}
		if (scheme == "https" && n == 443) || (scheme == "http" && n == 80) {
			port = ""
		}
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		return scheme + "://" + host + ":" + port, ""
	}
	return scheme + "://" + host, ""
}
