// Package accuracy measures how far each rate-limiting algorithm strays from
// the exact sliding window ("at most L units in any interval of length W").
//
// It has two halves. The trace generators build seeded, deterministic
// request traces — uniform Poisson, bursty on/off, diurnal, and an
// adversary that aims bursts at window or bucket boundaries — over a
// population of clients (keys) on a virtual clock of ticks. Evaluate replays
// a trace through one algorithm's pure state types (the same math every
// store runs) and, beside it, through the exact sliding log fed the same
// admitted history, and counts the decisions on which they disagree.
//
// Nothing here reads the clock or starts goroutines; the accuracy command
// runs traces and algorithms in parallel.
package accuracy

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// Arrival is one request of a trace.
type Arrival struct {
	// At is the arrival instant in ticks (ratelimit.Tick).
	At int64
	// Key is the client, 0 ≤ Key < Trace.Keys.
	Key uint32
	// Cost is the units the request asks for, ≥ 1.
	Cost uint32
}

// Trace is a request trace: arrivals in non-decreasing order of At.
type Trace struct {
	// Name says which generator built it, e.g. "poisson".
	Name string
	// Keys is the number of distinct clients.
	Keys int
	// Arrivals are the requests, sorted by At (ties keep generation order).
	Arrivals []Arrival
}

// Units returns the sum of the costs of t's arrivals.
func (t *Trace) Units() int64 {
	var n int64
	for _, a := range t.Arrivals {
		n += int64(a.Cost)
	}
	return n
}

// Origin is the instant, in ticks, at which every generated trace starts:
// 2023-11-14T22:13:20Z, deliberately not aligned to any common window so
// that the first window of a trace is a partial one.
const Origin = int64(1_700_000_000_000_000)

// Config shapes a generated trace. The zero value of every field but Rate
// means the default noted beside it.
type Config struct {
	// Seed makes the trace reproducible: equal Configs give equal traces.
	Seed uint64
	// Keys is the number of clients. Default 1000.
	Keys int
	// Requests is the number of arrivals aimed at; the generators choose
	// the trace's duration so that the expected count is Requests (the
	// adversary hits it exactly, up to rounding to whole periods).
	// Default 1,000,000.
	Requests int
	// Rate is the limit the traffic is shaped against (L per W): client
	// rates are drawn as multiples of L/W. Required.
	Rate ratelimit.Rate
	// Median is the median client's mean rate as a fraction of L/W.
	// Client rates are log-normal around it. Default 0.25.
	Median float64
	// Spread is the standard deviation of the natural log of client rates.
	// With the defaults about 8% of clients (and about 35% of requests)
	// run above the limit on average. Default 1.
	Spread float64
	// CostShare is the fraction of requests that cost 2..4 units instead
	// of 1 (clamped to L). Default 0.05; negative means none.
	CostShare float64
	// Slot is the granularity the adversary aims at: W to attack windows,
	// the counter's precision to attack its buckets. Its clumps are
	// Slot/64 wide. Default W.
	Slot time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if err := c.Rate.Validate(); err != nil {
		return c, fmt.Errorf("accuracy: rate: %w", err)
	}
	if c.Keys <= 0 {
		c.Keys = 1000
	}
	if c.Requests <= 0 {
		c.Requests = 1_000_000
	}
	if c.Median <= 0 {
		c.Median = 0.25
	}
	if c.Spread <= 0 {
		c.Spread = 1
	}
	if c.CostShare == 0 {
		c.CostShare = 0.05
	}
	if c.Slot <= 0 {
		c.Slot = c.Rate.Window
	}
	if c.Slot%ratelimit.Tick != 0 || c.Slot > c.Rate.Window {
		return c, fmt.Errorf("accuracy: slot %s must be whole ticks and at most the window", c.Slot)
	}
	return c, nil
}

// generator holds what every generator needs: the random source, the
// per-key mean rates (arrivals per tick) and the duration.
type generator struct {
	c     Config
	rng   *rand.Rand
	rates []float64 // mean arrivals per tick, per key
	dur   int64     // ticks
	out   []Arrival
}

func newGenerator(c Config, salt uint64) (*generator, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &generator{c: c, rng: rand.New(rand.NewPCG(c.Seed, salt))}
	base := float64(c.Rate.Limit) / float64(c.Rate.Window/ratelimit.Tick)
	var total float64
	g.rates = make([]float64, c.Keys)
	for k := range g.rates {
		m := c.Median * math.Exp(c.Spread*g.rng.NormFloat64())
		g.rates[k] = m * base
		total += g.rates[k]
	}
	g.dur = max(int64(float64(c.Requests)/total), 1)
	g.out = make([]Arrival, 0, c.Requests+c.Requests/16)
	return g, nil
}

// cost draws one request's cost.
func (g *generator) cost() uint32 {
	if g.c.CostShare > 0 && g.rng.Float64() < g.c.CostShare {
		return uint32(min(2+g.rng.Int64N(3), g.c.Rate.Limit))
	}
	return 1
}

// gap draws an exponential inter-arrival time in ticks at rate (per tick).
func (g *generator) gap(rate float64) float64 {
	return g.rng.ExpFloat64() / rate
}

