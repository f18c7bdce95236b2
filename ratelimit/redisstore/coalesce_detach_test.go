package redisstore

import "testing"

// TestDetachSharesNothing: a queued call's arguments keep their values
// when the caller's pooled set is reused. Before, the header (*bytesArg)
// was queued as the pointer itself, so a caller whose deadline passed
// after a batch took its call reset and reused the header while the batch
// wrote it: a data race, and a call written to Redis with another call's
// header.
func TestDetachSharesNothing(t *testing.T) {
	hdr := &bytesArg{b: []byte("header-of-call-1")}
	limit := "packed-limit"
	raw := []byte("raw")
	args := []any{hdr, &limit, raw, "plain"}
	got := detach(args)
	copy(hdr.b, "HEADER-OF-CALL-2")
	limit = "another-limit"
	copy(raw, "RAW")
	want := []string{"header-of-call-1", "packed-limit", "raw", "plain"}
	for i, w := range want {
		if s, ok := got[i].(string); !ok || s != w {
			t.Errorf("arg %d = %#v after the caller reused its set, want %q", i, got[i], w)
		}
	}
}
