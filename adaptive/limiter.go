// Package adaptive is a concurrency limit learned from latency: the number
// of requests a gateway lets into an upstream at once follows the ratio of
// the upstream's base latency to the latency it shows now (a gradient, as
// Netflix's concurrency-limits and Envoy's adaptive concurrency filter
// compute it), with a queue allowance, smoothed, between a floor and a
// ceiling. Requests carry a Priority: below the limit, a share is kept for
// critical requests and sheddable ones are refused before normal ones.
//
// The state is one gateway's: each gateway sees the upstream's latency
// itself, so no store is shared. The package knows nothing of HTTP; time is
// a parameter of every call that reads it.
package adaptive

import (
	"container/list"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Config is a limiter's settings. Zero fields take the defaults said.
type Config struct {
	// MinLimit is the floor of the limit, ≥ 1: the limit, and a probe of
	// the base latency, never go below it. Default 1.
	MinLimit int64
	// MaxLimit is the ceiling of the limit. Default 1000.
	MaxLimit int64
	// InitialLimit is the limit before any latency is known; it is
	// clamped to [MinLimit, MaxLimit]. Default MinLimit·4, at least 8.
	InitialLimit int64
	// Reserve is the share of the limit kept for critical requests, in
	// [0, 0.5]: normal requests are admitted up to (1 − Reserve) of the
	// limit, sheddable ones up to (1 − Reserve)² of it.
	Reserve float64
	// ProbeInterval is the mean time between two measures of the base
	// latency; each is drawn within ±25% of it so that gateways started
	// together do not probe together. Default 30s.
	ProbeInterval time.Duration
	// Window is the least length of a sample window: the limit changes at
	// most once per window, and a window lasts at least two base
	// latencies and MinSamples completions. Default 100ms.
	Window time.Duration
	// MinSamples is the least number of completions a window needs.
	// Default 8.
	MinSamples int64
	// MaxWaiting bounds the requests waiting for a slot. Default MaxLimit.
	MaxWaiting int64
	// Seed seeds the probe interval's jitter (0: a fixed seed).
	Seed uint64
}

// The gradient's constants. tolerance lets latency rise this much over
// the base before the limit falls (noise is not queueing); smoothing is
// the weight of a window's new estimate; the gradient is clamped to
// [minGradient, maxGradient] so that one window moves the limit at most
// by half or double.
const (
	tolerance   = 1.05
	smoothing   = 0.5
	minGradient = 0.5
	maxGradient = 2.0
	// atMinProbe is the number of windows in a row with the gradient at
	// its floor (latency at least twice the base, while each window cuts
	// the limit) after which the base latency is measured again at once:
	// a queue drains within a few such windows, so latency that stays
	// high is a base that rose (a slower release of the upstream), which
	// would otherwise hold the limit at the floor until the next
	// scheduled probe.
	atMinProbe = 5
)

func (c Config) withDefaults() Config {
	if c.MinLimit < 1 {
		c.MinLimit = 1
	}
	if c.MaxLimit <= 0 {
		c.MaxLimit = 1000
	}
	c.MaxLimit = max(c.MaxLimit, c.MinLimit)
	if c.InitialLimit <= 0 {
		c.InitialLimit = max(8, c.MinLimit*4)
	}
	c.InitialLimit = min(max(c.InitialLimit, c.MinLimit), c.MaxLimit)
	c.Reserve = min(max(c.Reserve, 0), 0.5)
	if c.ProbeInterval <= 0 {
		c.ProbeInterval = 30 * time.Second
	}
	if c.Window <= 0 {
		c.Window = 100 * time.Millisecond
	}
	if c.MinSamples <= 0 {
		c.MinSamples = 8
	}
	if c.MaxWaiting <= 0 {
		c.MaxWaiting = c.MaxLimit
	}
	return c
}

// Verdict is a limiter's answer to a request.
type Verdict uint8

// The verdicts of TryAcquire.
const (
	// Admit: the request holds a slot; Release gives it back.
	Admit Verdict = iota
	// Probe: the limit is lowered while the base latency is measured, and
	// the request is within the limit it would have had: it waits (Wait
	// with probe set) and is admitted when the probe ends, or at the
	// end of its wait if the learned limit has room then.
	Probe
	// Full: the limit is reached for the request's priority; it may wait
	// for a slot (Wait) or be shed.
	Full
)

type phase uint8

const (
	phaseNone    phase = iota
	phaseDrain         // probing: waiting for the in-flight count to fall to the probe limit
	phaseMeasure       // probing: measuring the base latency at the probe limit
)

// Limiter is one adaptive limit's state. Safe for concurrent use; the
// decision (TryAcquire) and a release take no lock and allocate nothing.
type Limiter struct {
	cfg  Config
	base time.Time

	inflight atomic.Int64
	// thr are the admission thresholds by priority now (lowered during a
	// probe), full those of the learned limit.
	thr, full [Priorities]atomic.Int64
	probing   atomic.Bool
	peak      atomic.Int64
	waiting   atomic.Int64
	shed      [Priorities]atomic.Uint64

	// The current window's samples: latencies of successful exchanges,
	// and the count of failed ones (no latency: an error or a 5xx
	// answered fast is not spare capacity).
	hist    histogram
	samples atomic.Int64
	errs    atomic.Int64
	// windowEnd is the earliest end of the window, in ns since base.
	windowEnd atomic.Int64
	closing   atomic.Bool

	mu sync.Mutex // the fields below, and the waiting room
	// limit is the learned limit; minRTT the base latency (0: not yet
	// measured) and sampleRTT the last window's median.
	limit             float64
	minRTT, sampleRTT time.Duration
	phase             phase
	probeDeadline     time.Time
	nextProbe         time.Time
	atMin             int // windows in a row with the gradient at its floor
	rng               *rand.Rand
	queues            [Priorities]list.List // of *waiter
	counts            [nBuckets]uint32      // scratch of a window's close
	windows           uint64
}

// New returns a limiter at cfg's initial limit, which measures the base
// latency first: until it is known, requests are admitted up to half the
// initial limit and the others wait for the measure (never refused for it).
func New(cfg Config, now time.Time) *Limiter {
	cfg = cfg.withDefaults()
	l := &Limiter{cfg: cfg, base: now, limit: float64(cfg.InitialLimit),
		rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed))}
	for p := range l.queues {
		l.queues[p].Init()
	}
	l.startProbe(now)
	l.phase = phaseMeasure // nothing is in flight yet
	return l
}

