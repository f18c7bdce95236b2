package headers

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSanitize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/v1/x", "/v1/x"},
		{"/\xff/x", "/\uFFFD/x"},
		{strings.Repeat("a", 256), strings.Repeat("a", 256)},
		{strings.Repeat("a", 257), strings.Repeat("a", 256) + "…"},
		// A cut inside a multi-byte rune leaves no broken UTF-8.
		{strings.Repeat("a", 255) + "é", strings.Repeat("a", 255) + "\uFFFD…"},
	}
	for _, tt := range tests {
		got := Sanitize(tt.in)
		if got != tt.want || !utf8.ValidString(got) {
			t.Errorf("Sanitize(%.20q…) = %.30q…, want %.30q…", tt.in, got, tt.want)
		}
	}
}
