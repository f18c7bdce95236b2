package accuracy

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// Suite is the published accuracy run: every trace generator against every
// algorithm of one rate.
type Suite struct {
	// Config shapes the traces (its Slot is ignored: the suite builds a
	// window adversary and, when Precision is set, a bucket adversary).
	Config Config
	// Precision is the sub-bucket width of the precise sliding counter;
	// 0 leaves that row and the bucket adversary out.
	Precision time.Duration
	// Workers bounds the traces and evaluations run at once; default 1.
	Workers int
}

// Limits returns the limits the suite evaluates, all of Config.Rate: the
// sliding counter (two buckets, then with Precision), fixed_window,
// fixed_window_elastic, token_bucket, gcra (burst L), and the exact
// sliding_window_log itself as a check of the harness (it must score zero).
func (s *Suite) Limits() ([]*ratelimit.Limit, error) {
	r := s.Config.Rate
	defs := []ratelimit.Limit{
		{Algorithm: ratelimit.SlidingWindowCounter},
		{Algorithm: ratelimit.SlidingWindowCounter, Precision: s.Precision},
		{Algorithm: ratelimit.FixedWindow},
		{Algorithm: ratelimit.FixedWindowElastic},
		{Algorithm: ratelimit.TokenBucket},
		{Algorithm: ratelimit.GCRA},
		{Algorithm: ratelimit.SlidingWindowLog},
	}
	if s.Precision == 0 {
		defs = append(defs[:1], defs[2:]...)
	}
	out := make([]*ratelimit.Limit, 0, len(defs))
	for i := range defs {
		l := defs[i]
		l.Name = "accuracy"
		l.Rates = []ratelimit.Rate{r}
		if err := l.Finish(); err != nil {
			return nil, fmt.Errorf("accuracy: %s: %w", l.Algorithm, err)
		}
		out = append(out, &l)
	}
	return out, nil
}

// Traces builds the suite's traces: poisson, bursty, diurnal,
// adversary-window and (with Precision) adversary-bucket.
func (s *Suite) Traces() ([]*Trace, error) {
	type gen func(Config) (*Trace, error)
	c := s.Config
	gens := []gen{Poisson, Bursty, Diurnal, Adversary}
	cfgs := []Config{c, c, c, c}
	cfgs[3].Slot = c.Rate.Window
	if s.Precision > 0 {
		b := c
		b.Slot = s.Precision
		gens, cfgs = append(gens, Adversary), append(cfgs, b)
	}
	out := make([]*Trace, len(gens))
	errs := make([]error, len(gens))
	s.parallel(len(gens), func(i int) { out[i], errs[i] = gens[i](cfgs[i]) })
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Run builds the traces and evaluates every limit on every trace. Results
// are ordered by trace, then limit, as Traces and Limits list them.
func (s *Suite) Run() ([]Result, error) {
	limits, err := s.Limits()
	if err != nil {
		return nil, err
	}
	traces, err := s.Traces()
	if err != nil {
		return nil, err
	}
	n := len(traces) * len(limits)
	out := make([]Result, n)
	errs := make([]error, n)
	s.parallel(n, func(i int) {
		out[i], errs[i] = Evaluate(traces[i/len(limits)], limits[i%len(limits)])
	})
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parallel runs f(0..n-1) on at most Workers goroutines and waits.
func (s *Suite) parallel(n int, f func(int)) {
	w := max(s.Workers, 1)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(w, n) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// WriteTable writes results as a Markdown table: per trace and algorithm,
// requests, allowed, false allows, false denies, error % and the worst
// excess over L in any window.
func WriteTable(w io.Writer, rs []Result) error {
	if _, err := fmt.Fprintln(w, "| trace | algorithm | requests | allowed | false allows | false denies | error % | worst excess over L |"); err != nil {
		return err
	}
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|")
	for _, r := range rs {
		_, err := fmt.Fprintf(w, "| %s | %s | %d | %d | %d | %d | %s | %d |\n", r.Trace, r.Algorithm,
			r.Requests, r.Allowed, r.FalseAllows, r.FalseDenies, percent(r.ErrorRate()), r.WorstExcess)
		if err != nil {
			return err
		}
	}
	return nil
}

// percent formats a fraction as a percentage with four decimals, so that
// the field's 0.003% reference is visible ("0.0030%").
func percent(f float64) string { return fmt.Sprintf("%.4f%%", 100*f) }
