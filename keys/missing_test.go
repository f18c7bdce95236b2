package keys

import (
	"net/http"
	"testing"
)

func TestMissing(t *testing.T) {
	full := Identity{APIKey: "k", User: "u"}
	tenant := http.Header{"X-Tenant": {"t"}}
	tests := []struct {
		by     []string
		id     Identity
		h      http.Header
		want   bool
		naming string
	}{
		{[]string{"client", "ip", "route", "method"}, Identity{}, nil, false, ""},
		{[]string{"api_key"}, full, nil, false, "an API key"},
		{[]string{"api_key"}, Identity{User: "u"}, nil, true, "an API key"},
		{[]string{"user"}, Identity{APIKey: "k"}, nil, true, "an authenticated user"},
		{[]string{"header:X-Tenant"}, full, tenant, false, "header X-Tenant"},
		{[]string{"header:X-Tenant"}, full, http.Header{"X-Tenant": {""}}, true, "header X-Tenant"},
		{[]string{"api_key", "header:X-Tenant"}, full, nil, true, "an API key and header X-Tenant"},
	}
	for _, tt := range tests {
		ps := parts(t, tt.by...)
		if got := Missing(ps, &tt.id, tt.h); got != tt.want {
			t.Errorf("Missing(%v, %+v, %v) = %v, want %v", tt.by, tt.id, tt.h, got, tt.want)
		}
		if got := MissingNames(ps); got != tt.naming {
			t.Errorf("MissingNames(%v) = %q, want %q", tt.by, got, tt.naming)
		}
	}
}
