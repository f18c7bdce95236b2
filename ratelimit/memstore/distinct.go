package memstore

import (
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/window"
)

// distinctCell is the cell of a distinct limit (one window). Its
// decisions need the hit's value, which the cell interface does not
// carry, so table.apply hands it the whole args (applyDistinct); the
// interface's own methods decide for value 0.
type distinctCell struct {
	exp int64
	st  window.DistinctState
}

func newDistinctCell(l *ratelimit.Limit, now int64) *distinctCell {
	c := &distinctCell{}
	c.st.Init(l.ParamsOf(0), now)
	c.exp = c.st.Expiry(l.ParamsOf(0))
	return c
}

// apply runs o with a's value; it returns the expiry for opExpiry.
func (c *distinctCell) apply(o op, l *ratelimit.Limit, a *args) int64 {
	switch o {
	case opCheck:
		c.checkValue(l, a.now, a.value, a.d)
	case opTake:
		c.takeValue(l, a.now, a.value)
	case opReport:
		c.report(l, a.now, a.cost, a.d)
	case opUsage:
		c.usage(l, a.now, a.out)
	case opExpiry:
		return c.exp
	}
	return 0
}

// checkValue decides value v at now (window.DistinctState.Allow): a
// distinct limit counts values, so the hit's cost plays no part.
func (c *distinctCell) checkValue(l *ratelimit.Limit, now int64, v uint64, d *ratelimit.Decision) {
	ok, ra := c.st.Allow(l.ParamsOf(0), now, v)
	*d = ratelimit.Decision{Allowed: ok, RetryAfter: time.Duration(ra) * ratelimit.Tick}
}

func (c *distinctCell) takeValue(l *ratelimit.Limit, now int64, v uint64) {
	p := l.ParamsOf(0)
	c.st.Take(p, now, v)
	c.exp = c.st.Expiry(p)
}

func (c *distinctCell) check(l *ratelimit.Limit, now, _ int64, d *ratelimit.Decision) {
	c.checkValue(l, now, 0, d)
}

func (c *distinctCell) take(l *ratelimit.Limit, now, _ int64) { c.takeValue(l, now, 0) }

func (c *distinctCell) report(l *ratelimit.Limit, now, _ int64, d *ratelimit.Decision) {
	p := l.ParamsOf(0)
	d.Window = 0
	d.Limit = p.Capacity
	d.Remaining = c.st.Remaining(p, now)
	d.Reset = time.Duration(c.st.Reset(p, now)) * ratelimit.Tick
}

func (c *distinctCell) usage(l *ratelimit.Limit, now int64, out []ratelimit.WindowUsage) {
	p := l.ParamsOf(0)
	rem := c.st.Remaining(p, now)
	out[0] = ratelimit.WindowUsage{Rate: l.Rates[0], Used: p.Capacity - rem, Remaining: rem,
		Reset: time.Duration(c.st.Reset(p, now)) * ratelimit.Tick}
}

func (c *distinctCell) release(int64) bool { return false }

func (c *distinctCell) giveBack(*ratelimit.Limit, int64, int64) {}

// settle does nothing: a distinct limit counts values, not units, so a
// token budget's settlement (refused for distinct limits at load) has
// nothing to give back.
func (c *distinctCell) settle(*ratelimit.Limit, int64, int64, int64) {}

func (c *distinctCell) expiry() int64 { return c.exp }

func (c *distinctCell) bytes() int64 { return 8 + c.st.Bytes() }
