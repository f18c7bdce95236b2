package accuracy

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tollgate/gateway/ratelimit"
	"github.com/tollgate/gateway/ratelimit/window"
)

// DistinctRow is the distinct algorithm's count at one true number of
// distinct values, over several independent streams: exact below
// ratelimit.DistinctExact, the HyperLogLog estimate above.
type DistinctRow struct {
	N        int64   // distinct values counted
	Trials   int     // independent streams
	Mean     float64 // mean relative error (estimate − N) / N
	RMS      float64 // root mean square of the relative errors
	MaxAbs   float64 // largest |relative error|
	Exact    bool    // every trial counted N exactly
	MaxFirst int64   // for the limit rows: the most values admitted
	MinFirst int64   // and the fewest
	// Leak is, for the limit rows, the share of further new values
	// admitted once the first was denied (the sketch cannot tell them
	// from counted ones: their registers are already as high).
	Leak float64
}

// leakTries is how many new values a limit row sends after the first
// denial.
const leakTries = 10_000

// distinctCheckpoints are the counts the table reports.
var distinctCheckpoints = []int64{100, 128, 129, 200, 1_000, 10_000, 100_000, 1_000_000, 10_000_000}

// distinctLimit returns a one-window distinct limit of l per hour.
func distinctLimit(l int64) *ratelimit.Limit {
	lim := &ratelimit.Limit{Name: "distinct", Algorithm: ratelimit.Distinct,
		Rates: []ratelimit.Rate{{Limit: l, Window: time.Hour}}}
	if err := lim.Finish(); err != nil {
		panic(err)
	}
	return lim
}

// DistinctCounts feeds trials streams of up to maxN random distinct
// values (64-bit hashes, as the gateway's SHA-256 of a value gives) into
// one key of a distinct limit too high to deny them, within one
// sub-window, and compares its count with the truth at each checkpoint up
// to maxN.
func DistinctCounts(seed uint64, trials int, maxN int64) []DistinctRow {
	lim := distinctLimit(ratelimit.DistinctMaxLimit)
	lim.Rates[0].Limit = 1 << 50 // the count only: never denies
	p := lim.Params(0)
	now := int64(1_702_080_000_000_000)
	var cps []int64
	for _, c := range distinctCheckpoints {
		if c <= maxN {
			cps = append(cps, c)
		}
	}
	errs := make([][]float64, len(cps))
	for tr := range trials {
		r := rand.New(rand.NewPCG(seed, uint64(tr)))
		var s window.DistinctState
		s.Init(&p, now)
		var n int64
		for k, c := range cps {
			for ; n < c; n++ {
				s.Take(&p, now, r.Uint64())
			}
			errs[k] = append(errs[k], float64(s.Count(&p, now)-c)/float64(c))
		}
	}
	rows := make([]DistinctRow, len(cps))
	for k, c := range cps {
		rows[k] = summarize(c, errs[k])
	}
	return rows
}

func summarize(n int64, es []float64) DistinctRow {
	row := DistinctRow{N: n, Trials: len(es), Exact: true}
	for _, e := range es {
		row.Mean += e / float64(len(es))
		row.RMS += e * e / float64(len(es))
		row.MaxAbs = max(row.MaxAbs, math.Abs(e))
		if e != 0 {
			row.Exact = false
		}
	}
	row.RMS = math.Sqrt(row.RMS)
	return row
}

// DistinctLimits sends each limit L of ls new distinct values until the
// first denial, trials times, and reports how many were admitted: L
// exactly within the exact range, L within the estimate's error above it.
func DistinctLimits(seed uint64, trials int, ls []int64) []DistinctRow {
	now := int64(1_702_080_000_000_000)
	var rows []DistinctRow
	for _, l := range ls {
		lim := distinctLimit(l)
		p := lim.Params(0)
		var es []float64
		row := DistinctRow{N: l, MinFirst: math.MaxInt64}
		for tr := range trials {
			r := rand.New(rand.NewPCG(seed^uint64(l), uint64(tr)))
			var s window.DistinctState
			s.Init(&p, now)
			var admitted int64
			for {
				v := r.Uint64()
				if ok, _ := s.Allow(&p, now, v); !ok {
					break
				}
				s.Take(&p, now, v)
				admitted++
			}
			es = append(es, float64(admitted-l)/float64(l))
			row.MaxFirst, row.MinFirst = max(row.MaxFirst, admitted), min(row.MinFirst, admitted)
			leaked := 0
			for range leakTries {
				v := r.Uint64()
				if ok, _ := s.Allow(&p, now, v); ok {
					s.Take(&p, now, v)
					leaked++
				}
			}
			row.Leak += float64(leaked) / leakTries / float64(trials)
		}
		sum := summarize(l, es)
		sum.MaxFirst, sum.MinFirst, sum.Leak = row.MaxFirst, row.MinFirst, row.Leak
		rows = append(rows, sum)
	}
	return rows
}

// WriteDistinctTables writes both tables as Markdown.
func WriteDistinctTables(w io.Writer, counts, limits []DistinctRow) error {
	pct := func(x float64) string { return fmt.Sprintf("%+.3f%%", 100*x) }
	if _, err := fmt.Fprintf(w, "| distinct values | trials | mode | mean error | RMS error | max \\|error\\| |\n|---:|---:|---|---:|---:|---:|\n"); err != nil {
		return err
	}
	for _, r := range counts {
		mode := "estimated"
		if r.N <= ratelimit.DistinctExact {
			mode = "exact"
		}
		if _, err := fmt.Fprintf(w, "| %d | %d | %s | %s | %.3f%% | %.3f%% |\n", r.N, r.Trials, mode, pct(r.Mean), 100*r.RMS, 100*r.MaxAbs); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(w, "\n| limit L | trials | values admitted before the first denial (min – max) | mean error | max \\|error\\| | new values admitted after it |\n|---:|---:|---|---:|---:|---:|\n"); err != nil {
		return err
	}
	for _, r := range slices.Clone(limits) {
		if _, err := fmt.Fprintf(w, "| %d | %d | %d – %d | %s | %.3f%% | %.2f%% |\n", r.N, r.Trials, r.MinFirst, r.MaxFirst, pct(r.Mean), 100*r.MaxAbs, 100*r.Leak); err != nil {
			return err
		}
	}
	return nil
}
