package policy

import (
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy/config"
	"github.com/tollgate/gateway/ratelimit"
)

func buildLimit(c *config.LimitConfig, path string, e *problems) *Limit {
	if c.Algorithm == AlgorithmAdaptive {
		return buildAdaptive(c, path, e) // compile_adaptive.go
	}
	n := len(*e)
	rl := &ratelimit.Limit{Name: c.Name, Burst: c.Burst, MaxInFlight: c.MaxInFlight}
	l := &Limit{Limit: rl, Cost: c.Cost}
	if !validName(c.Name, false) {
		if c.Name == "" {
			e.add(path+".name", "is required")
		} else {
			e.add(path+".name", "invalid name %q (1..64 letters, digits, '-' and '_')", c.Name)
		}
	}
	alg, err := ratelimit.ParseAlgorithm(c.Algorithm)
	if err != nil {
		e.add(path+".algorithm", "%v", err)
	}
	rl.Algorithm = alg
	// spelled maps each window to its rate as written, for messages: Finish
	// sorts the rates (see ratelimit.Limit.Rates).
	spelled := make(map[time.Duration]string, len(c.Rates))
	for i, s := range c.Rates {
		r, err := ratelimit.ParseRate(s)
		if err != nil {
			e.add(fmt.Sprintf("%s.rates[%d]", path, i), "%v", err)
			continue
		}
		if isMonth(s) && c.Algorithm != ratelimit.Quota.String() {
			e.add(fmt.Sprintf("%s.rates[%d]", path, i), "rate %q: a month is a calendar period, counted only by algorithm \"quota\"", s)
			continue
		}
		for _, prev := range rl.Rates {
			if prev.Window == r.Window {
				e.add(fmt.Sprintf("%s.rates[%d]", path, i), "window %s appears twice", r.Window)
			}
		}
		rl.Rates = append(rl.Rates, r)
		spelled[r.Window] = s
	}
	switch c.Mode {
	case "enforce":
	case "shadow":
		rl.Shadow = true
	case "tag":
		rl.Shadow = true // counted as shadow is; its denials tag the request
	default:
		e.add(path+".mode", "unknown mode %q (want enforce, shadow or tag)", c.Mode)
	}
	if c.Burst < 0 {
		e.add(path+".burst", "must be positive, got %d", c.Burst)
	}
	if c.MaxInFlight < 0 {
		e.add(path+".max_in_flight", "must be positive, got %d", c.MaxInFlight)
	}
	if c.Precision != "" {
		rl.Precision = duration(c.Precision, path+".precision", true, e)
	}
	compileCalendar(rl, c, path, e)
	if c.Penalty != "" {
		rl.Penalty = duration(c.Penalty, path+".penalty", true, e)
	}
	for i, s := range c.By {
		part, err := keys.ParsePart(s)
		if err != nil {
			e.add(fmt.Sprintf("%s.by[%d]", path, i), "%v", err)
			continue
		}
		for _, prev := range l.By {
			if prev == part {
				e.add(fmt.Sprintf("%s.by[%d]", path, i), "duplicate key part %q", s)
			}
		}
		l.By = append(l.By, part)
	}
	switch c.OnMissing {
	case "shared", "":
	case "ip":
		l.OnMissing = OnMissingIP
	case "reject":
		l.OnMissing = OnMissingReject
	default:
		e.add(path+".on_missing", "unknown value %q (want shared, ip or reject)", c.OnMissing)
	}
	if l.OnMissing == OnMissingIP {
		seen := false
		for _, part := range l.By {
			switch part.Kind {
			case keys.PartAPIKey, keys.PartUser, keys.PartMTLS, keys.PartConsumer, keys.PartHeader:
				if !seen {
					l.ByIP = append(l.ByIP, keys.Part{Kind: keys.PartIP})
					seen = true
				}
			case keys.PartIP:
				if !seen {
					l.ByIP = append(l.ByIP, part)
					seen = true
				}
			default:
				l.ByIP = append(l.ByIP, part)
			}
		}
	}
	if c.Cost < 1 || c.Cost > ratelimit.MaxLimit {
		e.add(path+".cost", "must be in 1..2^53, got %d", c.Cost)
	}
	if c.CostHeader != "" {
		if !validHeaderName(c.CostHeader) {
			e.add(path+".cost_header", "invalid header name %q", c.CostHeader)
		}
		l.CostHeader = canonicalHeader(c.CostHeader)
	}
	compileDistinct(l, c, path, e)
	compileCostTrust(l, c, path, e)
	compileResponse(l, c, path, e)
	compileExprs(l, c, path, e)   // limit_expr.go
	compileAnswer(l, c, path, e)  // limit_answer.go
	compileRollout(l, c, path, e) // limit_rollout.go
	compileUsage(l, c, path, e)
	buildSync(c, rl, path, e)
	l.ExemptIPs = prefixes(c.Exempt.IPs, path+".exempt.ips", e)
	apiKeysSource(c.Exempt, path).check(e)
	if len(*e) > n || rl.Algorithm == 0 {
		return l
	}
	// The key parts and on_missing decide which requests share a counter,
	// so they are part of the counters' identity (the limit's ID); its
	// counts are not, so that a reload that changes them keeps the usage.
	rl.Scope = limitScope(l)
	// The field checks passed: let ratelimit judge the combination.
	if err := rl.Finish(); err != nil {
		e.add(path, "%v", err)
		return l
	}
	if rl.Algorithm == ratelimit.Concurrency {
		if c.Cost > rl.Capacity(0) {
			e.add(path+".cost", "%d exceeds max_in_flight %d, so every request would be denied", c.Cost, rl.MaxInFlight)
		}
		return l
	}
	for i, r := range rl.Rates {
		if capacity := rl.Capacity(i); c.Cost > capacity {
			e.add(path+".cost", "%d exceeds capacity %d of rate %q, so every request would be denied", c.Cost, capacity, spelled[r.Window])
		}
	}
	return l
}

