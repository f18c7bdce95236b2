package ratelimit

// Params are the constants of one window of a Limit, in ticks, as the
// algorithm math uses them. Build them with Limit.Params.
type Params struct {
	// Algorithm is the limit's algorithm.
	Algorithm Algorithm
	// Window is W in ticks (0 for Concurrency).
	Window int64
	// Limit is L, the rate's count (MaxInFlight for Concurrency).
	Limit int64
	// Capacity is the most units one request may take: the burst for the
	// bucket algorithms (default L), L otherwise, MaxInFlight for
	// Concurrency.
	Capacity int64
	// Precision is P, the sub-bucket width of SlidingWindowCounter in ticks
	// (W when the limit sets none); 0 for other algorithms.
	Precision int64
	// Buckets is N = W / P for SlidingWindowCounter; 0 otherwise.
	Buckets int64
	// Calendar is where the periods of a Quota window begin; the zero
	// Calendar for other algorithms.
	Calendar Calendar
}

// Windows returns the number of window states a key of l keeps: one per
// rate, or one for Concurrency.
func (l *Limit) Windows() int {
	if l.Algorithm == Concurrency {
		return 1
	}
	return len(l.Rates)
}

// Params returns the constants of window i of l (i ignored for
// Concurrency).
func (l *Limit) Params(i int) Params {
	if l.Algorithm == Concurrency {
		return Params{Algorithm: Concurrency, Limit: l.MaxInFlight, Capacity: l.MaxInFlight}
	}
	r := l.Rates[i]
	p := Params{
		Algorithm: l.Algorithm,
		Window:    int64(r.Window / Tick),
		Limit:     r.Limit,
		Capacity:  l.Capacity(i),
	}
	if l.Algorithm == Distinct {
		p.Precision = int64(l.distinctPrecision(r.Window) / Tick)
		p.Buckets = p.Window / p.Precision
	}
	if l.Algorithm == SlidingWindowCounter {
		p.Precision = p.Window
		if l.Precision > 0 {
			p.Precision = int64(l.Precision / Tick)
		}
		p.Buckets = p.Window / p.Precision
	}
	p.Calendar = l.calendar(i)
	return p
}

// param returns a pointer to Params(i): the cached one of a finished limit
// (no allocation), else a fresh copy.
func (l *Limit) param(i int) *Params {
	if i < len(l.params) {
		return &l.params[i]
	}
	p := l.Params(i)
	return &p
}

// ParamsOf returns Params(i) without copying: the cached constants of a
// finished limit (shared: callers must not modify them), else a fresh copy.
func (l *Limit) ParamsOf(i int) *Params { return l.param(i) }