// Config returns the limiter's settings, defaults applied.
func (l *Limiter) Config() Config { return l.cfg }

// TryAcquire decides a request of priority p at once: Admit (it holds a
// slot), Probe or Full (it holds none).
func (l *Limiter) TryAcquire(p Priority) Verdict {
	if p >= Priorities {
		p = Normal
	}
	thr := l.thr[p].Load()
	for {
		n := l.inflight.Load()
		if n >= thr {
			if l.probing.Load() && n < l.full[p].Load() {
				return Probe
			}
			return Full
		}
		if l.inflight.CompareAndSwap(n, n+1) {
			if n+1 > l.peak.Load() {
				l.peak.Store(n + 1)
			}
			return Admit
		}
	}
}

// Outcome is how an admitted request's exchange went, for the limit's
// samples.
type Outcome uint8

// The outcomes Release takes.
const (
	// Success: the upstream answered (not 5xx); its latency is a sample.
	Success Outcome = iota
	// Failure: an error, a timeout or a 5xx: no latency sample (a fast
	// error is not spare capacity), and a window with as many failures as
	// successes does not raise the limit.
	Failure
	// Ignore: the exchange says nothing of the upstream (the client went
	// away first); only the slot is given back.
	Ignore
)

// Release gives back an admitted request's slot and records its exchange:
// latency is the upstream's time (to its response header). now closes the
// window when its time has come.
func (l *Limiter) Release(now time.Time, latency time.Duration, o Outcome) {
	switch o {
	case Success:
		l.hist.add(latency)
		l.samples.Add(1)
	case Failure:
		l.errs.Add(1)
	}
	l.free()
	l.maybeClose(now)
}

// free gives a slot back: to the first waiter it admits, if any, else to
// the pool.
func (l *Limiter) free() {
	if l.waiting.Load() > 0 {
		l.mu.Lock()
		w := l.firstFitting(l.inflight.Load() - 1)
		if w != nil {
			l.grant(w) // the slot passes to w: in flight unchanged
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
	}
	l.inflight.Add(-1)
}

// CountShed records that a request of priority p was refused.
func (l *Limiter) CountShed(p Priority) {
	if p >= Priorities {
		p = Normal
	}
	l.shed[p].Add(1)
}

// Stats is a limiter's state for reports.
type Stats struct {
	// Limit is the learned limit (the probe's lower one is not shown).
	Limit float64
	// InFlight and Waiting are the requests holding and waiting for a slot.
	InFlight, Waiting int64
	// MinLatency is the base latency (0 until measured); SampleLatency the
	// median of the last window.
	MinLatency, SampleLatency time.Duration
	// Probing is set while the base latency is being measured.
	Probing bool
	// Shed counts the requests refused, by priority.
	Shed [Priorities]uint64
	// Windows counts the sample windows closed.
	Windows uint64
}

// Stats returns the limiter's state now.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	s := Stats{Limit: l.limit, MinLatency: l.minRTT, SampleLatency: l.sampleRTT, Windows: l.windows}
	l.mu.Unlock()
	s.InFlight, s.Waiting, s.Probing = l.inflight.Load(), l.waiting.Load(), l.probing.Load()
	for p := range s.Shed {
		s.Shed[p] = l.shed[p].Load()
	}
	return s
}