// resolveLimits maps limit names to compiled limits, reporting unknown and
// repeated names.
func resolveLimits(names []string, byName map[string]*Limit, path string, e *problems) []*Limit {
	var out []*Limit
	seen := make(map[*Limit]bool, len(names)) // a list of thousands is checked in linear time
	for i, name := range names {
		l, ok := byName[name]
		if !ok {
			e.add(fmt.Sprintf("%s[%d]", path, i), "unknown limit %q", name)
			continue
		}
		if seen[l] {
			e.add(fmt.Sprintf("%s[%d]", path, i), "limit %q listed twice", name)
			continue
		}
		seen[l] = true
		out = append(out, l)
	}
	return out
}

// mergeLimits is global then own, without repeats.
func mergeLimits(global, own []*Limit) []*Limit {
	out := append(make([]*Limit, 0, len(global)+len(own)), global...)
	if len(own) == 0 {
		return out
	}
	inGlobal := make(map[*Limit]bool, len(global))
	for _, g := range global {
		inGlobal[g] = true
	}
	for _, l := range own {
		if !inGlobal[l] {
			out = append(out, l)
		}
	}
	return out
}

// limitScope is the text of what keys l's counters besides its definition:
// the key parts and the on_missing treatment, e.g. "by=client,ip;missing=0".
func limitScope(l *Limit) string {
	var b strings.Builder
	b.WriteString("by=")
	for i, p := range l.By {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.String())
	}
	fmt.Fprintf(&b, ";missing=%d", l.OnMissing)
	if l.Distinct != nil {
		// Counts of one value kind are not counts of another.
		b.WriteString(";distinct=" + l.Distinct.String())
	}
	if l.Exprs != nil && l.Exprs.Key != nil {
		// Another key expression keys other counters.
		fmt.Fprintf(&b, ";key=%q", l.Exprs.Key.Text)
	}
	if l.Exprs != nil && l.Exprs.Distinct != nil {
		// Another distinct expression counts other values.
		fmt.Fprintf(&b, ";distinct_expr=%q", l.Exprs.Distinct.Text)
	}
	return b.String()
}
