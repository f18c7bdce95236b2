package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/gateway/internal/redistest"
)

// TestRedisOldLibraryRetired: a gateway starting on a Redis that holds
// the Function library of an older gateway version, unused for more than
// a day by the record every version keeps in the hash
// tollgate-libraries, deletes it; it keeps another old version's library
// used an hour ago, a library not named like a gateway's, and its own,
// and records its own as in use. Its requests are decided meanwhile.
func TestRedisOldLibraryRetired(t *testing.T) {
	t.Parallel()
	rs := redistest.Standalone(t)
	const stale, recent = "tollgate_00000000000000aa", "tollgate_00000000000000bb"
	for _, name := range []string{stale, recent, "mylib"} {
		src := "#!lua name=" + name + "\nredis.register_function('" + name + "_f', function() return 1 end)\n"
		if _, err := rs.Do("FUNCTION", "LOAD", src); err != nil {
			t.Fatal(err)
		}
	}
	ago := func(d time.Duration) string { return strconv.FormatInt(time.Now().Add(-d).UnixMicro(), 10) }
	if _, err := rs.Do("HSET", "tollgate-libraries", stale, ago(25*time.Hour), recent, ago(time.Hour)); err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "redis.toml.tmpl", gwOpts{Data: redisData(rs.Addr, nil, "deny", "1s",
		limitTOML("lib", "100/minute", "fixed_window")+routeTOML("lib", "/lib", "lib"))})
	libraries := func() []string {
		v, err := rs.Do("FUNCTION", "LIST")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, lib := range v.([]any) {
			l := lib.([]any)
			for i := 0; i+1 < len(l); i += 2 {
				if l[i] == "library_name" {
					names = append(names, l[i+1].(string))
				}
			}
		}
		slices.Sort(names)
		return names
	}
	c := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for slices.Contains(libraries(), stale) {
		if time.Now().After(deadline) {
			t.Fatalf("the stale library is still loaded: %v", libraries())
		}
		if r := get(t, c, g.url("/lib"), nil); r.Status != 200 {
			t.Fatalf("request while retiring: %s", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	names := libraries()
	var own string
	for _, n := range names {
		if strings.HasPrefix(n, "tollgate_") && n != recent {
			own = n
		}
	}
	if len(names) != 3 || !slices.Contains(names, recent) || !slices.Contains(names, "mylib") || own == "" {
		t.Fatalf("libraries left %v, want the recent old one, mylib and the gateway's own", names)
	}
	v, err := rs.Do("HGET", "tollgate-libraries", own)
	if err != nil || v == nil {
		t.Fatalf("the gateway's library %s has no record: %v %v", own, v, err)
	}
	if r := get(t, c, g.url("/lib"), nil); r.Status != 200 {
		t.Fatalf("after retiring: %s", r)
	}
	t.Log(fmt.Sprint("libraries left: ", names))
}
