package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Active health checks.
//
// A Pool with a HealthCheck runs one scheduler goroutine: each pass over
// the targets takes one Interval, in up to maxTicks ticks that each probe
// their share of the targets (spread over the interval, with jitter so
// that pools made at the same instant do not probe in step; batched so
// that 1,000 targets wake the process 20 times an interval, not 1,000),
// and each probe runs in a goroutine of its own so that a target that
// hangs delays no other. A target has at most one probe in flight: the
// goroutines are bounded by the targets, and Timeout ≤ Interval (policy
// checks it) ends each probe before the target's next turn.
//
// A plain http:// target is probed by the probe's own HTTP/1.1 exchange
// on a kept connection (probe_h1.go); h2c and https targets through
// net/http's transport (probe).
//
// A new target is healthy until proven otherwise: it takes traffic at
// once, and UnhealthyAfter failed probes in a row (the first within one
// Interval) take it out. Starting unhealthy would refuse every request
// for an Interval after each start, and after a reload that changed a
// route; a target that keeps its address across a reload keeps its state.

// probeBodyLimit bounds what a probe reads of an answer's body: enough for
// a status page, and a probe never buffers what a target sends.
const probeBodyLimit = 4 << 10

// probeHeaderLimit bounds the response headers a probe reads.
const probeHeaderLimit = 64 << 10

// probeUserAgent names the gateway's probes in the targets' logs.
const probeUserAgent = "Tollgate-HealthCheck/1"

// probeState is the active health check's state of one target. fails and
// passes are written by the target's one probe in flight (running is its
// token); the counters are read by metrics and the admin API.
type probeState struct {
	running        atomic.Bool
	fails, passes  int
	passed, failed atomic.Uint64
	// lastError is why the last probe failed; nil after a pass.
	lastError atomic.Pointer[string]
}

// ProbesPassed and ProbesFailed return the numbers of health probes of t
// that passed and failed.
func (t *Target) ProbesPassed() uint64 { return t.probe.passed.Load() }

// ProbesFailed returns the number of health probes of t that failed.
func (t *Target) ProbesFailed() uint64 { return t.probe.failed.Load() }

// LastProbeError returns why t's last health probe failed, "" when it
// passed (or none ran).
func (t *Target) LastProbeError() string {
	if s := t.probe.lastError.Load(); s != nil {
		return *s
	}
	return ""
}

// record applies one probe's outcome (err nil: passed) to t under hc and
// reports whether t's health changed.
func record(t *Target, hc *HealthCheck, err error) (changed bool) {
	st := &t.probe
	if err == nil {
		st.passed.Add(1)
		st.lastError.Store(nil)
		st.fails = 0
		st.passes++
		if t.unhealthy.Load() && st.passes >= hc.HealthyAfter {
			t.unhealthy.Store(false)
			return true
		}
		return false
	}
	st.failed.Add(1)
	msg := err.Error()
	st.lastError.Store(&msg)
	st.passes = 0
	st.fails++
	if !t.unhealthy.Load() && st.fails >= hc.UnhealthyAfter {
		t.unhealthy.Store(true)
		return true
	}
	return false
}

// resetHealth forgets t's active health: a target whose route no longer
// checks health is healthy.
func resetHealth(t *Target) {
	t.unhealthy.Store(false)
	t.probe.fails, t.probe.passes = 0, 0
	t.probe.lastError.Store(nil)
}

// prober sends the probes of one Pool. Its transports keep one idle
// connection per target between probes, so that a probe costs a request
// on an open connection rather than a dial (and a TLS handshake).
type prober struct {
	hc *HealthCheck
	// transports by kind: "" for http and for https to an address,
	// "h2c", or the TLS server name of an https target whose host is a
	// name (its certificate is checked against the name, not the
	// address). Used by the scheduler goroutine only.
	transports map[string]*http.Transport
	// roots verifies https targets' certificates; nil uses the system's
	// (as the proxy's transport does).
	roots *x509.CertPool
}

func newProber(hc *HealthCheck) *prober {
	return &prober{hc: hc, transports: map[string]*http.Transport{}}
}

