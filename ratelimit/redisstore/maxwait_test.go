package redisstore_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate/gateway/ratelimit"
)

// TestScriptMaxWait: the scripts stop their searches for the next
// admitting instant at ratelimit.MaxWait, written in common.lua as a tick
// count; a change of one without the other would make the two stores
// report different waits for a refill longer than that.
func TestScriptMaxWait(t *testing.T) {
	src, err := os.ReadFile("lua/common.lua")
	if err != nil {
		t.Fatal(err)
	}
	const decl = "local MAXWAIT = "
	i := strings.Index(string(src), decl)
	if i < 0 {
		t.Fatalf("lua/common.lua declares no %q", decl)
	}
	rest := string(src[i+len(decl):])
	n, err := strconv.ParseInt(rest[:strings.IndexAny(rest, " \n")], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(ratelimit.MaxWait / ratelimit.Tick); n != want {
		t.Fatalf("lua/common.lua MAXWAIT = %d ticks, ratelimit.MaxWait is %d", n, want)
	}
	if n >= 1<<53 {
		t.Fatalf("MAXWAIT %d is not exact in a double", n)
	}
}
