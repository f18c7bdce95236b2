package policy

import (
	"fmt"

	"github.com/tollgate/gateway/keys"
)

// maxQuotaCounters bounds the counters one quota answer reads, so that a
// client cannot make one request cost hundreds of store calls.
const maxQuotaCounters = 64

// resolveQuota resolves a quota answer's route names (none: every route)
// and checks that it reads at most maxQuotaCounters counters.
func resolveQuota(q *Quota, names []string, routes []*Route, path string, e *problems) {
	if len(names) == 0 {
		q.Routes = routes
	}
	for i, name := range names {
		var found *Route
		for _, rt := range routes {
			if rt.Name == name {
				found = rt
			}
		}
		switch {
		case found == nil:
			e.add(fmt.Sprintf("%s[%d]", path, i), "unknown route %q", name)
			continue
		case containsRoute(q.Routes, found):
			e.add(fmt.Sprintf("%s[%d]", path, i), "route %q listed twice", name)
			continue
		}
		q.Routes = append(q.Routes, found)
	}
	if n := quotaCounters(q.Routes); n > maxQuotaCounters {
		e.add(path, "a quota answer would read %d counters, more than %d: name fewer routes", n, maxQuotaCounters)
	}
}

func containsRoute(rs []*Route, r *Route) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// quotaCounters counts the counters a quota answer over routes reads: a
// limit keyed by route (or method, or a header) once per route it is on,
// any other limit once.
func quotaCounters(routes []*Route) int {
	seen := map[*Limit]bool{}
	n := 0
	for _, rt := range routes {
		for _, l := range rt.Limits {
			perRoute := false
			for _, p := range l.By {
				perRoute = perRoute || p.Kind == keys.PartRoute || p.Kind == keys.PartMethod || p.Kind == keys.PartHeader
			}
			if perRoute || !seen[l] {
				n++
			}
			seen[l] = true
		}
	}
	return n
}