// transport returns the transport that probes t.
func (pr *prober) transport(t *Target) *http.Transport {
	kind := ""
	switch {
	case t.H2C:
		kind = "h2c"
	case t.URL.Scheme == "https" && t.ServerName != "":
		kind = "tls:" + t.ServerName
	}
	if tr := pr.transports[kind]; tr != nil {
		return tr
	}
	var p http.Protocols
	if t.H2C {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
		p.SetHTTP2(true)
	}
	tr := &http.Transport{
		Protocols:   &p,
		Proxy:       nil,
		DialContext: GuardedDial(&net.Dialer{Timeout: pr.hc.Timeout, KeepAlive: 30 * time.Second}),
		// One idle connection per target, kept from one probe to the
		// next; no bound on their total (a pool has at most its targets').
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     2*pr.hc.Interval + pr.hc.Timeout,
		TLSHandshakeTimeout: pr.hc.Timeout,
		DisableCompression:  true,
		// A status page needs few headers; a target sending megabytes of
		// them (net/http allows 10 MiB by default) fails its probe
		// instead of holding that much per probe in flight.
		MaxResponseHeaderBytes: probeHeaderLimit,
	}
	if t.URL.Scheme == "https" {
		tr.TLSClientConfig = &tls.Config{ServerName: t.ServerName, RootCAs: pr.roots, MinVersion: tls.VersionTLS12}
	}
	pr.transports[kind] = tr
	return tr
}

func (pr *prober) close() {
	for _, tr := range pr.transports {
		tr.CloseIdleConnections()
	}
}

// errStatus is a probe's answer outside 200..399.
type errStatus int

func (e errStatus) Error() string { return fmt.Sprintf("status %d", int(e)) }

// probe sends one health check to t through rt: a GET of hc.Path with the
// configured Host, passing on a status in 200..399 (a redirect is not
// followed: it answers) whose body, read up to probeBodyLimit, arrives
// within the timeout.
func probe(ctx context.Context, rt http.RoundTripper, t *Target, hc *HealthCheck) error {
	ctx, cancel := context.WithTimeout(ctx, hc.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL.Scheme+"://"+t.URL.Host+hc.Path, nil)
	if err != nil {
		return err
	}
	req.Host = t.Host
	req.Header.Set("User-Agent", probeUserAgent)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no answer within %s", hc.Timeout)
		}
		return err
	}
	// Past the bound the connection is closed rather than drained.
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, probeBodyLimit))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 399 {
		return errStatus(resp.StatusCode)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("body not read within %s", hc.Timeout)
		}
		return fmt.Errorf("reading the body: %w", err)
	}
	return nil
}

// healthLoop probes p's targets until ctx ends.
func (p *Pool) healthLoop(ctx context.Context) {
	defer p.wg.Done()
	hc := p.spec.Health
	pr := newProber(hc)
	defer pr.close()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	first := true
	for {
		ts := p.Targets()
		p.h1.prune(ts) // targets a DNS answer dropped
		// A pass is up to maxTicks ticks, each probing its share of the
		// targets: spread over the interval, yet a large pool wakes the
		// process maxTicks times per interval rather than once per target
		// (each wake-up from idle costs more CPU than a probe on an open
		// connection).
		ticks := min(len(ts), maxTicks)
		tick := hc.Interval / time.Duration(ticks)
		for i := range ticks {
			// ±20% of a tick: the pass still takes about one Interval.
			wait := tick*4/5 + rand.N(tick*2/5+1)
			if first {
				wait, first = rand.N(tick+1), false
			}
			timer.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			for _, t := range ts[i*len(ts)/ticks : (i+1)*len(ts)/ticks] {
				p.launch(ctx, pr, t)
			}
		}
	}
}

// maxTicks bounds the scheduler's wake-ups per interval.
const maxTicks = 20

// launch starts a probe of t unless one is still in flight (a target
// that hangs keeps one probe, not one per pass).
func (p *Pool) launch(ctx context.Context, pr *prober, t *Target) {
	if !t.probe.running.CompareAndSwap(false, true) {
		return
	}
	hc := p.spec.Health
	var rt http.RoundTripper
	if t.H2C || t.URL.Scheme != "http" {
		rt = pr.transport(t)
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer t.probe.running.Store(false)
		var err error
		if rt == nil {
			err = probeH1(ctx, &p.h1, t, hc)
		} else {
			err = probe(ctx, rt, t, hc)
		}
		if ctx.Err() != nil {
			return // stopping: the outcome is the stop's, not the target's
		}
		if record(t, hc, err) {
			p.logHealth(t, err)
		}
	}()
}

// logHealth logs a change of t's health, at most one line a second per
// pool (a flapping target among many would otherwise flood the log).
func (p *Pool) logHealth(t *Target, err error) {
	n, ok := p.logs.Allow(time.Now())
	if !ok {
		return
	}
	if t.unhealthy.Load() {
		p.log.Warn("upstream target unhealthy", "route", p.route, "target", t.Name, "address", t.URL.Host,
			"error", err, "failed_probes", p.spec.Health.UnhealthyAfter, "suppressed", n)
		return
	}
	p.log.Info("upstream target healthy again", "route", p.route, "target", t.Name, "address", t.URL.Host, "suppressed", n)
}
