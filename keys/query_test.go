package keys

import "testing"

// TestWithoutQueryParam: the API key's parameter goes in every spelling
// queryValue reads it in; everything else stays byte for byte.
func TestWithoutQueryParam(t *testing.T) {
	for _, tc := range []struct{ q, want string }{
		{"", ""},
		{"api_key=k", ""},
		{"a=1&api_key=k&b=2", "a=1&b=2"},
		{"api_key=k&api_key=j", ""},
		{"api%5Fkey=k&b=%41", "b=%41"},
		{"api+key=k", "api+key=k"}, // '+' is a space: another name
		{"API_KEY=k", "API_KEY=k"},
		{"api_key", ""},
		{"api_key&z", "z"},
		{"b=%zz&api_key=k", "b=%zz"},
		{"a=1;api_key=k", "a=1;api_key=k"}, // ';' separates nothing
		{"b=%41%2b+c&c", "b=%41%2b+c&c"},
		{"%zz=1&api_key=2", "%zz=1"},
	} {
		if got := WithoutQueryParam(tc.q, "api_key"); got != tc.want {
			t.Errorf("WithoutQueryParam(%q) = %q, want %q", tc.q, got, tc.want)
		}
	}
}
