package headers

import (
	"strconv"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

// Window is one window of a limit for one client, as JSON: the element of
// the admin API's GET /admin/limits and of a quota route's answer. One type
// serves both so that the two reports cannot drift apart.
type Window struct {
	// Rate is the window's rate ("100/1m0s", "5000/day"); "" for a
	// concurrency limit.
	Rate string `json:"rate,omitempty"`
	// Limit is the window's capacity (the limit, the burst, or
	// max_in_flight).
	Limit int64 `json:"limit"`
	// WindowSeconds is the window's length in seconds (0 for
	// concurrency); for a calendar quota, the length of its current period.
	WindowSeconds float64 `json:"window_seconds,omitempty"`
	// Period is a calendar quota's period: "day", "week" or "month"; ""
	// for other algorithms.
	Period string `json:"period,omitempty"`
	// Used is the number of units counted now.
	Used int64 `json:"used"`
	// Remaining is the capacity left.
	Remaining int64 `json:"remaining"`
	// ResetSeconds is how long until Remaining next increases.
	ResetSeconds float64 `json:"reset_seconds"`
}

// Windows describes ws, the store's usage of l's windows at now, one
// Window each in the same order.
func Windows(l *ratelimit.Limit, ws []ratelimit.WindowUsage, now time.Time) []Window {
	out := make([]Window, 0, len(ws))
	for i, wu := range ws {
		w := Window{Used: wu.Used, Remaining: wu.Remaining, ResetSeconds: wu.Reset.Seconds()}
		switch {
		case l.Algorithm == ratelimit.Concurrency:
			w.Limit = l.MaxInFlight
		case i < len(l.Rates):
			w.Rate, w.WindowSeconds, w.Limit = wu.Rate.String(), wu.Rate.Window.Seconds(), l.Capacity(i)
			if start, end, ok := l.PeriodAt(i, now); ok {
				// A calendar quota: its period and the period's length.
				w.Period = l.PeriodOf(i).String()
				w.Rate = strconv.FormatInt(wu.Rate.Limit, 10) + "/" + w.Period
				w.WindowSeconds = end.Sub(start).Seconds()
			}
		default:
			// A window the limit does not list (no store reports one):
			// the store's own rate, rather than an index out of range.
			w.Rate, w.WindowSeconds, w.Limit = wu.Rate.String(), wu.Rate.Window.Seconds(), wu.Rate.Limit
		}
		out = append(out, w)
	}
	return out
}