// maybeClose closes the current window if it is over: one caller does, the
// others go on.
func (l *Limiter) maybeClose(now time.Time) {
	t := int64(now.Sub(l.base))
	if t < l.windowEnd.Load() {
		return
	}
	// A probe's window closes on time even without samples, so that it
	// ends by its deadline; any other waits for enough of them.
	if !l.probing.Load() && l.samples.Load()+l.errs.Load() < l.cfg.MinSamples {
		return
	}
	if !l.closing.CompareAndSwap(false, true) {
		return
	}
	l.mu.Lock()
	l.close(now)
	l.mu.Unlock()
	l.closing.Store(false)
}

// Tick closes the current window if it is over, as a release would: a
// caller with no traffic can end a probe on time.
func (l *Limiter) Tick(now time.Time) { l.maybeClose(now) }

// close ends the window at now. l.mu is held.
func (l *Limiter) close(now time.Time) {
	defer l.nextWindow(now)
	if l.phase == phaseMeasure && l.samples.Load() < l.cfg.MinSamples && !now.After(l.probeDeadline) {
		return // the measure goes on: its samples are kept
	}
	n := l.hist.drain(&l.counts)
	l.samples.Add(-int64(n))
	fails := l.errs.Swap(0)
	peak := l.peak.Swap(l.inflight.Load())
	l.windows++
	switch l.phase {
	case phaseDrain:
		switch {
		case l.inflight.Load() <= l.thr[Critical].Load():
			l.phase = phaseMeasure // the samples from now on are at the probe limit
		case now.After(l.probeDeadline):
			l.endProbe(now)
		}
		return
	case phaseMeasure:
		if int64(n) >= l.cfg.MinSamples {
			l.minRTT = median(&l.counts, n)
			l.sampleRTT = l.minRTT
		}
		l.endProbe(now)
		return
	}
	if n == 0 {
		return // only failures: nothing is known of the latency
	}
	sample := median(&l.counts, n)
	l.sampleRTT = sample
	if l.minRTT <= 0 {
		l.minRTT = sample
	}
	g := tolerance * float64(l.minRTT) / float64(sample)
	g = min(max(g, minGradient), maxGradient)
	queue := max(1, math.Sqrt(l.limit)/4)
	if uint64(fails) >= n || float64(peak) < l.limit/2 {
		// As many failures as answers, or traffic that never came near
		// the limit: nothing shows room for more.
		g, queue = min(g, 1), 0
	}
	next := g*l.limit + queue
	l.limit = (1-smoothing)*l.limit + smoothing*next
	l.limit = min(max(l.limit, float64(l.cfg.MinLimit)), float64(l.cfg.MaxLimit))
	if float64(sample) >= 2*tolerance*float64(l.minRTT) {
		l.atMin++ // the gradient at its floor
	} else {
		l.atMin = 0
	}
	if !now.Before(l.nextProbe) || l.atMin >= atMinProbe {
		l.startProbe(now)
		return
	}
	l.setThresholds(l.limit, &l.thr)
	l.setThresholds(l.limit, &l.full)
	l.wakeFitting()
}

// nextWindow starts a window at now: at least Window, and two base
// latencies so that the window's samples are of requests admitted in it.
func (l *Limiter) nextWindow(now time.Time) {
	w := max(l.cfg.Window, 2*l.minRTT)
	l.windowEnd.Store(int64(now.Sub(l.base) + w))
}

// startProbe lowers the admission thresholds to half the limit (never
// below MinLimit) until the in-flight count has fallen there and a window
// of samples has been taken. Requests within the full limit wait meanwhile
// instead of being refused. The probe ends by its deadline in any case.
func (l *Limiter) startProbe(now time.Time) {
	l.phase = phaseDrain
	l.atMin = 0
	probe := max(float64(l.cfg.MinLimit), math.Floor(l.limit/2))
	l.setThresholds(l.limit, &l.full)
	l.setThresholds(probe, &l.thr)
	l.probing.Store(true)
	l.probeDeadline = now.Add(l.probeBudget())
}

// probeBudget bounds a probe: long enough to drain and take a window of
// samples, short enough that a waiting request is not held long.
func (l *Limiter) probeBudget() time.Duration {
	return max(time.Second, 10*l.minRTT, 4*l.cfg.Window)
}

// ProbeWait returns the longest a request answered Probe may wait.
func (l *Limiter) ProbeWait() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.probeBudget()
}

func (l *Limiter) endProbe(now time.Time) {
	l.phase = phaseNone
	l.probing.Store(false)
	l.setThresholds(l.limit, &l.thr)
	l.setThresholds(l.limit, &l.full)
	j := 0.75 + 0.5*l.rng.Float64()
	l.nextProbe = now.Add(time.Duration(float64(l.cfg.ProbeInterval) * j))
	l.wakeFitting()
}

// setThresholds sets the admission thresholds of a limit: all of it for
// critical requests, (1 − r) for normal and (1 − r)² for sheddable ones,
// each at least 1 so that no class is refused everything.
func (l *Limiter) setThresholds(limit float64, t *[Priorities]atomic.Int64) {
	r := l.cfg.Reserve
	t[Critical].Store(max(1, int64(limit)))
	t[Normal].Store(max(1, int64(limit*(1-r))))
	t[Sheddable].Store(max(1, int64(limit*(1-r)*(1-r))))
}