func (g *generator) add(t float64, key int) {
	g.out = append(g.out, Arrival{At: Origin + int64(t), Key: uint32(key), Cost: g.cost()})
}

func (g *generator) trace(name string) *Trace {
	slices.SortStableFunc(g.out, func(a, b Arrival) int { return cmp.Compare(a.At, b.At) })
	return &Trace{Name: name, Keys: g.c.Keys, Arrivals: g.out}
}

// Poisson returns a trace in which every client sends a Poisson process at
// its own mean rate.
func Poisson(c Config) (*Trace, error) {
	g, err := newGenerator(c, 1)
	if err != nil {
		return nil, err
	}
	for k, r := range g.rates {
		for t := g.gap(r); t < float64(g.dur); t += g.gap(r) {
			g.add(t, k)
		}
	}
	return g.trace("poisson"), nil
}

// Bursty returns an on/off trace: every client alternates silent periods
// (exponential, mean 2W) with bursts (exponential, mean W/2) in which it
// sends Poisson at five times its mean rate, so that its long-run mean is
// the same as in Poisson.
func Bursty(c Config) (*Trace, error) {
	g, err := newGenerator(c, 2)
	if err != nil {
		return nil, err
	}
	w := float64(g.c.Rate.Window / ratelimit.Tick)
	on, off := w/2, 2*w
	for k, r := range g.rates {
		peak := r * (on + off) / on
		// Start in the stationary state: on with probability on/(on+off)
		// (both phases are memoryless, so the residual is exponential too).
		t := 0.0
		if g.rng.Float64()*(on+off) >= on {
			t = g.rng.ExpFloat64() * off
		}
		for t < float64(g.dur) {
			end := t + g.rng.ExpFloat64()*on
			for t += g.gap(peak); t < end && t < float64(g.dur); t += g.gap(peak) {
				g.add(t, k)
			}
			t = end + g.rng.ExpFloat64()*off
		}
	}
	return g.trace("bursty"), nil
}

// Diurnal returns a trace whose rates follow one compressed "day" over the
// trace's duration: every client's rate is its mean times
// 1 + 0.8·sin(2π·t/duration − π/2), from a night at 0.2× through a noon peak
// at 1.8× and back. Arrivals are drawn by thinning a Poisson process at the
// peak rate.
func Diurnal(c Config) (*Trace, error) {
	g, err := newGenerator(c, 3)
	if err != nil {
		return nil, err
	}
	const amp = 0.8
	d := float64(g.dur)
	for k, r := range g.rates {
		peak := r * (1 + amp)
		for t := g.gap(peak); t < d; t += g.gap(peak) {
			level := 1 + amp*math.Sin(2*math.Pi*t/d-math.Pi/2)
			if g.rng.Float64()*(1+amp) < level {
				g.add(t, k)
			}
		}
	}
	return g.trace("diurnal"), nil
}

// Adversary returns a trace of clients that aim at boundaries: around every
// multiple b of W (aligned to absolute time, as fixed windows and counter
// buckets are, so b is a bucket boundary too) each client sends L requests
// spread evenly over a slot of width δ = Config.Slot/64 just before b — [b−δ, b) at even
// boundaries, [b−2δ, b−δ) at odd ones — and L more over [b, b+δ).
//
// The clump after b is the classic fixed-window attack (2L across one
// boundary). The clump before b targets the sliding counter: the counter
// weighs its oldest bucket as if its units were spread evenly, so units
// packed at the bucket's end are undercounted once that bucket is the
// oldest, and alternating the slot makes every other clump land while the
// previous one is still inside the real window.
//
// To cover at least 20 windows the adversary uses fewer clients than
// Config.Keys when Requests is too small for all of them; client rates and
// costs are ignored (every request costs 1).
func Adversary(c Config) (*Trace, error) {
	g, err := newGenerator(c, 4)
	if err != nil {
		return nil, err
	}
	period := int64(g.c.Rate.Window / ratelimit.Tick)
	l := g.c.Rate.Limit
	const minPeriods = 20
	keys := int64(g.c.Keys)
	if perKey := 2 * l * minPeriods; keys*perKey > int64(g.c.Requests) {
		keys = max(int64(g.c.Requests)/perKey, 1)
	}
	periods := max(int64(g.c.Requests)/(keys*2*l), 1)
	delta := max(int64(g.c.Slot/ratelimit.Tick)/64, 1)
	first := (Origin/period + 1) * period // first boundary after Origin
	g.out = g.out[:0]
	for b := range periods {
		edge := first + b*period
		before := edge - delta
		if b%2 == 1 {
			before -= delta
		}
		for k := range keys {
			for i := range l {
				// i/l of the way through each slot, with a per-key
				// sub-tick shift so keys do not all land on one tick.
				off := (i*delta + k%delta) / l
				g.out = append(g.out,
					Arrival{At: before + off, Key: uint32(k), Cost: 1},
					Arrival{At: edge + off, Key: uint32(k), Cost: 1})
			}
		}
	}
	g.c.Keys = int(keys)
	name := "adversary-window"
	if g.c.Slot != g.c.Rate.Window {
		name = "adversary-bucket"
	}
	return g.trace(name), nil
}
