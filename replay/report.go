package replay

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/tollgate/gateway/proxy"
)

// outcomeOrder is the order in which Write lists outcomes.
var outcomeOrder = []proxy.Outcome{proxy.OutcomeForwarded, proxy.OutcomeLimited, proxy.OutcomeNoRoute,
	proxy.OutcomeBadRequest, proxy.OutcomeUnauthorized, proxy.OutcomeStoreError, proxy.OutcomeUpstreamError}

// Write prints r as text: a summary line, the outcomes, then one row per
// limit with requests, allowed, denied, peak usage and, for approximate
// limits, the disagreement with the exact sliding log, and, when a limit is
// batched, a column with the fleet's disagreement with the exact algorithm.
func (r *Report) Write(w io.Writer) error {
	span := r.Last.Sub(r.First)
	fmt.Fprintf(w, "replayed %d requests from %d lines (%d malformed)", r.Requests, r.Lines, r.Malformed)
	if r.RLS.Calls > 0 {
		fmt.Fprintf(w, " and %d rate limit service calls", r.RLS.Calls)
	}
	if r.Requests+r.RLS.Calls > 0 {
		fmt.Fprintf(w, ", %s to %s (%s)", r.First.UTC().Format(time.RFC3339), r.Last.UTC().Format(time.RFC3339), span)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "decided in time order, reordering within %s", r.ReorderWindow)
	if r.Late > 0 {
		fmt.Fprintf(w, "; %d lines came later than that and were decided at the latest instant before them", r.Late)
	}
	fmt.Fprintln(w)
	fmt.Fprint(w, "outcomes:")
	for _, o := range outcomeOrder {
		if n := r.Outcomes[o]; n > 0 {
			fmt.Fprintf(w, " %s=%d", o, n)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	batched := false
	for _, l := range r.Limits {
		batched = batched || l.Batched
	}
	head := "limit\talgorithm\tmode\trequests\tallowed\tdenied\tpeak usage\tvs exact log\t"
	if batched {
		head += "batched vs exact\t"
	}
	fmt.Fprintln(tw, head)
	for _, l := range r.Limits {
		mode := "enforce"
		if l.Shadow {
			mode = "shadow"
		}
		peak := "-"
		if l.PeakLimit > 0 {
			peak = fmt.Sprintf("%d/%d", l.PeakUsed, l.PeakLimit)
		}
		cmp := "exact"
		if l.Compared {
			cmp = fmt.Sprintf("%d false allows, %d false denies (%s)", l.FalseAllows, l.FalseDenies,
				percent(l.FalseAllows+l.FalseDenies, l.Requests))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t", l.Name, l.Algorithm, mode,
			l.Requests, l.Allowed, l.Denied, peak, cmp)
		switch {
		case l.Batched:
			fmt.Fprintf(tw, "%d gateways: %d false allows, %d false denies (%s); bound +%d units\t", l.Gateways,
				l.BatchFalseAllows, l.BatchFalseDenies, percent(l.BatchFalseAllows+l.BatchFalseDenies, l.Requests), l.BatchBound)
		case batched:
			fmt.Fprint(tw, "exact\t")
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return r.RLS.write(w)
}

// write prints the rate limit service's part: how many calls were decided
// as logged, the first decided otherwise, and one row per rule.
func (r *RLSReport) write(w io.Writer) error {
	if r.Calls == 0 && len(r.Rules) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "rate limit service: %d calls, %d decided as logged, %d otherwise", r.Calls, r.AsLogged, r.Otherwise)
	if r.StoreErrors > 0 {
		fmt.Fprintf(w, ", %d logged as store errors (not compared)", r.StoreErrors)
	}
	if r.Dropped > 0 {
		fmt.Fprintf(w, "; %d descriptors the log left out", r.Dropped)
	}
	fmt.Fprintln(w)
	for _, s := range r.Samples {
		fmt.Fprintf(w, "  otherwise: %s\n", s)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "rule\talgorithm\tmode\tdescriptors\tallowed\tdenied\tpeak usage\t")
	for _, l := range r.Rules {
		mode := "enforce"
		if l.Shadow {
			mode = "shadow"
		}
		peak := "-"
		if l.PeakLimit > 0 {
			peak = fmt.Sprintf("%d/%d", l.PeakUsed, l.PeakLimit)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t\n", l.Name, l.Algorithm, mode, l.Requests, l.Allowed, l.Denied, peak)
	}
	return tw.Flush()
}

func percent(n, of int64) string {
	if of == 0 {
		return "0%"
	}
	return fmt.Sprintf("%.4f%%", 100*float64(n)/float64(of))
}
