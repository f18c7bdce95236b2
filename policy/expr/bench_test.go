package expr

import (
	"net/http"
	"testing"
)

// BenchmarkEval measures one evaluation of a typical when and key on a
// request's variables (Vars reset per request, as the proxy does).
func BenchmarkEval(b *testing.B) {
	when, err := Compile(`request.method == "GET" && request.path.startsWith("/demo")`, Bool)
	if err != nil {
		b.Fatal(err)
	}
	key, err := Compile(`request.headers["x-tenant"]`, String)
	if err != nil {
		b.Fatal(err)
	}
	h := http.Header{"X-Tenant": {"tenant-1"}, "User-Agent": {"bench"}, "Accept": {"*/*"}}
	b.Run("when", func(b *testing.B) {
		b.ReportAllocs()
		var v Vars
		for b.Loop() {
			v.Reset()
			v.Method, v.Path, v.Header = "GET", "/demo/orders", h
			if ok, err := when.Bool(&v); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("key", func(b *testing.B) {
		b.ReportAllocs()
		var v Vars
		for b.Loop() {
			v.Reset()
			v.Method, v.Path, v.Header = "GET", "/demo/orders", h
			if s, err := key.String(&v); err != nil || s != "tenant-1" {
				b.Fatal(s, err)
			}
		}
	})
}
