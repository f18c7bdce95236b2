package adaptive_test

import (
	"container/heap"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tollgate/gateway/adaptive"
)

// sim is an upstream and its clients on a virtual clock: the upstream
// serves capacity requests at once, each for about service, and queues the
// rest in arrival order (so latency grows with load, as a thread pool's
// does); clients form a closed loop, each sending its next request when
// the last one ended, or after backoff when it was refused. Nothing reads
// the wall clock.
type sim struct {
	l        *adaptive.Limiter
	t0, now  time.Time
	capacity int
	service  time.Duration
	// jitter spreads service times over ±jitter of service.
	jitter  float64
	backoff time.Duration
	rng     *rand.Rand

	events eventHeap
	seq    uint64
	busy   int
	queue  []*simReq
	// prio gives each client's priority (nil: all normal); failFast makes
	// the upstream answer every request at once with an error.
	prio     func(client int) adaptive.Priority
	failFast bool

	// Records of admitted requests ending at or after recordFrom.
	recordFrom time.Time
	latencies  []time.Duration
	byPrio     [adaptive.Priorities]struct{ ok, shed int }
	latByPrio  [adaptive.Priorities][]time.Duration
	done       int
}

type simReq struct {
	client  int
	prio    adaptive.Priority
	arrived time.Time
}

type event struct {
	at     time.Time
	client int     // a client's next try (req nil)
	req    *simReq // an exchange's end
	seq    uint64
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newSim(cfg adaptive.Config, capacity int, service time.Duration, clients int, seed uint64) *sim {
	t0 := time.Unix(1_000_000, 0)
	s := &sim{l: adaptive.New(cfg, t0), t0: t0, now: t0, capacity: capacity, service: service,
		jitter: 0.1, backoff: service, rng: rand.New(rand.NewPCG(seed, 7))}
	for c := range clients {
		s.push(&event{at: t0.Add(time.Duration(s.rng.Int64N(int64(service)))), client: c})
	}
	return s
}

func (s *sim) push(e *event) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.events, e)
}

func (s *sim) serviceTime() time.Duration {
	f := 1 + s.jitter*(2*s.rng.Float64()-1)
	return time.Duration(float64(s.service) * f)
}

// run advances the clock to until, calling each(now) every step of the
// limit's samples (every 50ms of virtual time).
func (s *sim) run(until time.Time, each func(now time.Time)) {
	nextEach := s.now
	for s.events.Len() > 0 {
		e := s.events[0]
		if e.at.After(until) {
			break
		}
		heap.Pop(&s.events)
		for each != nil && !nextEach.After(e.at) {
			each(nextEach)
			nextEach = nextEach.Add(50 * time.Millisecond)
		}
		s.now = e.at
		if e.req == nil {
			s.try(e.client)
		} else {
			s.finish(e.req)
		}
	}
	s.now = until
}

func (s *sim) try(client int) {
	p := adaptive.Normal
	if s.prio != nil {
		p = s.prio(client)
	}
	switch s.l.TryAcquire(p) {
	case adaptive.Admit:
		r := &simReq{client: client, prio: p, arrived: s.now}
		if s.failFast {
			s.push(&event{at: s.now.Add(time.Millisecond), req: r})
			return
		}
		if s.busy < s.capacity {
			s.start(r)
		} else {
			s.queue = append(s.queue, r)
		}
	default:
		// Refused (a probe's waiting is left to the limiter's own tests).
		s.l.CountShed(p)
		if !s.now.Before(s.recordFrom) {
			s.byPrio[p].shed++
		}
		s.push(&event{at: s.now.Add(s.backoff), client: client})
	}
}

func (s *sim) start(r *simReq) {
	s.busy++
	s.push(&event{at: s.now.Add(s.serviceTime()), req: r})
}

func (s *sim) finish(r *simReq) {
	lat := s.now.Sub(r.arrived)
	if s.failFast {
		s.l.Release(s.now, lat, adaptive.Failure)
	} else {
		s.busy--
		for len(s.queue) > 0 && s.busy < s.capacity {
			next := s.queue[0]
			s.queue = s.queue[1:]
			s.start(next)
		}
		s.l.Release(s.now, lat, adaptive.Success)
	}
	if !s.now.Before(s.recordFrom) {
		s.latencies = append(s.latencies, lat)
		s.latByPrio[r.prio] = append(s.latByPrio[r.prio], lat)
		s.byPrio[r.prio].ok++
		s.done++
	}
	s.push(&event{at: s.now, client: r.client})
}

// record clears the records and keeps those from now on.
func (s *sim) record() {
	s.recordFrom = s.now
	s.latencies, s.done = s.latencies[:0], 0
	s.byPrio = [adaptive.Priorities]struct{ ok, shed int }{}
	s.latByPrio = [adaptive.Priorities][]time.Duration{}
}

func p99(ls []time.Duration) time.Duration {
	if len(ls) == 0 {
		return 0
	}
	c := slices.Clone(ls)
	slices.Sort(c)
	return c[len(c)*99/100]
}
